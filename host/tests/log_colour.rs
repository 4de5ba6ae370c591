//! Text logs carry colour codes only on a terminal: written to a file (as
//! `run --log-format text 2> operator.log` or a collector's pipe does),
//! they are plain text. Through the binary, stderr redirected to a file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo_file(path: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    assert!(path.exists(), "{} is missing: `make test` builds it", path.display());
    path
}

fn log_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("log-colour-{name}-{}.log", std::process::id()))
}

fn plain(log: &Path) -> String {
    let text = std::fs::read_to_string(log).expect("the log file");
    let _ = std::fs::remove_file(log);
    assert!(!text.contains('\u{1b}'), "colour codes in a log file:\n{text:?}");
    text
}

/// `render` logs the module's own lines (a Greeting told "log" logs one).
#[test]
fn render_logs_plain_text_into_a_file() {
    let parent = log_file("parent").with_extension("yaml");
    std::fs::write(
        &parent,
        "apiVersion: example.c5c3.io/v1\nkind: Greeting\nmetadata: {name: talk}\nspec: {message: log}\n",
    )
    .expect("a parent");
    let log = log_file("render");
    let status = Command::new(env!("CARGO_BIN_EXE_wasm-operator"))
        .arg("render")
        .arg("--module")
        .arg(repo_file("target/greeting.wasm"))
        .arg("-f")
        .arg(&parent)
        .stdout(Stdio::null())
        .stderr(File::create(&log).expect("the log file"))
        .status()
        .expect("the binary runs");
    let _ = std::fs::remove_file(&parent);
    let text = plain(&log);
    assert!(status.success(), "{text}");
    assert!(text.contains("INFO") && text.contains("asked to log"), "the module's line is logged:\n{text}");
}

/// `run --log-format text`, against an API server that is not there: its
/// start-up lines and the failures it logs.
#[test]
fn run_logs_plain_text_into_a_file() {
    let kubeconfig = log_file("kubeconfig").with_extension("yaml");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: none\n\
         clusters: [{name: none, cluster: {server: 'http://127.0.0.1:9'}}]\n\
         contexts: [{name: none, context: {cluster: none, user: none}}]\nusers: [{name: none, user: {}}]\n",
    )
    .expect("a kubeconfig");
    let log = log_file("run");
    let mut run = Command::new(env!("CARGO_BIN_EXE_wasm-operator"))
        .args(["run", "--log-format", "text", "--leader-elect=false", "--metrics-bind-address", "127.0.0.1:0"])
        .args(["--health-probe-bind-address", "127.0.0.1:0", "--module"])
        .arg(repo_file("target/greeting.wasm"))
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(File::create(&log).expect("the log file"))
        .spawn()
        .expect("the binary runs");
    // It logs as it starts and as it fails to reach the API server; it may
    // keep retrying: a few seconds of it are enough.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0) < 200 {
        if run.try_wait().expect("waiting").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = run.kill();
    let _ = run.wait();
    let _ = std::fs::remove_file(&kubeconfig);
    let text = plain(&log);
    assert!(text.contains("INFO") || text.contains("WARN") || text.contains("ERROR"), "text log lines:\n{text}");
}
