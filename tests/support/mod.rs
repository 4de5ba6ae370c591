//! Shared by the workspace-level tests: fixtures, the component loaded once
//! per test binary, and a model of what the API server adds to objects.

pub mod server;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use memcached_operator::typed::{Instance, MemcachedModule};
use serde_json::Value;
use wasm_operator::runtime::engine::ModuleEngine;
use wasm_operator::runtime::reconciler::Reconciler;

/// The folder of this crate (`tests/`).
pub fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One golden fixture: `tests/fixtures/<name>/memcached.yaml` in,
/// `objects.json` (what `render -o json` prints) out.
pub struct Fixture {
    pub name: String,
    pub dir: PathBuf,
    /// The CR as JSON text, as `render` reads it.
    pub memcached: String,
    /// The CR as the API server stores it: always in a namespace.
    pub stored: String,
}

pub fn fixtures() -> Vec<Fixture> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(tests_dir().join("fixtures"))
        .expect("tests/fixtures exists")
        .map(|entry| entry.expect("readable fixture folder").path())
        .filter(|path| path.join("memcached.yaml").is_file())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no fixtures found");
    dirs.into_iter().map(|dir| load_fixture(&dir)).collect()
}

fn load_fixture(dir: &Path) -> Fixture {
    let name = dir.file_name().and_then(|n| n.to_str()).expect("fixture folder name").to_owned();
    let yaml = std::fs::read_to_string(dir.join("memcached.yaml")).expect("fixture CR");
    let memcached = yaml_to_json(&yaml);
    let mut stored = memcached.clone();
    if stored["metadata"]["namespace"].is_null() {
        stored["metadata"]["namespace"] = "default".into();
    }
    Fixture { name, dir: dir.to_owned(), memcached: memcached.to_string(), stored: stored.to_string() }
}

pub fn yaml_to_json(yaml: &str) -> Value {
    serde_norway::from_str(yaml).expect("fixture YAML parses")
}

/// The engine every module of a test binary is loaded on, as one
/// operator process has one.
pub fn engine() -> &'static ModuleEngine {
    static ENGINE: OnceLock<ModuleEngine> = OnceLock::new();
    ENGINE.get_or_init(|| ModuleEngine::new().expect("wasmtime starts"))
}

/// The built-in component, compiled once per test binary.
pub fn module() -> &'static MemcachedModule {
    static MODULE: OnceLock<MemcachedModule> = OnceLock::new();
    MODULE.get_or_init(|| MemcachedModule::builtin(engine()).expect("the built-in component loads"))
}

/// A fresh instance, as the operator makes one per call.
pub fn instance() -> Instance {
    module().instance().expect("the component instantiates")
}

/// A fresh instance of the generic reconciler contract, as the operator uses.
pub fn reconciler() -> Reconciler {
    module().logic().reconciler().expect("the component instantiates")
}

/// Every YAML document in a file, as JSON values (the CLI's own reader).
pub fn yaml_file(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    memcached_operator::render::parse_documents(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("the module answers JSON")
}

/// Drops null fields, which the API server and k8s-openapi both treat as absent.
pub fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Paths (`spec.template.spec.containers[0].args`) where two values differ.
pub fn changed_paths(before: &Value, after: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    diff(before, after, String::new(), &mut paths);
    paths
}

fn diff(before: &Value, after: &Value, path: String, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff(x, y, child, out),
                    _ => out.push(child),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a != b => out.push(path),
        _ => {}
    }
}

/// The object of `kind` in a `desired` answer, if the module wants one.
pub fn desired_of(answer: Vec<String>, kind: &str) -> Option<String> {
    answer.into_iter().find(|text| parse(text)["kind"] == kind)
}
