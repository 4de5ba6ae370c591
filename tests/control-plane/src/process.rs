//! Child processes that die with the test process.
//!
//! Every child is forked by one thread that lives as long as the process:
//! PR_SET_PDEATHSIG fires when the *thread* that forked a child exits, so
//! forking from a short-lived test thread (or a tokio worker) would kill the
//! control plane under the feet of the next test. The children also get a
//! process group of their own, so a Ctrl-C in a terminal reaches only us and
//! we stop them in order.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::Error;

type Request = (Command, mpsc::Sender<std::io::Result<Child>>);

static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        // The sender lives in a static, so recv() never fails and the thread
        // never ends: exactly what PR_SET_PDEATHSIG needs.
        std::thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                while let Ok((mut command, reply)) = rx.recv() {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("spawning the control-plane spawner thread");
        Mutex::new(tx)
    })
}

/// A running control plane process, its output going to `log`.
#[derive(Debug)]
pub(crate) struct Proc {
    pub name: &'static str,
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &'static str, binary: &Path, args: &[String], log: PathBuf) -> Result<Proc, Error> {
        let out = File::create(&log).map_err(|e| Error::io(format!("creating {}", log.display()), e))?;
        let err = out.try_clone().map_err(|e| Error::io("duplicating a log file handle", e))?;
        let mut command = Command::new(binary);
        command.args(args).stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let (tx, rx) = mpsc::channel();
        let spawned = {
            let sender = spawner().lock().unwrap_or_else(|p| p.into_inner());
            sender.send((command, tx)).ok().and_then(|()| rx.recv().ok())
        };
        let child = match spawned {
            Some(result) => result.map_err(|source| Error::Spawn { binary: binary.to_owned(), source })?,
            None => {
                let source = std::io::Error::other("the spawner thread is gone");
                return Err(Error::Spawn { binary: binary.to_owned(), source });
            }
        };
        tracing::debug!(process = name, pid = child.id(), "started");
        Ok(Proc { name, child, log })
    }

    /// The exit error with the log's tail, if the process has ended.
    pub fn check_alive(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(Error::Exited { process: self.name, status, log_tail: tail(&self.log, 30) }),
            Ok(None) => Ok(()),
            Err(e) => Err(Error::io(format!("waiting for {}", self.name), e)),
        }
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn stop(mut self, grace: Duration) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: plain kill(2) on our own child, which has not been reaped yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        tracing::warn!(process = self.name, "did not stop on SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last `lines` lines of a log file (at most 64 KiB read).
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else { return String::from("(no log)") };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
