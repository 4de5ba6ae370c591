//! The StaticSite example (examples/static-site), written with each SDK:
//! the three modules ship the same CRD, pass the same golden cases through
//! `wasm-operator test`, and serve the same sample on a control plane whose
//! Pods start (kube-scheduler, the Deployment controller, kwok): the site's
//! ConfigMap, Deployment and Service are created and owned, its Pods become
//! Ready and the status says so, an unchanged site writes nothing, an edit
//! converges in place, and a site without an index.html is reported at
//! `spec.files` with its objects kept. And each compiles within the bound
//! the operator it runs in sets: the Rust one within `run`'s default.

#[path = "operator_support.rs"]
mod operator_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use control_plane::{ControlPlane, Options};
use kube::ResourceExt;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use wasm_operator::runtime::compiler::{CompileOptions, DEFAULT_MEMORY_LIMIT};
use wasm_operator::runtime::engine::ModuleEngine;
use wasm_operator::runtime::logic_module::{LogicModule, ModuleSource};

use memcached_tests::{engine, yaml_file};
use operator_support::*;

/// The module each SDK builds (`make test` builds them).
const MODULES: [(&str, &str); 3] =
    [("rust", "static-site-rust.wasm"), ("typescript", "static-site-ts.wasm"), ("python", "static-site-py.wasm")];

/// Scheduling, a ReplicaSet and kwok's Pod readiness take a few round trips.
const POD_WAIT: Duration = Duration::from_secs(90);

fn example() -> PathBuf {
    control_plane::repo_root().join("examples/static-site")
}

fn module_path(file: &str) -> PathBuf {
    let path = control_plane::repo_root().join("target").join(file);
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    path
}

fn load(file: &str) -> LogicModule {
    LogicModule::from_file(engine(), &module_path(file), false).unwrap_or_else(|e| panic!("{file} loads: {e}"))
}

#[test]
fn the_three_modules_ship_the_same_crd_and_pass_the_same_cases() {
    let binary = control_plane::repo_root().join("target/release/wasm-operator");
    let crd = |file: &str| -> Value { serde_norway::from_str(&load(file).manifest().crd).expect("the CRD is YAML") };
    let rust = crd(MODULES[0].1);
    for (language, file) in MODULES {
        assert_eq!(crd(file), rust, "the {language} module's CRD is the Rust module's");
        let run = Command::new(&binary)
            .arg("test")
            .arg("--module")
            .arg(module_path(file))
            .arg(example().join("cases"))
            .output()
            .expect("running wasm-operator test");
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "the {language} module fails a case:\n{out}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(out.contains("4 passed, 0 failed"), "every case ran for {language}:\n{out}");
    }
}

/// The compile child `run` uses, bounded to `limit` MiB, on a cache of its own.
fn compiles_within(file: &str, limit: u64) -> Result<(), String> {
    let cache_dir = std::env::temp_dir().join(format!("static-site-compile-{file}-{limit}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache_dir);
    let options = CompileOptions {
        program: control_plane::repo_root().join("target/release/wasm-operator"),
        cache_dir: cache_dir.clone(),
        memory_limit: Some(limit << 20),
        timeout: Duration::from_secs(300),
        threads: 1,
        keep: 1,
    };
    let engine = ModuleEngine::compiling_out_of_process(options).expect("an engine");
    let bytes = std::fs::read(module_path(file)).expect("the module");
    let loaded = LogicModule::from_bytes(&engine, ModuleSource::BuiltIn("static-site"), &bytes, false);
    let _ = std::fs::remove_dir_all(&cache_dir);
    loaded.map(drop).map_err(|e| e.to_string())
}

#[test]
fn each_module_compiles_within_the_bound_of_the_operator_it_runs_in() {
    // `run`'s default bound, sized for the shipped pod: a Rust module on the
    // SDK that reads a Deployment fits (scripts/build-wasm.sh's inline threshold).
    assert_eq!(DEFAULT_MEMORY_LIMIT, "256Mi");
    compiles_within(MODULES[0].1, 256).unwrap_or_else(|e| panic!("the Rust module within 256 MiB: {e}"));
    // An interpreter inside takes more: `dev`'s default, and the README's
    // `--compile-memory-limit=1Gi` for `run`.
    for (language, file) in &MODULES[1..] {
        compiles_within(file, 1024).unwrap_or_else(|e| panic!("the {language} module within 1 GiB: {e}"));
        let refused = compiles_within(file, 256).expect_err("an interpreter does not fit 256 MiB");
        assert!(refused.contains("more memory"), "{language}: {refused}");
    }
}

fn ready(status: &Value) -> &Value {
    condition(status, "Ready")
}

/// What a site owns: kind, name, resource.
fn children() -> [(&'static str, &'static str, kube::api::ApiResource); 3] {
    [
        ("ConfigMap", "hello-files", gvk("", "v1", "ConfigMap", "configmaps")),
        ("Deployment", "hello", gvk("apps", "v1", "Deployment", "deployments")),
        ("Service", "hello", gvk("", "v1", "Service", "services")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_module_serves_the_sample_on_a_cluster_whose_pods_start() {
    let plane = ControlPlane::shared_with(Options::pods());
    grant_operator_everything(plane).await;
    for (language, file) in MODULES {
        serves_the_sample(plane, language, load(file)).await;
    }
}

async fn serves_the_sample(plane: &'static ControlPlane, language: &str, module: LogicModule) {
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the CRD");
    let ns = TestNamespace::on(plane, &format!("site-{language}")).await;
    let sites = ns.api(&gvk("sites.example.com", "v1", "StaticSite", "staticsites"));
    let sample = yaml_file(&example().join("samples/static-site.yaml")).remove(0);
    let sample: DynamicObject = serde_json::from_value(sample).expect("the sample is an object");
    let created = sites.create(&PostParams::default(), &sample).await.expect("creating the sample");
    let operator = Running::start(plane, module, options(&ns.namespace)).await;

    let status = |what: &'static str, check: fn(&Value) -> bool| {
        let sites = sites.clone();
        async move {
            eventually_within(POD_WAIT, what, || async {
                let site = sites.get("hello").await.ok()?;
                let status = site.data.get("status")?.clone();
                (status["observedGeneration"] == json!(site.metadata.generation?) && check(&status)).then_some(status)
            })
            .await
        }
    };
    let running = status("two replicas ready", |s| ready(s)["status"] == "True" && s["readyReplicas"] == 2).await;
    assert_eq!(ready(&running)["message"], "2 of 2 replicas ready", "{language}");
    assert_eq!(running["url"], format!("http://hello.{}.svc", ns.namespace), "{language}");
    let mut owned = Vec::new();
    for (kind, name, resource) in children() {
        let child = ns.get(&resource, name).await.unwrap_or_else(|| panic!("{language}: {kind} {name}"));
        assert_eq!(controller_uid(&child), created.uid(), "{language}: {kind} {name} is the site's");
        owned.push(child);
    }
    assert!(owned[0].data["data"]["about.html"].is_string(), "{language}: the files are in the ConfigMap");

    // Steady state: an unchanged site writes nothing.
    let mark = plane.audit_mark().expect("the audit log");
    let reconciled = operator.reconciles("success");
    edit(&sites, "hello", |s| drop(s.annotations_mut().insert("touched".into(), "yes".into()))).await;
    eventually("one more reconcile", || async { (operator.reconciles("success") > reconciled).then_some(()) }).await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "{language}: an unchanged site was written to: {writes:?}");

    // An edit converges in place: a file removed from the spec goes.
    edit(&sites, "hello", |s| drop(s.data["spec"]["files"].as_object_mut().map(|f| f.remove("about.html")))).await;
    let files = eventually("the ConfigMap without about.html", || async {
        ns.get(&children()[0].2, "hello-files").await.filter(|c| c.data["data"].get("about.html").is_none())
    })
    .await;
    assert_eq!(files.uid(), owned[0].uid(), "{language}: updated in place, not recreated");

    // No index.html: reported at its field; nothing deleted.
    edit(&sites, "hello", |s| s.data["spec"]["files"] = json!({"about.html": "<p>About</p>"})).await;
    let refused = status("Ready False with the problem", |s| ready(s)["status"] == "False").await;
    assert_eq!(ready(&refused)["reason"], "Failed", "{language}");
    assert!(ready(&refused)["message"].as_str().unwrap_or_default().contains("spec.files"), "{language}: {refused}");
    for (kind, name, resource) in children() {
        assert!(ns.get(&resource, name).await.is_some(), "{language}: {kind} {name} is kept");
    }
    operator.stop().await.expect("a clean stop");
}
