//! `wasm-operator new --lang python`: generated outside the repo, `make`
//! there (a venv with the pinned componentize-py, pytest, ruff and mypy; the
//! component; its unit tests, linters, `wasm-operator test` cases and
//! manifest) passes, and the component runs in the host: the shared checks
//! (tests/scaffold_support.rs), then the project's own sample, and an empty
//! message reported as the host's `invalid: spec.message: ...` in
//! `status.problem` until it is fixed.
//!
//! Needs `make` and python3 with venv; pip's cache is reused (the venv takes
//! 15 to 60 seconds cold, the whole `make` a minute or two).

#[path = "operator_support.rs"]
mod operator_support;
#[path = "scaffold_support.rs"]
mod scaffold_support;

use std::path::Path;

use control_plane::ControlPlane;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, PostParams};
use operator_support::*;
use scaffold_support::{Parent, runs_in_the_host, scaffold_and_make};
use serde_json::{Value, json};
use wasm_operator::runtime::logic_module::LogicModule;

const PARENT: Parent = Parent { group: "python.scaffold.example.com", kind: "Memo", plural: "memos" };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_project_from_new_builds_outside_the_repo_and_runs_in_the_host() {
    let module = tokio::task::spawn_blocking(|| scaffold_and_make("demo-py", "python", &PARENT)).await.expect("built");
    let dir = module.parent().and_then(Path::parent).expect("the project holds target/").to_owned();
    for file in ["README.md", ".gitignore", "pyproject.toml", "src/crd.yaml", "samples/memo.yaml", "wit/controller.wit"]
    {
        assert!(dir.join(file).is_file(), "new wrote no {file}");
    }
    let sdk = dir.join("vendor/wasm-operator-sdk");
    assert!(sdk.join("src/wasm_operator_sdk/__init__.py").is_file(), "the SDK is vendored");
    assert!(!sdk.join("tests").exists(), "the SDK's tests are not vendored");

    runs_in_the_host(&module, &PARENT).await;
    the_sample_runs_and_an_empty_message_is_its_problem(&dir, &module).await;
    let _ = std::fs::remove_dir_all(&dir);
}

async fn status_where(parents: &Api<DynamicObject>, name: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(&format!("the status of {name}"), || async {
        let parent = parents.get(name).await.ok()?;
        let status = parent.data.get("status")?.clone();
        (status["observedGeneration"] == json!(parent.metadata.generation?) && check(&status)).then_some(status)
    })
    .await
}

async fn the_sample_runs_and_an_empty_message_is_its_problem(dir: &Path, module: &Path) {
    let plane = ControlPlane::shared();
    let module = LogicModule::from_file(memcached_tests::engine(), module, false).expect("the module loads");
    let ns = TestNamespace::on(plane, "memo-sample").await;
    let parents = ns.api(&gvk(PARENT.group, "v1", PARENT.kind, PARENT.plural));
    let configmaps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    let text = std::fs::read_to_string(dir.join("samples/memo.yaml")).expect("reading the sample");
    let sample: DynamicObject = serde_norway::from_str(&text).expect("the sample is a Memo");
    let name = sample.name_any();
    let message = sample.data["spec"]["message"].as_str().expect("the sample has a message").to_owned();
    let created = parents.create(&PostParams::default(), &sample).await.expect("creating the sample");
    let operator = Running::start(plane, module, options(&ns.namespace)).await;
    let ready = |status: &Value| condition(status, "Ready").clone();

    let made = eventually("the sample's ConfigMap", || async {
        configmaps.get_opt(&name).await.ok()?.filter(|c| c.data["data"]["message"] == json!(message))
    })
    .await;
    assert_eq!(controller_uid(&made), created.uid());
    assert_eq!(made.data["data"], json!({"message": message}), "data is the module's whole");
    let status = status_where(&parents, &name, |s| ready(s)["status"] == "True").await;
    assert_eq!(ready(&status)["reason"], "Published", "{status}");

    edit(&parents, &name, |p| p.data["spec"]["message"] = json!("")).await;
    let status = status_where(&parents, &name, |s| s["problem"].is_string()).await;
    assert_eq!(status["problem"], "invalid: spec.message: must be a non-empty string", "{status}");
    assert_eq!((&ready(&status)["status"], &ready(&status)["reason"]), (&json!("False"), &json!("Invalid")));
    assert_eq!(ready(&status)["message"], status["problem"], "{status}");

    // Fixed: Ready again, and the problem is gone.
    edit(&parents, &name, |p| p.data["spec"]["message"] = json!("fixed")).await;
    let status = status_where(&parents, &name, |s| ready(s)["status"] == "True" && s.get("problem").is_none()).await;
    assert_eq!(ready(&status)["reason"], "Published", "{status}");
    let fixed = configmaps.get(&name).await.expect("the ConfigMap");
    assert_eq!((fixed.uid(), &fixed.data["data"]), (made.uid(), &json!({"message": "fixed"})));
    operator.stop().await.expect("a clean stop");
}
