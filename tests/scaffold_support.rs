//! `wasm-operator new` end to end, shared by the three languages' tests: a
//! project generated into a folder outside the repository, built and tested
//! with its one documented command (`make`), then its module run by the
//! host against the real API server.
//!
//! Every template makes the same module: a parent owning a ConfigMap named
//! after it holding `spec.message`, a `Ready` condition, and an empty message
//! refused as `invalid` at `spec.message`.

use std::path::{Path, PathBuf};
use std::process::Command;

use control_plane::ControlPlane;
use kube::ResourceExt;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use wasm_operator::runtime::logic_module::LogicModule;

use crate::operator_support::*;
use memcached_tests::engine;

/// The parent kind every scaffold test uses, per language.
pub struct Parent {
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

/// A project `wasm-operator new` wrote and `make` built, as the path of its
/// component; the project (up to 1 GB with its target/) is removed on drop.
pub struct Scaffolded {
    dir: PathBuf,
    module: PathBuf,
}

impl std::ops::Deref for Scaffolded {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.module
    }
}

impl Drop for Scaffolded {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `wasm-operator new NAME --lang LANG` into a fresh folder under the
/// system's temp dir (outside the repo), then `make` there with this repo's
/// wasm-operator; the built component.
pub fn scaffold_and_make(name: &str, language: &str, parent: &Parent) -> Scaffolded {
    let repo = control_plane::repo_root();
    let binary = repo.join("target/release/wasm-operator");
    assert!(binary.is_file(), "{} is missing: `make build`", binary.display());
    let dir = std::env::temp_dir().join(format!("wasm-operator-new-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!dir.starts_with(&repo), "the project must be outside the repo");
    let new = Command::new(&binary)
        .args(["new", name, "--lang", language, "--group", parent.group, "--kind", parent.kind])
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("running wasm-operator new");
    assert!(new.status.success(), "wasm-operator new: {}", String::from_utf8_lossy(&new.stderr));
    let make = Command::new("make")
        .current_dir(&dir)
        .arg(format!("WASM_OPERATOR={}", binary.display()))
        // What the outer cargo set for this test must not steer the inner builds.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_MANIFEST_DIR")
        .env_remove("CARGO_PKG_NAME")
        .output()
        .expect("running make");
    let log = format!("{}{}", String::from_utf8_lossy(&make.stdout), String::from_utf8_lossy(&make.stderr));
    assert!(make.status.success(), "make in {} failed:\n{log}", dir.display());
    assert!(log.contains("passed, 0 failed"), "make ran the golden cases:\n{log}");
    let module = dir.join("target").join(format!("{name}.wasm"));
    assert!(module.is_file(), "make built {}", module.display());
    Scaffolded { dir, module }
}

fn ready(status: &Value) -> Value {
    status["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready")).cloned().unwrap_or_default()
}

/// The module at `path` in the host against the shared API server: the
/// sample's ConfigMap is created and owned, Ready; an unchanged parent
/// writes nothing; an edit converges in place; an empty message is reported
/// with its field and the ConfigMap stays.
pub async fn runs_in_the_host(path: &Path, parent: &Parent) {
    let plane = ControlPlane::shared();
    let module = LogicModule::from_file(engine(), path, false).unwrap_or_else(|e| panic!("the module loads: {e}"));
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the module's CRD");
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, &parent.kind.to_lowercase()).await;
    let parents = ns.api(&gvk(parent.group, "v1", parent.kind, parent.plural));
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", parent.group), "kind": parent.kind, "metadata": {"name": "hello"},
        "spec": {"message": "hi"}
    }))
    .expect("a parent");
    let created = parents.create(&PostParams::default(), &object).await.expect("creating the parent");
    let operator = Running::start(plane, module, options(&ns.namespace)).await;

    let configmaps = gvk("", "v1", "ConfigMap", "configmaps");
    let configmap = |message: &'static str| {
        let ns = &ns;
        let configmaps = configmaps.clone();
        async move {
            eventually(&format!("the ConfigMap holding {message:?}"), || async {
                ns.get(&configmaps, "hello").await.filter(|c| c.data["data"]["message"] == message)
            })
            .await
        }
    };
    let status = |check: fn(&Value) -> bool| {
        let parents = parents.clone();
        async move {
            eventually("the parent's status", || async {
                let parent = parents.get("hello").await.ok()?;
                let status = parent.data.get("status")?.clone();
                (status["observedGeneration"] == json!(parent.metadata.generation?) && check(&status)).then_some(status)
            })
            .await
        }
    };
    let made = configmap("hi").await;
    assert_eq!(controller_uid(&made), created.uid(), "owned by the parent");
    status(|s| ready(s)["status"] == "True").await;

    // Steady state: an unchanged parent writes nothing.
    let mark = plane.audit_mark().expect("the audit log");
    let reconciled = operator.reconciles("success");
    edit(&parents, "hello", |p| drop(p.annotations_mut().insert("touched".into(), "yes".into()))).await;
    eventually("one more reconcile", || async { (operator.reconciles("success") > reconciled).then_some(()) }).await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "an unchanged parent was written to: {writes:?}");

    // An edit converges, in place.
    edit(&parents, "hello", |p| p.data["spec"]["message"] = json!("bye")).await;
    let edited = configmap("bye").await;
    assert_eq!(edited.uid(), made.uid(), "updated in place, not recreated");

    // An invalid spec: reported with its field; the ConfigMap stays.
    edit(&parents, "hello", |p| p.data["spec"]["message"] = json!("")).await;
    let refused = status(|s| ready(s)["status"] == "False").await;
    assert!(refused.to_string().contains("spec.message"), "the status names the field: {refused}");
    let kept = ns.get(&configmaps, "hello").await.expect("the ConfigMap stays");
    assert_eq!(kept.data["data"]["message"], "bye");
    operator.stop().await.expect("a clean stop");
}
