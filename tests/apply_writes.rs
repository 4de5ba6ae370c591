//! A module that writes by server-side apply (`writes`: `apply`; the Queue
//! module written as a newcomer writes one, each object with only the
//! fields it sets, on each SDK: tests/modules/queue in Rust, queue-ts in
//! TypeScript, queue-py in Python), against a real API server, the
//! controllers of a real cluster (Pods started by kwok) and the audit log,
//! each scenario once per SDK:
//! - a Queue owning fifteen kinds (a StatefulSet with a claim template, a
//!   Service with two ports, a ConfigMap, a PodDisruptionBudget, a
//!   Deployment with probes and resources and its HorizontalPodAutoscaler,
//!   a Job, a CronJob, an Ingress, a NetworkPolicy, a ServiceAccount, a Role
//!   and RoleBinding, a PersistentVolumeClaim and a Secret) converges; then
//!   resyncs every second and the children's status churn (the CronJob's
//!   runs, the autoscaler's, the StatefulSet's) write nothing at all for
//!   `APPLY_STEADY_SECONDS` (70 s; `make test-apply-steady`: 5 minutes),
//!   though the server filled in defaults everywhere (a claim template's
//!   `volumeMode`, a Service port's `targetPort`, a CPU limit re-spelled)
//!   and the autoscaler owns the consumers' `replicas`;
//! - a spec that drops a label, an env var, a port, a ConfigMap key and
//!   two whole objects has each removed, with one write per changed object,
//!   and is steady again after;
//! - `replicas` another manager sets (an autoscaler, when the module sets
//!   none) is left alone with no write; a field the module sets that is
//!   edited by hand is taken back, with a `FieldsTakenOver` event and the
//!   conflict counted.
//!
//! And without a server: the three declare apply, ship the same CRD and
//! answer the same objects for the same spec.

use std::collections::BTreeMap;
use std::time::Duration;

mod operator_support;
mod queue_support;

use control_plane::{AuditEvent, ControlPlane, Options};
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use operator_support::{
    Running, TestNamespace, described, edit, eventually, grant_operator_everything, gvk, module_file, options,
};
use queue_support::full_spec;
use serde_json::{Value, json};
use wasm_operator::runtime::bindings::WriteModel;
use wasm_operator::runtime::logic_module::LogicModule;

/// The Queue module on one SDK: its file in target/ and its manifest's name.
#[derive(Clone, Copy)]
struct Queue {
    file: &'static str,
    name: &'static str,
}

const RUST: Queue = Queue { file: "queue.wasm", name: "queue" };
const TYPESCRIPT: Queue = Queue { file: "queue-ts.wasm", name: "queue-ts" };
const PYTHON: Queue = Queue { file: "queue-py.wasm", name: "queue-py" };

/// A scenario as one test per SDK: `scenario::rust`, `::typescript`, `::python`.
macro_rules! on_each_sdk {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rust() {
                super::$scenario(super::RUST).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn typescript() {
                super::$scenario(super::TYPESCRIPT).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python() {
                super::$scenario(super::PYTHON).await;
            }
        }
    };
}

on_each_sdk!(an_applying_module_writes_nothing_in_steady_state_and_removes_what_it_no_longer_sets);
on_each_sdk!(another_managers_fields_are_left_alone_and_a_field_edited_by_hand_is_taken_back);

impl Queue {
    fn module(self) -> LogicModule {
        let module = module_file(self.file);
        assert_eq!(module.write_model(), WriteModel::Apply, "{} declares apply", self.file);
        assert_eq!(module.name(), self.name);
        module
    }

    /// A namespace prefix of this SDK's.
    fn prefix(self, scenario: &str) -> String {
        format!("{scenario}-{}", self.name)
    }
}

fn queues() -> kube::api::ApiResource {
    gvk("example.c5c3.io", "v1", "Queue", "queues")
}

fn stateful_sets() -> kube::api::ApiResource {
    gvk("apps", "v1", "StatefulSet", "statefulsets")
}

fn services() -> kube::api::ApiResource {
    gvk("", "v1", "Service", "services")
}

fn config_maps() -> kube::api::ApiResource {
    gvk("", "v1", "ConfigMap", "configmaps")
}

/// The cluster of this file's tests: Pods start (kwok), and every
/// controller a cluster runs writes the status of its kind.
fn plane() -> &'static ControlPlane {
    ControlPlane::shared_with(Options::pods())
}

async fn start(
    plane: &'static ControlPlane,
    queue: Queue,
    scenario: &str,
    spec: Value,
) -> (TestNamespace<'static>, Running) {
    let module = queue.module();
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the Queue CRD");
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, &queue.prefix(scenario)).await;
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.c5c3.io/v1", "kind": "Queue", "metadata": {"name": "orders"}, "spec": spec
    }))
    .expect("a Queue");
    ns.api(&queues()).create(&PostParams::default(), &queue).await.expect("creating the Queue");
    let mut options = options(&ns.namespace);
    // Resyncs every second: steady state is many reconciles.
    options.resync_period = Duration::from_secs(1);
    let operator = Running::start(plane, module, options).await;
    (ns, operator)
}

/// The object once `check` holds for it.
async fn object_where(
    ns: &TestNamespace<'_>,
    resource: &kube::api::ApiResource,
    name: &str,
    check: impl Fn(&Value) -> bool,
) -> DynamicObject {
    eventually(&format!("{} {name}", resource.kind), || async {
        ns.get(resource, name).await.filter(|object| check(&serde_json::to_value(object).expect("JSON")))
    })
    .await
}

/// The Queue's status once it has seen the Queue's generation `generation`.
async fn queue_status(ns: &TestNamespace<'_>, generation: i64) -> Value {
    let api = ns.api(&queues());
    eventually(&format!("the Queue's status at generation {generation}"), || async {
        let status = api.get("orders").await.ok()?.data.get("status")?.clone();
        (status["observedGeneration"] == generation).then_some(status)
    })
    .await
}

/// Until the operator has reconciled `more` more times.
async fn reconciles_more(operator: &Running, more: u64) {
    let now = operator.reconciles("success");
    eventually(&format!("{more} more reconciles"), || async {
        (operator.reconciles("success") >= now + more).then_some(())
    })
    .await;
}

/// The StatefulSet's status as its controller would write it, changing
/// what the module does not read.
async fn churn_status(api: &Api<DynamicObject>, revision: &str) {
    let status = json!({"status": {"replicas": 1, "currentRevision": revision, "updateRevision": revision,
                                   "observedGeneration": 1, "availableReplicas": 0}});
    api.patch_status("orders", &PatchParams::default(), &Patch::Merge(&status)).await.expect("the status");
}

fn labels(object: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default()
}

/// How long steady state is watched: `APPLY_STEADY_SECONDS`, 70 s by
/// default (a minute's CronJob run falls inside it); `make
/// test-apply-steady` watches for 5 minutes.
fn steady_window() -> Duration {
    let seconds = std::env::var("APPLY_STEADY_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(70);
    Duration::from_secs(seconds)
}

/// When the CronJob last started a Job (its controller's status).
async fn last_scheduled(ns: &TestNamespace<'_>) -> Value {
    let cron_job = queue_support::child("CronJob");
    let object = ns.get(&cron_job.resource, cron_job.name).await.expect("the CronJob");
    object.data["status"]["lastScheduleTime"].clone()
}

async fn an_applying_module_writes_nothing_in_steady_state_and_removes_what_it_no_longer_sets(queue: Queue) {
    let plane = plane();
    let (ns, operator) = start(plane, queue, "apply", full_spec()).await;

    // Converged: all fifteen, with what the server and the cluster's
    // controllers filled in.
    for child in queue_support::children() {
        object_where(&ns, &child.resource, child.name, |o| labels(o).contains_key("tier")).await;
    }
    let set = serde_json::to_value(ns.get(&stateful_sets(), "orders").await.expect("the StatefulSet")).expect("JSON");
    assert_eq!(set["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem", "a server default");
    assert_eq!(set["spec"]["podManagementPolicy"], "OrderedReady", "a server default");
    let service =
        object_where(&ns, &services(), "orders", |s| s["spec"]["ports"].as_array().is_some_and(|p| p.len() == 2)).await;
    let service = serde_json::to_value(&service).expect("JSON");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 5672, "a server default");
    assert_eq!(service["spec"]["ports"][1]["protocol"], "TCP", "a server default");
    object_where(&ns, &config_maps(), "orders-settings", |c| {
        c["data"] == json!({"a": "1", "b": "2", "prefetch": "10"})
    })
    .await;
    let annotation = &set["metadata"]["annotations"]["wasm-operator.c5c3.io/applied-digest"];
    assert!(annotation.as_str().is_some_and(|d| d.starts_with("sha256:")), "the applied answer's digest: {annotation}");
    // The autoscaler (kube-controller-manager's) holds the consumers at
    // their minReplicas, a field the module does not set.
    let consumers = queue_support::child("Deployment");
    let deployment = object_where(&ns, &consumers.resource, consumers.name, |d| d["spec"]["replicas"] == 2).await;
    let limits = &serde_json::to_value(&deployment).expect("JSON")["spec"]["template"]["spec"]["containers"][0]["resources"]
        ["limits"];
    assert_eq!(limits["cpu"], "500m", "the server re-spells the answer's 0.5");
    eventually("the StatefulSet's Pod ready, as the Queue's status says", || async {
        (queue_status(&ns, 1).await["readyReplicas"] == 1).then_some(())
    })
    .await;

    // Steady state: resyncs every second, the controllers' status churn
    // (the CronJob's runs, the autoscaler's) and the StatefulSet's status
    // changed besides write nothing at all.
    reconciles_more(&operator, 2).await;
    let mark = plane.audit_mark().expect("the audit log");
    let before = (operator.reconciles("success"), last_scheduled(&ns).await);
    let sets = ns.api(&stateful_sets());
    let window = steady_window();
    let started = std::time::Instant::now();
    for round in 0.. {
        if started.elapsed() >= window {
            break;
        }
        churn_status(&sets, &format!("r{round}")).await;
        tokio::time::sleep(Duration::from_secs(10).min(window)).await;
    }
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "steady state wrote: {:?}", described(&writes));
    let reconciled = operator.reconciles("success") - before.0;
    assert!(reconciled >= window.as_secs() / 2, "{reconciled} reconciles in {window:?} of resyncs every second");
    assert_ne!(last_scheduled(&ns).await, before.1, "the CronJob ran in the window: its status changed");

    // A spec that no longer sets a label, an env var, a port, a key and
    // two whole objects (the budget, the Ingress): each removed, one write
    // per changed object.
    let mark = plane.audit_mark().expect("the audit log");
    let mut spec = full_spec();
    spec["labels"] = json!({"team": "a"});
    spec["settings"] = json!({"a": "1"});
    spec["env"] = json!({"A": "1"});
    for field in ["metricsPort", "disruptionBudget", "host"] {
        spec.as_object_mut().expect("a spec").remove(field);
    }
    edit(&ns.api(&queues()), "orders", |queue| queue.data["spec"] = spec.clone()).await;
    let set = object_where(&ns, &stateful_sets(), "orders", |s| {
        !labels(s).contains_key("tier")
            && s["spec"]["template"]["spec"]["containers"][0]["env"] == json!([{"name": "A", "value": "1"}])
    })
    .await;
    let set = serde_json::to_value(&set).expect("JSON");
    assert_eq!(
        set["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"name": "queue", "containerPort": 5672, "protocol": "TCP"}])
    );
    assert_eq!(
        set["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem",
        "the server's default stays"
    );
    let service =
        object_where(&ns, &services(), "orders", |s| s["spec"]["ports"].as_array().is_some_and(|p| p.len() == 1)).await;
    assert!(!labels(&serde_json::to_value(&service).expect("JSON")).contains_key("tier"));
    object_where(&ns, &config_maps(), "orders-settings", |c| c["data"] == json!({"a": "1", "prefetch": "10"})).await;
    let gone = ["PodDisruptionBudget", "Ingress"];
    for child in queue_support::children() {
        if gone.contains(&child.resource.kind.as_str()) {
            eventually(&format!("the {} to be gone", child.resource.kind), || async {
                ns.get(&child.resource, child.name).await.is_none().then_some(())
            })
            .await;
        } else {
            object_where(&ns, &child.resource, child.name, |o| !labels(o).contains_key("tier")).await;
        }
    }
    queue_status(&ns, 2).await;
    reconciles_more(&operator, 3).await;
    let writes: Vec<AuditEvent> = ns
        .operator_writes(mark)
        .await
        .into_iter()
        // Events, and the status: the StatefulSet's new Pod template rolls
        // its Pod, so the ready replicas the status shows may change.
        .filter(|w| w.resource.as_deref() != Some("events") && w.subresource.as_deref() != Some("status"))
        .collect();
    let mut expected: Vec<String> = queue_support::children()
        .iter()
        .map(|child| {
            let verb = if gone.contains(&child.resource.kind.as_str()) { "delete" } else { "patch" };
            format!("{verb} {} {}", child.resource.plural, child.name)
        })
        .collect();
    expected.sort();
    assert_eq!(described(&writes), expected, "one write per changed object, and none after");
    let deployment = ns.get(&consumers.resource, consumers.name).await.expect("the consumers");
    assert_eq!(deployment.data["spec"]["replicas"], 2, "the autoscaler's replicas stay");
    operator.stop().await.expect("a clean stop");
}

async fn another_managers_fields_are_left_alone_and_a_field_edited_by_hand_is_taken_back(queue: Queue) {
    let plane = plane();
    let (ns, operator) =
        start(plane, queue, "apply-others", json!({"image": "queue:1", "labels": {"team": "a"}})).await;
    let sets = ns.api(&stateful_sets());
    object_where(&ns, &stateful_sets(), "orders", |s| labels(s).get("team").map(String::as_str) == Some("a")).await;
    queue_status(&ns, 1).await;
    reconciles_more(&operator, 2).await;

    // An autoscaler's replicas: the module sets none, so nothing fights.
    let mark = plane.audit_mark().expect("the audit log");
    let scale = PatchParams { field_manager: Some("autoscaler".into()), ..PatchParams::default() };
    sets.patch("orders", &scale, &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.expect("scaling");
    reconciles_more(&operator, 3).await;
    // The Queue's own status may follow the ready replicas the scale added.
    let writes: Vec<AuditEvent> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() != Some("queues")).collect();
    assert!(writes.is_empty(), "the autoscaler's replicas made the operator write: {:?}", described(&writes));
    let set = serde_json::to_value(sets.get("orders").await.expect("the StatefulSet")).expect("JSON");
    assert_eq!(set["spec"]["replicas"], 3, "the autoscaler's replicas stay");

    // A label the module sets, edited by hand: taken back, and said so.
    let by_hand = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
    sets.patch("orders", &by_hand, &Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}})))
        .await
        .expect("editing");
    object_where(&ns, &stateful_sets(), "orders", |s| labels(s).get("team").map(String::as_str) == Some("a")).await;
    let notes = eventually("a FieldsTakenOver event", || async {
        let notes = ns.event_notes("FieldsTakenOver").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert!(
        notes[0].contains("StatefulSet orders") && notes[0].contains("labels") && notes[0].contains("kubectl-edit"),
        "{notes:?}"
    );
    let labels = format!("module=\"{}\",kind=\"StatefulSet\"", queue.name);
    let conflicts = operator.metric("wasm_operator_apply_conflicts_total", &labels);
    assert!(conflicts >= 1, "the conflict is counted");
    let set = serde_json::to_value(sets.get("orders").await.expect("the StatefulSet")).expect("JSON");
    assert_eq!(set["spec"]["replicas"], 3, "taking the label back leaves the autoscaler's replicas");

    // And steady again, once the status shows the three ready Pods.
    eventually("three ready replicas in the Queue's status", || async {
        (queue_status(&ns, 1).await["readyReplicas"] == 3).then_some(())
    })
    .await;
    reconciles_more(&operator, 2).await;
    let mark = plane.audit_mark().expect("the audit log");
    reconciles_more(&operator, 3).await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "wrote after taking the label back: {:?}", described(&writes));
    operator.stop().await.expect("a clean stop");
}

/// What `module` answers for a Queue with `spec`: the objects as JSON
/// values, or the error it answers.
fn answer(module: &LogicModule, spec: &Value) -> Result<Vec<Value>, String> {
    let parent = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Queue",
        "metadata": {"name": "orders", "namespace": "ns", "uid": "u-1", "generation": 1}, "spec": spec});
    let mut reconciler = module.reconciler().expect("an instance");
    let texts = reconciler.desired(&parent.to_string(), &[], &[]).map_err(|e| e.to_string())?;
    Ok(texts.iter().map(|text| serde_json::from_str(text).expect("JSON")).collect())
}

#[test]
fn the_three_sdks_ship_the_same_crd_and_answer_the_same_objects() {
    let crd = |module: &LogicModule| serde_norway::from_str::<Value>(&module.manifest().crd).expect("the CRD");
    let specs = [
        full_spec(),
        json!({"image": "queue:1"}),
        json!({"image": "queue:2", "replicas": 3, "storage": "5Gi", "env": {"B": "2", "A": "1"}}),
        json!({"image": "queue:2", "consumers": {"image": "c:1", "minReplicas": 1, "maxReplicas": 9},
               "peerDiscovery": true, "username": "é"}),
        json!({"image": "", "storage": ""}),
        json!({"image": "queue:1", "consumers": {"image": "", "minReplicas": 3, "maxReplicas": 2}}),
    ];
    let rust = RUST.module();
    assert!(answer(&rust, &specs[4]).is_err(), "an empty image and storage are invalid");
    assert!(answer(&rust, &specs[5]).is_err(), "an empty consumer image and fewer max than min replicas");
    for other in [TYPESCRIPT.module(), PYTHON.module()] {
        assert_eq!(crd(&other), crd(&rust), "{}'s CRD", other.name());
        for spec in &specs {
            assert_eq!(answer(&other, spec), answer(&rust, spec), "{}'s answer for {spec}", other.name());
        }
    }
}
