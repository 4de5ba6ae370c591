//! `wasm-operator render -f` on a file holding a parent and the objects it
//! reads, through the binary (`target/greeting.wasm`, built by `make test`):
//! the Secret beside the parent reaches the module without --related; a
//! status field the CRD's schema prunes is named, and left out.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

fn repo_file(path: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    assert!(path.exists(), "{} is missing: `make test` builds it", path.display());
    path.to_str().expect("a UTF-8 path").to_owned()
}

fn render(file: &str) -> (Option<i32>, Vec<Value>, String) {
    render_with("target/greeting.wasm", file)
}

fn render_with(module: &str, file: &str) -> (Option<i32>, Vec<Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_wasm-operator"))
        .args(["render", "--module", &repo_file(module), "-f", &repo_file(file)])
        .args(["-o", "json", "--now", "2026-01-01T00:00:00Z"])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let items = list["items"].as_array().cloned().unwrap_or_default();
    (out.status.code(), items, stderr)
}

#[test]
fn a_secret_beside_the_parent_is_given_to_the_module() {
    let (code, items, stderr) = render("host/tests/authoring/parent-with-secret.yaml");
    let kinds: Vec<&str> = items.iter().map(|o| o["kind"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds, ["ConfigMap", "Greeting"], "the Secret is an input, not printed: {stderr}");
    assert_eq!(items[0]["data"], json!({"message": "hi", "signature": "signed by sig"}), "{stderr}");
    // A document of a kind the module neither owns nor reads is still
    // reported, and fails the render.
    assert!(stderr.contains("document 3 (Service default/stray): not a Greeting (example.c5c3.io/v1)"), "{stderr}");
    assert!(!stderr.contains("Secret default/sig"), "{stderr}");
    assert_eq!(code, Some(1));
}

#[test]
fn without_the_secret_the_module_answers_unsigned() {
    let (code, items, stderr) = render("host/tests/authoring/parents.yaml");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(items[0]["data"], json!({"message": "hi", "signature": "unsigned"}), "{stderr}");
}

#[test]
fn a_status_field_the_crd_prunes_is_named_and_left_out() {
    let (code, items, stderr) =
        render_with("target/greeting-hostile.wasm", "host/tests/authoring/parent-status-pruned.yaml");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("status.unknownField is not in the CRD's status schema: the API server prunes it"),
        "{stderr}"
    );
    let parent = items.iter().find(|o| o["kind"] == "Greeting").expect("the parent");
    assert_eq!(parent["status"], json!({"phase": "Pruned", "observedGeneration": 1}), "{stderr}");
}
