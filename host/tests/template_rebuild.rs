//! The Makefiles `wasm-operator new` writes build the component beside its
//! path and rename it into place; the component keeps the time its build
//! started. A source saved while the build runs is then newer than the
//! component, and the next `make` builds again (with the time the build
//! ended, that `make` would do nothing). The compilers are stand-ins here
//! (scripts that take a moment and write a file): what is tested is the
//! Makefile's rule, with the real `make`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A stand-in tool: marks that a build runs, takes a moment, and writes
/// the file after `-o` (if any) or the third argument (componentize's OUT).
/// `rustup target list` answers at once that the wasm target is there.
const TOOL: &str = r#"#!/bin/sh
[ "$1" = target ] && echo wasm32-unknown-unknown && exit 0
touch "$MARKER"
sleep 1.5
out=""
previous=""
for arg in "$@"; do
  [ "$previous" = "-o" ] && out="$arg"
  previous="$arg"
done
[ "$1" = componentize ] && out="$3"
[ -n "$out" ] && printf 'a component' > "$out"
exit 0
"#;

fn write_tool(path: &Path) {
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("creating the folder");
    std::fs::write(path, TOOL).expect("writing a stand-in tool");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

struct Project {
    dir: PathBuf,
    /// A folder put first on PATH (rustup and cargo for Rust).
    bin: PathBuf,
    source: &'static str,
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `wasm-operator new` for `language`, its tools replaced by stand-ins.
fn project(language: &str) -> Project {
    let dir = std::env::temp_dir().join(format!("template-rebuild-{language}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let new = Command::new(env!("CARGO_BIN_EXE_wasm-operator"))
        .args(["new", "demo", "--lang", language, "--group", "demo.example.com", "--kind", "Demo", "--dir"])
        .arg(&dir)
        .output()
        .expect("running wasm-operator new");
    assert!(new.status.success(), "new: {}", String::from_utf8_lossy(&new.stderr));
    let bin = dir.join("stand-ins");
    std::fs::create_dir_all(&bin).expect("a folder for stand-ins");
    let source = match language {
        "python" => {
            write_tool(&dir.join(".venv/bin/componentize-py"));
            // The venv is installed: newer than requirements.txt.
            std::fs::write(dir.join(".venv/.installed"), "").expect("the venv's mark");
            "src/app.py"
        }
        "typescript" => {
            write_tool(&dir.join("node_modules/.bin/esbuild"));
            write_tool(&dir.join("node_modules/.bin/componentize-js"));
            std::fs::write(dir.join("node_modules/.package-lock.json"), "").expect("npm ci's mark");
            "src/app.ts"
        }
        _ => {
            write_tool(&bin.join("rustup"));
            write_tool(&bin.join("cargo"));
            write_tool(&bin.join("wasm-operator"));
            "src/lib.rs"
        }
    };
    assert!(dir.join(source).is_file(), "the project has {source}");
    Project { dir, bin, source }
}

fn make(project: &Project) -> Command {
    let mut command = Command::new("make");
    let path = format!("{}:{}", project.bin.display(), std::env::var("PATH").unwrap_or_default());
    command
        .current_dir(&project.dir)
        .args(["--no-print-directory", "target/demo.wasm"])
        .arg(format!("WASM_OPERATOR={}", project.bin.join("wasm-operator").display()))
        .env("PATH", path)
        .env("MARKER", project.dir.join("building"));
    command
}

/// Whether `make` builds the component (a stand-in ran). Not `make -q`:
/// the Rust Makefile's `deps` is phony, so -q always says "to do".
fn builds(project: &Project) -> bool {
    let marker = project.dir.join("building");
    let _ = std::fs::remove_file(&marker);
    let out = make(project).output().expect("make");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    marker.exists()
}

/// Saves the source while `make` builds, then checks that the next `make`
/// builds again and the one after does nothing.
fn a_source_saved_during_the_build_is_built_again(language: &str) {
    let project = project(language);
    let build = make(&project).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("make");
    let marker = project.dir.join("building");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(Instant::now() < deadline, "{language}: the build did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let source = project.dir.join(project.source);
    let text = std::fs::read_to_string(&source).expect("the source");
    std::fs::write(&source, text + "\n").expect("saving the source");
    let built = build.wait_with_output().expect("make ran");
    let log = String::from_utf8_lossy(&built.stdout).into_owned() + &String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{language}: make failed:\n{log}");
    assert!(project.dir.join("target/demo.wasm").is_file(), "{language}: no component:\n{log}");
    assert!(!project.dir.join("target/demo.wasm.partial").exists(), "{language}: the partial file is renamed");
    assert!(builds(&project), "{language}: the source saved during the build must make the next make build");
    assert!(!builds(&project), "{language}: nothing changed since the last build: nothing to do");
}

#[test]
fn python() {
    a_source_saved_during_the_build_is_built_again("python");
}

#[test]
fn typescript() {
    a_source_saved_during_the_build_is_built_again("typescript");
}

#[test]
fn rust() {
    a_source_saved_during_the_build_is_built_again("rust");
}
