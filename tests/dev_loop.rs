//! `wasm-operator dev` (the local dev loop for any module) against a real
//! kube-apiserver (tests/control-plane), as a developer runs it: the admin's
//! kubeconfig, real module files (target/greeting.wasm and
//! target/greeting-v2.wasm, which `make test` builds).
//! - `--once` installs the CRD, runs the host, applies a sample, prints the
//!   ConfigMaps, the status and the events, and exits when converged;
//! - without it, replacing the module file swaps the new version in, and
//!   the ConfigMaps it rewrites are printed again, with the swap.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, User};

fn root() -> PathBuf {
    control_plane::repo_root()
}

fn built(path: &str) -> PathBuf {
    let path = root().join(path);
    assert!(
        path.is_file(),
        "{} is missing: run `make build` and the test modules' targets (make test does)",
        path.display()
    );
    path
}

fn namespace(plane: &ControlPlane, prefix: &str) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(plane.create_namespace(prefix)).expect("a namespace")
}

/// A folder under target/ for this test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

fn sample(dir: &Path) -> PathBuf {
    let path = dir.join("hello.yaml");
    std::fs::write(
        &path,
        "apiVersion: example.c5c3.io/v1\nkind: Greeting\nmetadata:\n  name: hello\nspec:\n  message: hi\n  audiences: [world]\n",
    )
    .expect("writing the sample");
    path
}

/// `wasm-operator --module MODULE dev -f SAMPLE --namespace NS [extra...]`
/// as the cluster's admin; killed if the test fails.
struct Dev {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dev {
    fn start(plane: &ControlPlane, module: &Path, sample: &Path, namespace: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(built("target/release/wasm-operator"))
            .arg("--module")
            .arg(module)
            .arg("dev")
            .arg("-f")
            .arg(sample)
            .args(["--namespace", namespace])
            .args(extra)
            .env("KUBECONFIG", plane.kubeconfig(User::Admin))
            .env_remove("WATCH_NAMESPACE")
            .env_remove("WASM_OPERATOR_MODULES")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting wasm-operator dev");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let lines = stdout.clone();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                lines.lock().expect("stdout lines").push(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let text = stderr.clone();
        let mut err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            while let Ok(read) = err.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                text.lock().expect("stderr").push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
        Self { child, stdout, stderr }
    }

    fn stdout(&self) -> String {
        self.stdout.lock().expect("stdout lines").join("\n")
    }

    fn context(&self) -> String {
        format!("--- stdout\n{}\n--- stderr\n{}", self.stdout(), self.stderr.lock().expect("stderr"))
    }

    /// Waits until a printed line contains each of `parts`.
    fn wait_line(&self, parts: &[&str], timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .stdout
                .lock()
                .expect("stdout lines")
                .iter()
                .find(|line| parts.iter().all(|part| line.contains(part)))
                .cloned();
            if let Some(line) = found {
                return line;
            }
            assert!(Instant::now() < deadline, "no line with {parts:?} in {}s\n{}", timeout.as_secs(), self.context());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for dev") {
                // The readers get the last lines.
                std::thread::sleep(Duration::from_millis(200));
                return status;
            }
            assert!(Instant::now() < deadline, "dev did not exit in {}s\n{}", timeout.as_secs(), self.context());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn once_prints_the_configmaps_the_status_and_the_events_then_exits() {
    let plane = ControlPlane::shared();
    let ns = namespace(plane, "dev-once");
    let dir = scratch("dev-loop-once");
    let mut dev =
        Dev::start(plane, &built("target/greeting.wasm"), &sample(&dir), &ns, &["--once", "--timeout", "90s"]);
    let status = dev.wait_exit(Duration::from_secs(120));
    let context = dev.context();
    assert!(status.success(), "exit {status}\n{context}");
    let stdout = dev.stdout();
    for expected in [
        format!("ConfigMap {ns}/hello (of Greeting hello): data {{message: hi}}"),
        format!("ConfigMap {ns}/hello-world (of Greeting hello): data {{message: \"hi, world\"}}"),
        format!("Greeting {ns}/hello (generation 1) status:"),
        "observedGeneration: 1".to_owned(),
        "phase: Published in ConfigMap hello, hello-world".to_owned(),
        format!("event Normal Created Greeting {ns}/hello: Created ConfigMap hello"),
        "converged".to_owned(),
    ] {
        assert!(stdout.contains(&expected), "{expected:?} not printed\n{context}");
    }
    // The status is printed after the objects it names; converged last.
    let configmap = stdout.find(&format!("ConfigMap {ns}/hello ")).expect("printed");
    let published = stdout.find("phase: Published").expect("printed");
    assert!(configmap < published, "{context}");
    assert!(stdout.trim_end().ends_with("converged"), "{context}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_replaced_module_file_is_swapped_in_and_its_configmaps_printed_again() {
    let plane = ControlPlane::shared();
    let ns = namespace(plane, "dev-swap");
    let dir = scratch("dev-loop-swap");
    let module = dir.join("greeting.wasm");
    std::fs::copy(built("target/greeting.wasm"), &module).expect("copying the module");
    let mut dev = Dev::start(plane, &module, &sample(&dir), &ns, &[]);
    dev.wait_line(&["phase: Published in ConfigMap hello, hello-world"], Duration::from_secs(90));
    dev.wait_line(
        &[&format!("ConfigMap {ns}/hello (of Greeting hello): data {{message: hi}}")],
        Duration::from_secs(5),
    );

    // A rebuild: the new file renamed into place.
    let next = dir.join("greeting.wasm.new");
    std::fs::copy(built("target/greeting-v2.wasm"), &next).expect("copying v2");
    std::fs::rename(&next, &module).expect("replacing the module");
    dev.wait_line(&["swap: module version swapped in"], Duration::from_secs(60));
    for configmap in ["hello", "hello-world"] {
        dev.wait_line(
            &[&format!("ConfigMap {ns}/{configmap} (of Greeting hello): data {{"), "revision: \"2\"}"],
            Duration::from_secs(30),
        );
    }
    let stdout = dev.stdout();
    let swapped = stdout.find("swap: module version swapped in").expect("printed");
    let revised = stdout.find("revision: \"2\"").expect("printed");
    assert!(swapped < revised, "{}", dev.context());

    // Ctrl-C: it stops, cleanly.
    // SAFETY: kill(2) on our child's pid.
    unsafe { libc::kill(libc::pid_t::try_from(dev.child.id()).expect("a pid"), libc::SIGINT) };
    let status = dev.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "exit {status} after SIGINT\n{}", dev.context());
    let _ = std::fs::remove_dir_all(dir);
}
