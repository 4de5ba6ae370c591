//! A real OCI registry on loopback for the module-distribution tests: CNCF
//! distribution's `registry`, built from its Go module by
//! scripts/registry.sh (cached outside the repo; REGISTRY_BINARY skips the
//! build), storing blobs in a temp dir, stopped when dropped (and killed
//! with the test process).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct OciRegistry {
    /// `127.0.0.1:<port>`, as references and --insecure-registry name it.
    pub address: String,
    /// Where it keeps what was pushed (`docker/registry/v2/...`).
    pub storage: PathBuf,
    dir: PathBuf,
    child: Child,
}

impl OciRegistry {
    pub fn start(test: &str) -> Self {
        let root = control_plane::repo_root();
        let built = Command::new("bash")
            .arg(root.join("scripts/registry.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("running scripts/registry.sh");
        assert!(built.status.success(), "scripts/registry.sh failed");
        let binary = String::from_utf8_lossy(&built.stdout).lines().last().expect("a registry binary").to_owned();

        let dir = std::env::temp_dir().join(format!("oci-registry-{test}-{}", std::process::id()));
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage).expect("a registry dir");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let address = format!("127.0.0.1:{port}");
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                storage.display()
            ),
        )
        .expect("writing the registry config");
        let log = std::fs::File::create(dir.join("registry.log")).expect("a log file");
        let mut command = Command::new(&binary);
        command.arg("serve").arg(&config).stdout(log.try_clone().expect("the log")).stderr(log);
        // SAFETY: prctl in the child before exec; async-signal-safe.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("starting {binary}: {e}"));
        let registry = OciRegistry { address, storage, dir, child };
        registry.wait_until_serving();
        registry
    }

    fn wait_until_serving(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.get_status("/v2/") == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the registry at {} did not start; see {}", self.address, self.dir.join("registry.log").display());
    }

    fn get_status(&self, path: &str) -> Option<u16> {
        let mut stream = TcpStream::connect(&self.address).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.address).ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }

    /// The file holding the blob `digest` (`sha256:<hex>`), to corrupt it
    /// behind the registry's back.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.storage.join("docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

impl Drop for OciRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
