//! The host is generic: another logic module, for another CRD, runs in the
//! same operator code with no change. The Greeting module
//! (tests/modules/greeting, built to target/greeting.wasm) owns a ConfigMap
//! and reads a Secret; it can also be made to trap.

#[path = "operator_support.rs"]
mod operator_support;

use control_plane::ControlPlane;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::ResourceExt;
use memcached_operator::module::LogicModule;
use operator_support::*;
use serde_json::{json, Value};

const GREETING_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: greetings.example.c5c3.io}
spec:
  group: example.c5c3.io
  names: {kind: Greeting, listKind: GreetingList, plural: greetings, singular: greeting}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

fn greeting_module() -> LogicModule {
    let path = control_plane::repo_root().join("target/greeting.wasm");
    assert!(path.is_file(), "{} is missing: `make test` builds it (make target/greeting.wasm)", path.display());
    LogicModule::from_file(&path).expect("the Greeting module loads")
}

fn greetings_resource() -> ApiResource {
    gvk("example.c5c3.io", "v1", "Greeting", "greetings")
}

fn configmaps_resource() -> ApiResource {
    gvk("", "v1", "ConfigMap", "configmaps")
}

struct Greetings<'a> {
    ns: TestNamespace<'a>,
}

impl Greetings<'_> {
    fn api(&self) -> Api<DynamicObject> {
        self.ns.api(&greetings_resource())
    }

    async fn set_spec(&self, spec: Value) {
        let mut greeting = self.api().get("hello").await.expect("the Greeting");
        greeting.data["spec"] = spec;
        self.api().replace("hello", &PostParams::default(), &greeting).await.expect("updating the Greeting");
    }

    async fn configmap(&self) -> Option<DynamicObject> {
        self.ns.get(&configmaps_resource(), "hello").await
    }

    async fn wait_configmap(&self, check: impl Fn(&Value) -> bool) -> DynamicObject {
        eventually("the ConfigMap", || async { self.configmap().await.filter(|c| check(&c.data["data"])) }).await
    }

    async fn wait_phase(&self, phase: &str) -> Value {
        eventually(&format!("phase {phase}"), || async {
            let greeting = self.api().get("hello").await.ok()?;
            let status = greeting.data.get("status")?.clone();
            (status["phase"] == json!(phase) && status["observedGeneration"] == json!(greeting.metadata.generation?))
                .then_some(status)
        })
        .await
    }

    async fn wait_event(&self, reason: &str, contains: &str) {
        eventually(&format!("a {reason} event"), || async {
            self.ns.event_notes(reason).await.iter().any(|n| n.contains(contains)).then_some(())
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_module_for_another_crd_runs_with_no_code_change() {
    let plane = ControlPlane::shared();
    plane.apply_yaml(GREETING_CRD).await.expect("installing the Greeting CRD");
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, "greeting").await;
    let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "metadata": {"name": "hello"},
                          "spec": {"message": "hi", "signatureSecret": "sig"}});
    let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
    let greetings = Greetings { ns };
    let created = greetings.api().create(&PostParams::default(), &greeting).await.expect("creating the Greeting");
    let operator = Running::start(plane, greeting_module(), options(&greetings.ns.namespace)).await;

    // Owned kind created from the manifest alone, with the owner reference.
    let configmap = greetings.wait_configmap(|d| d["message"] == "hi").await;
    assert_eq!(configmap.data["data"]["signature"], "unsigned");
    assert_eq!(controller_uid(&configmap), created.uid());
    greetings.wait_phase("Published in ConfigMap hello").await;
    greetings.wait_event("Created", "Created ConfigMap hello").await;

    // The read kind: the Secret the parent references wakes it.
    greetings.ns.create_secret("sig", json!({"key": "value"})).await;
    greetings.wait_configmap(|d| d["signature"] == "signed by sig").await;

    // Unwanted now: deleted, as it is ours.
    greetings.set_spec(json!({"message": ""})).await;
    eventually("the ConfigMap to go", || async { greetings.configmap().await.is_none().then_some(()) }).await;
    greetings.wait_event("Deleted", "Deleted ConfigMap hello").await;
    greetings.wait_phase("Nothing to publish").await;

    // Invalid: reported in status and a Warning; nothing is deleted.
    greetings.set_spec(json!({"message": "back"})).await;
    greetings.wait_configmap(|d| d["message"] == "back").await;
    greetings.set_spec(json!({"message": 42})).await;
    greetings.wait_phase("Invalid: spec.message must be a string").await;
    greetings.wait_event("InvalidSpec", "spec.message").await;
    assert!(greetings.configmap().await.is_some(), "an invalid spec deletes nothing");

    // A module that traps: a Warning, a failed reconcile, and the operator
    // carries on; fixing the spec recovers.
    greetings.set_spec(json!({"message": "trap"})).await;
    greetings.wait_event("ModuleFailed", "desired-all").await;
    eventually("a failed reconcile", || async { (operator.reconciles("error") >= 1).then_some(()) }).await;
    greetings.set_spec(json!({"message": "recovered"})).await;
    greetings.wait_configmap(|d| d["message"] == "recovered").await;
    operator.stop().await.expect("a clean stop");
}
