//! What a version that writes by server-side apply will do, shown before it
//! does it, against a real API server: the Queue module (tests/modules/queue)
//! converges with its fifteen children, and `wasm-operator plan` of its next
//! version (the cargo feature `v2`: no `app.kubernetes.io/name` label on its
//! children, no `PREFETCH` env var, `metrics` port or `prefetch` settings key
//! for the consumers, no Ingress, a `QUEUE_MODE` env var on the brokers)
//! names, object by object and field by field, the applies and the deletion
//! that version then sends (the audit log), removals included, and nothing
//! the server filled in or another manager set. Planned the other way, each
//! comes back and `QUEUE_MODE` goes.

mod operator_support;
mod queue_support;

use std::process::Command;
use std::time::Duration;

use control_plane::{ControlPlane, User};
use kube::api::{DynamicObject, PostParams};
use operator_support::{
    Running, TestNamespace, described, eventually, grant_operator_everything, gvk, host_binary, module_file,
    module_path, options,
};
use serde_json::{Value, json};

const NAME_LABEL: &str = r#"metadata.labels["app.kubernetes.io/name"]"#;
const QUEUE_MODE: &str = "spec.template.spec.containers[name=queue].env[name=QUEUE_MODE]";
const PREFETCH: &str = "spec.template.spec.containers[name=consumer].env[name=PREFETCH]";
const METRICS_PORT: &str = "spec.template.spec.containers[name=consumer].ports[containerPort=9102,protocol=TCP]";

/// `plan --module NEW --against CURRENT -n NAMESPACE -o json`: its exit
/// code, and each object it lists as `action Kind name`, with its field
/// changes as `path: old -> new`, sorted.
fn plan(plane: &ControlPlane, new: &str, current: &str, namespace: &str) -> (Option<i32>, Vec<(String, Vec<String>)>) {
    let out = Command::new(host_binary())
        .args(["plan", "--module", &module_path(new), "--against", &module_path(current)])
        .args(["-n", namespace, "-o", "json"])
        .env("KUBECONFIG", plane.kubeconfig(User::Admin))
        .output()
        .expect("running plan");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let document: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("plan's JSON: {e}\n{stderr}"));
    let parents = document["parents"].as_array().cloned().unwrap_or_default();
    assert!(parents.len() <= 1, "{document}");
    for parent in &parents {
        assert!(parent.get("newError").is_none() && parent.get("currentError").is_none(), "{parent}");
        assert_eq!(parent["status"], json!([]), "no status change: {parent}");
    }
    let mut objects: Vec<(String, Vec<String>)> = parents
        .iter()
        .flat_map(|parent| parent["objects"].as_array().cloned().unwrap_or_default())
        .map(|object| {
            let head = format!("{} {} {}", text(&object["action"]), text(&object["kind"]), text(&object["name"]));
            let mut fields: Vec<String> = object["fields"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| format!("{}: {} -> {}", text(&f["path"]), shown(&f["old"]), shown(&f["new"])))
                .collect();
            fields.sort();
            (head, fields)
        })
        .collect();
    objects.sort();
    (out.status.code(), objects)
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn shown(value: &Value) -> String {
    if value.is_null() { "(none)".to_owned() } else { value.to_string() }
}

fn removed(path: &str, old: &str) -> String {
    format!("{path}: {old} -> (none)")
}

fn added(path: &str, new: &str) -> String {
    format!("{path}: (none) -> {new}")
}

/// The Queue's children but those of `kinds`.
fn children_but(kinds: &[&str]) -> Vec<queue_support::Child> {
    queue_support::children().into_iter().filter(|c| !kinds.contains(&c.resource.kind.as_str())).collect()
}

/// Until each of `children` satisfies `check`.
async fn children_where(
    ns: &TestNamespace<'_>,
    children: &[queue_support::Child],
    what: &str,
    check: impl Fn(&str, &Value) -> bool,
) {
    eventually(what, || async {
        for child in children {
            let object = serde_json::to_value(ns.get(&child.resource, child.name).await?).ok()?;
            if !check(&child.resource.kind, &object) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

async fn run_until_converged(
    plane: &'static ControlPlane,
    ns: &TestNamespace<'_>,
    file: &str,
    children: &[queue_support::Child],
    converged: impl Fn(&str, &Value) -> bool,
) -> Running {
    let mut options = options(&ns.namespace);
    options.resync_period = Duration::from_secs(1);
    let operator = Running::start(plane, module_file(file), options).await;
    children_where(ns, children, &format!("{file}'s children"), converged).await;
    // Its status, and a few resyncs after it.
    let now = operator.reconciles("success");
    eventually("three more reconciles", || async { (operator.reconciles("success") >= now + 3).then_some(()) }).await;
    operator
}

fn labelled(object: &Value) -> bool {
    object["metadata"]["labels"].get("app.kubernetes.io/name").is_some()
}

fn has_queue_mode(kind: &str, object: &Value) -> bool {
    kind != "StatefulSet"
        || object["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .is_some_and(|env| env.iter().any(|var| var["name"] == "QUEUE_MODE"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_an_applying_version_names_the_applies_it_then_sends() {
    let plane = ControlPlane::shared();
    let v1 = module_file("queue.wasm");
    plane.apply_yaml(&v1.manifest().crd).await.expect("installing the Queue CRD");
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, "apply-plan").await;
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.c5c3.io/v1", "kind": "Queue", "metadata": {"name": "orders"},
        "spec": queue_support::full_spec()
    }))
    .expect("a Queue");
    let queues = ns.api(&gvk("example.c5c3.io", "v1", "Queue", "queues"));
    queues.create(&PostParams::default(), &queue).await.expect("creating the Queue");

    let operator =
        run_until_converged(plane, &ns, "queue.wasm", &children_but(&["Ingress"]), |_, object| labelled(object)).await;
    operator.stop().await.expect("a clean stop");

    // The same version: nothing to do.
    let (code, objects) = plan(plane, "queue.wasm", "queue.wasm", &ns.namespace);
    assert_eq!((code, objects), (Some(0), vec![]));

    let (code, objects) = plan(plane, "queue-v2.wasm", "queue.wasm", &ns.namespace);
    assert_eq!(objects, planned(Direction::Forward), "v2 against v1");
    assert_eq!(code, Some(2), "changes");

    // What v2 then writes: exactly those applies and the deletion, and
    // nothing once done.
    let mark = plane.audit_mark().expect("the audit log");
    let operator = run_until_converged(plane, &ns, "queue-v2.wasm", &children_but(&["Ingress"]), |kind, o| {
        !labelled(o) && has_queue_mode(kind, o)
    })
    .await;
    eventually("the Ingress to be gone", || async {
        ns.get(&queue_support::child("Ingress").resource, "orders").await.is_none().then_some(())
    })
    .await;
    let writes: Vec<_> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() != Some("events")).collect();
    let mut sent: Vec<String> = queue_support::children()
        .iter()
        .map(|c| {
            let verb = if c.resource.kind == "Ingress" { "delete" } else { "patch" };
            format!("{verb} {} {}", c.resource.plural, c.name)
        })
        .collect();
    sent.sort();
    assert_eq!(described(&writes), sent, "the planned writes, one each");
    operator.stop().await.expect("a clean stop");

    // Back: the label, the env var, the port, the key and the Ingress
    // return; QUEUE_MODE goes.
    let (code, objects) = plan(plane, "queue.wasm", "queue-v2.wasm", &ns.namespace);
    assert_eq!(objects, planned(Direction::Back), "v1 against v2");
    assert_eq!(code, Some(2));
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    /// v1 to v2.
    Forward,
    /// v2 to v1.
    Back,
}

/// What `plan` lists between v1 and v2, as [`plan`] gives it: v2 drops the
/// `app.kubernetes.io/name` label everywhere, the consumers' `PREFETCH`
/// env var and `metrics` port, the settings' `prefetch` key and the
/// Ingress, and adds `QUEUE_MODE` to the brokers.
fn planned(direction: Direction) -> Vec<(String, Vec<String>)> {
    let change = |path: &str, v1: &str| match direction {
        Direction::Forward => removed(path, v1),
        Direction::Back => added(path, v1),
    };
    let queue_mode = r#"{"name":"QUEUE_MODE","value":"durable"}"#;
    let mut objects: Vec<(String, Vec<String>)> = queue_support::children()
        .iter()
        .map(|child| {
            let kind = child.resource.kind.as_str();
            if kind == "Ingress" {
                return match direction {
                    Direction::Forward => ("delete Ingress orders".to_owned(), vec![]),
                    Direction::Back => {
                        let rules = r#"[{"host":"orders.example.com","http":{"paths":[{"backend":{"service":{"name":"orders","port":{"name":"queue"}}},"path":"/","pathType":"Prefix"}]}}]"#;
                        let mut fields = vec![
                            added("metadata.labels.team", "\"a\""),
                            added("metadata.labels.tier", "\"gold\""),
                            added(r#"metadata.labels["app.kubernetes.io/instance"]"#, "\"orders\""),
                            added(NAME_LABEL, "\"queue\""),
                            added("spec.rules", rules),
                        ];
                        fields.sort();
                        ("create Ingress orders".to_owned(), fields)
                    }
                };
            }
            let mut fields = vec![change(NAME_LABEL, "\"queue\"")];
            match kind {
                "StatefulSet" => fields.push(match direction {
                    Direction::Forward => added(QUEUE_MODE, queue_mode),
                    Direction::Back => removed(QUEUE_MODE, queue_mode),
                }),
                "Deployment" => {
                    fields.push(change(PREFETCH, r#"{"name":"PREFETCH","valueFrom":{"configMapKeyRef":{"key":"prefetch","name":"orders-settings"}}}"#));
                    // Removed, the port is shown as it is in the object, with
                    // the server's default protocol; added, as v1 answers it.
                    fields.push(match direction {
                        Direction::Forward => {
                            removed(METRICS_PORT, r#"{"containerPort":9102,"name":"metrics","protocol":"TCP"}"#)
                        }
                        Direction::Back => added(METRICS_PORT, r#"{"containerPort":9102,"name":"metrics"}"#),
                    });
                }
                "ConfigMap" => fields.push(change("data.prefetch", "\"10\"")),
                _ => {}
            }
            fields.sort();
            (format!("update {kind} {}", child.name), fields)
        })
        .collect();
    objects.sort();
    objects
}

/// The Queue's statuses as the API server stores them, from a watch, until
/// one satisfies `check` (a status the host writes for one reconcile only,
/// which a poll could miss).
async fn status_seen(queues: &kube::Api<DynamicObject>, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let stream = watcher(queues.clone(), watcher::Config::default()).applied_objects();
    let mut stream = std::pin::pin!(stream);
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(event) = stream.next().await {
            let Ok(queue) = event else { continue };
            let status = queue.data.get("status").cloned().unwrap_or_default();
            if check(&status) {
                return status;
            }
        }
        Value::Null
    })
    .await;
    found.unwrap_or_else(|_| panic!("no Queue status {what} within 60 s"))
}

fn taken_over(status: &Value) -> Option<&Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == "FieldsTakenOver")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_taken_over_from_another_manager_shows_in_a_condition_until_a_reconcile_takes_none() {
    let plane = ControlPlane::shared();
    let module = module_file("queue.wasm");
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the Queue CRD");
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, "apply-taken").await;
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.c5c3.io/v1", "kind": "Queue", "metadata": {"name": "orders"},
        "spec": {"image": "queue:1", "labels": {"team": "a"}, "disruptionBudget": true}
    }))
    .expect("a Queue");
    let queues = ns.api(&gvk("example.c5c3.io", "v1", "Queue", "queues"));
    queues.create(&PostParams::default(), &queue).await.expect("creating the Queue");
    // The spec asks for the budget and no other optional object: the
    // first four children.
    let children: Vec<_> = queue_support::children().into_iter().take(4).collect();
    let operator = run_until_converged(plane, &ns, "queue.wasm", &children, |_, object| labelled(object)).await;
    let status = serde_json::to_value(queues.get("orders").await.expect("the Queue")).expect("JSON");
    assert!(taken_over(&status["status"]).is_none(), "nothing taken over yet: {status}");

    // A label the module sets, edited by hand.
    let watching = {
        let queues = queues.clone();
        tokio::spawn(async move {
            status_seen(&queues, "with FieldsTakenOver", |status| taken_over(status).is_some()).await
        })
    };
    let config_maps = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    let by_hand = kube::api::PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    let edit = kube::api::Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}}));
    config_maps.patch("orders-settings", &by_hand, &edit).await.expect("editing the label");
    let status = watching.await.expect("the watch");
    let condition = taken_over(&status).expect("the condition");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "ApplyConflict");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ConfigMap orders-settings") && message.contains("labels") && message.contains("kubectl-edit"),
        "{condition}"
    );
    assert_eq!(status["observedGeneration"], 1, "the module's own status is kept beside it: {status}");

    // The next reconcile (a resync) takes nothing over: the module's status
    // alone, and the label is the module's again.
    status_seen(&queues, "without FieldsTakenOver", |status| {
        status.get("observedGeneration").is_some() && taken_over(status).is_none()
    })
    .await;
    let settings =
        serde_json::to_value(config_maps.get("orders-settings").await.expect("the ConfigMap")).expect("JSON");
    assert_eq!(settings["metadata"]["labels"]["team"], "a");
    operator.stop().await.expect("a clean stop");
}

/// Versions that write as different field managers (the Queue module on
/// two SDKs: `queue-operator`, `queue-ts-operator`) are not one module's
/// versions: a swap between them is refused, and so is their plan.
#[test]
fn a_plan_between_two_field_managers_is_refused() {
    let dir = std::env::temp_dir().join(format!("apply-plan-managers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("queue.yaml");
    let queue = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Queue",
                       "metadata": {"name": "orders", "namespace": "ns"}, "spec": {"image": "queue:1"}});
    std::fs::write(&file, queue.to_string()).expect("writing the Queue");
    let out = Command::new(host_binary())
        .args(["plan", "--module", &module_path("queue-ts.wasm"), "--against", &module_path("queue.wasm")])
        .arg("-f")
        .arg(&file)
        .output()
        .expect("running plan");
    std::fs::remove_dir_all(&dir).ok();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains(r#"different field managers: NEW "queue-ts-operator", CURRENT "queue-operator""#),
        "{stderr}"
    );
}
