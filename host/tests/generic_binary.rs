//! `wasm-operator` is a product of its own: no Memcached code or name in
//! it, any module for any CRD, and a clear refusal of a file that is not a
//! logic module, naming the file and what is wrong. The modules come from
//! `make test` (tests/modules/greeting and its broken variants, and the
//! Python module).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn module(file: &str) -> PathBuf {
    let path = repo().join("target").join(file);
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    path
}

fn wasm_operator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-operator")).args(args).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn refused(path: &Path) -> String {
    let out = wasm_operator(&["--module", path.to_str().expect("utf-8 path"), "manifest"]);
    assert!(!out.status.success(), "{} was accepted", path.display());
    text(&out.stderr)
}

#[test]
fn the_binary_holds_no_memcached_name() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_wasm-operator")).expect("the binary is readable");
    for name in [&b"memcached.c5c3.io"[..], b"Memcached", b"memcached"] {
        assert!(
            !binary.windows(name.len()).any(|window| window == name),
            "wasm-operator contains {:?}",
            String::from_utf8_lossy(name)
        );
    }
}

#[test]
fn the_crate_depends_on_no_guest_crate() {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "-p", "wasm-operator", "--edges", "normal,build", "--prefix", "none"])
        .current_dir(repo())
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tree = text(&out.stdout);
    assert!(tree.starts_with("wasm-operator "), "{tree}");
    for guest in ["memcached-logic", "memcached-operator", "greeting-logic"] {
        assert!(!tree.lines().any(|line| line.starts_with(guest)), "wasm-operator depends on {guest}");
    }
}

#[test]
fn with_no_module_it_says_how_to_give_one() {
    let out = wasm_operator(&["crd"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no logic module: give one or more with --module PATH"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn any_module_tells_the_host_its_kinds_and_crd() {
    let greeting = module("greeting.wasm");
    let out = wasm_operator(&["--module", greeting.to_str().expect("utf-8"), "manifest"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifests: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let greeting_manifest = &manifests[0];
    assert_eq!(greeting_manifest["name"], "greeting");
    assert_eq!(greeting_manifest["parent"]["kind"], "Greeting");
    assert_eq!(greeting_manifest["owned"][0]["kind"], "ConfigMap");
    assert_eq!(greeting_manifest["contract"], "wasm-operator:controller/reconciler@1.1.0");
    let digest = greeting_manifest["digest"].as_str().expect("a digest");
    assert!(digest.starts_with("sha256:") && digest.len() == 7 + 64, "{digest}");

    let crd = wasm_operator(&["--module", greeting.to_str().expect("utf-8"), "crd"]);
    assert!(crd.status.success(), "{}", text(&crd.stderr));
    let shipped = std::fs::read_to_string(repo().join("tests/modules/greeting/crd.yaml")).expect("the module's CRD");
    assert_eq!(text(&crd.stdout), shipped);
}

#[test]
fn files_that_are_not_logic_modules_are_refused_naming_the_file_and_the_problem() {
    let dir = std::env::temp_dir().join(format!("wasm-operator-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let text_file = dir.join("notes.wasm");
    std::fs::write(&text_file, "not wasm at all").expect("writing");
    let core = dir.join("core.wasm");
    // The smallest valid core module: header and version, nothing else.
    std::fs::write(&core, b"\0asm\x01\0\0\0").expect("writing");
    let missing = dir.join("absent.wasm");

    let cases = [
        (text_file.clone(), "is not WebAssembly".to_owned()),
        (core.clone(), "is a core WebAssembly module, not a component".to_owned()),
        (missing.clone(), "reading the logic module".to_owned()),
        (
            module("greeting-wrong-world.wasm"),
            "exports no wasm-operator:controller/reconciler interface (it exports: example:greeter/greeter@1.0.0)"
                .to_owned(),
        ),
        (
            module("greeting-missing-functions.wasm"),
            "its wasm-operator:controller/reconciler@1.0.0 lacks manifest, desired, status".to_owned(),
        ),
        (
            module("greeting-wrong-crd.wasm"),
            "its manifest is unusable: crd: spec.names.kind is \"Salutation\", but the manifest's parent has \"Greeting\""
                .to_owned(),
        ),
        (
            module("greeting-contract-v2.wasm"),
            "it exports wasm-operator:controller/reconciler@2.0.0, a contract version this host does not run"
                .to_owned(),
        ),
    ];
    for (path, problem) in cases {
        let stderr = refused(&path);
        assert!(stderr.contains(&path.display().to_string()), "the message names the file: {stderr}");
        assert!(stderr.contains(&problem), "{}: expected {problem:?} in {stderr}", path.display());
    }

    // Several modules: the bad one is named, nothing starts.
    let good = module("greeting.wasm");
    let out = wasm_operator(&[
        "--module",
        good.to_str().expect("utf-8"),
        "--module",
        core.to_str().expect("utf-8"),
        "manifest",
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("core.wasm"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_python_module_is_a_module_like_any_other() {
    let echo = module("echo-py.wasm");
    let out = wasm_operator(&["--module", echo.to_str().expect("utf-8"), "manifest"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifests: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(manifests[0]["name"], "echo-py");
    assert_eq!(manifests[0]["parent"]["kind"], "Echo");
}
