//! `wasm-operator render` and `wasm-operator test`, generic over any
//! module, agree with `memcached-operator render` on every golden fixture
//! when given the Memcached module (`target/memcached.wasm`).
//!
//! Two differences are by design, and normalised here after being checked:
//! - `memcached-operator render` prints owner references without a uid (a
//!   CR rendered off-cluster has none, and the typed `render` drops the
//!   empty one); `wasm-operator render` fills in the parent's uid (derived
//!   from its namespace and name) because the operator's answer check needs
//!   one. The test checks every owner reference carries the parent's uid,
//!   then removes it.
//! - `memcached-operator render` prints no status; `wasm-operator render`
//!   prints the parent with the status the operator would write after
//!   creating the objects. That status is compared with the module's typed
//!   `compute-status` (memcached-operator's typed bindings) given the same
//!   Deployment, no Secrets (none are given to either) and the same time.
//!
//! Both binaries come from `make build` (`make test` builds them first).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use memcached_tests::{Fixture, fixtures, instance, tests_dir};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const NOW: &str = "2026-11-21T10:00:10Z";

fn built(relative: &str) -> PathBuf {
    let path = tests_dir().join("..").join(relative);
    assert!(path.is_file(), "{} is missing: `make build` builds it", path.display());
    path
}

fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn items(out: &Output, what: &str) -> Vec<Value> {
    assert!(out.status.success(), "{what}: {}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}"));
    list["items"].as_array().unwrap_or_else(|| panic!("{what}: no items")).clone()
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// `memcached-operator render -o json` of the fixture.
fn typed_render(fixture: &Fixture) -> Vec<Value> {
    let operator = built("target/release/memcached-operator");
    let file = fixture.dir.join("memcached.yaml");
    items(
        &run(&operator, &["render", "-f", path(&file), "-o", "json"]),
        &format!("{}: memcached-operator", fixture.name),
    )
}

/// `wasm-operator render --module target/memcached.wasm -o json`: the
/// objects, then the parent with its status.
fn generic_render(fixture: &Fixture) -> (Vec<Value>, Value) {
    let host = built("target/release/wasm-operator");
    let module = built("target/memcached.wasm");
    let file = fixture.dir.join("memcached.yaml");
    let args = ["render", "--module", path(&module), "-f", path(&file), "-o", "json", "--now", NOW];
    let mut items = items(&run(&host, &args), &format!("{}: wasm-operator", fixture.name));
    let parent = items.pop().unwrap_or_else(|| panic!("{}: no parent printed", fixture.name));
    assert_eq!(parent["kind"], "Memcached", "{}: the parent comes last", fixture.name);
    (items, parent)
}

/// Removes the uid from every owner reference, checking it is `uid`.
fn without_owner_uids(mut objects: Vec<Value>, uid: &str, fixture: &str) -> Vec<Value> {
    for object in &mut objects {
        let references = object.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut);
        for reference in references.into_iter().flatten() {
            let removed = reference.as_object_mut().and_then(|r| r.remove("uid"));
            assert_eq!(removed.as_ref().and_then(Value::as_str), Some(uid), "{fixture}: the parent's uid");
        }
    }
    objects
}

/// The module's typed `compute-status` for the rendered Deployment.
fn typed_status(fixture: &Fixture, objects: &[Value]) -> Value {
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").map(ToString::to_string);
    let status = instance()
        .compute_status(&fixture.stored, deployment.as_deref(), &[], NOW)
        .unwrap_or_else(|e| panic!("{}: compute-status: {e}", fixture.name));
    serde_json::from_str(&status).expect("compute-status answers JSON")
}

#[test]
fn render_agrees_with_memcached_operator_render_on_every_fixture() {
    for fixture in fixtures() {
        let name = fixture.name.as_str();
        let (objects, parent) = generic_render(&fixture);
        let uid = parent["metadata"]["uid"].as_str().unwrap_or_else(|| panic!("{name}: render fills in a uid"));
        let typed = typed_render(&fixture);
        assert_eq!(without_owner_uids(objects.clone(), uid, name), typed, "{name}: the objects");
        assert_eq!(parent["status"], typed_status(&fixture, &objects), "{name}: the status");
    }
}

/// Each fixture as a `wasm-operator test` case whose expectation is what
/// `memcached-operator render` prints (with the case's uid in the owner
/// references) and the typed status: every case passes.
#[test]
fn test_passes_on_cases_made_from_every_fixture() {
    let dir = std::env::temp_dir().join(format!("wasm-operator-memcached-cases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let fixtures = fixtures();
    for fixture in &fixtures {
        let uid = format!("uid-{}", fixture.name);
        let mut parent: Value = serde_json::from_str(&fixture.stored).expect("the CR");
        parent["metadata"]["uid"] = json!(uid);
        let mut desired = typed_render(fixture);
        for object in &mut desired {
            for reference in object["metadata"]["ownerReferences"].as_array_mut().into_iter().flatten() {
                reference["uid"] = json!(uid);
            }
        }
        let status = typed_status(fixture, &desired);
        let case = json!({"name": fixture.name, "parent": parent, "now": NOW, "expect": {"desired": desired, "status": status}});
        let file = dir.join(format!("{}.yaml", fixture.name));
        std::fs::write(&file, serde_json::to_string_pretty(&case).expect("JSON")).expect("written");
    }
    let host = built("target/release/wasm-operator");
    let module = built("target/memcached.wasm");
    let out = run(&host, &["test", path(&dir), "--module", path(&module)]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.ends_with(&format!("\n{} passed, 0 failed\n", fixtures.len())), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
