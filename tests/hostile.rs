//! Hostile module answers (issue 22 item 2): the Greeting module's
//! `hostile` build answers `hostile:<answer>` messages with what the host
//! must refuse. For each, in one process with the Memcached module: the
//! parent gets `Stalled=True` (`ModuleInvalidOutput`) and a Warning event
//! naming what was wrong and where, the host writes nothing for it but that
//! condition, the refusal is counted by reason, and meanwhile a Memcached
//! and a well-behaved Greeting converge and the host keeps serving.

#[path = "operator_support.rs"]
mod operator_support;

use kube::api::{ApiResource, DynamicObject, PostParams};
use operator_support::*;
use serde_json::{Value, json};

fn greetings_resource() -> ApiResource {
    gvk("example.c5c3.io", "v1", "Greeting", "greetings")
}

fn configmaps_resource() -> ApiResource {
    gvk("", "v1", "ConfigMap", "configmaps")
}

/// One hostile answer: the Greeting's name, its message, the metric's
/// reason, and words the Stalled message and the Warning event carry.
const HOSTILE: &[(&str, &str, &str, &str)] = &[
    (
        "other-namespace",
        "hostile:other-namespace",
        "other_namespace",
        "object 0: ConfigMap other-namespace is in namespace \"kube-system\", not the parent's",
    ),
    ("not-owned-kind", "hostile:not-owned-kind", "not_owned_kind", "object 0: v1/Secret is not an owned kind"),
    (
        "other-owner",
        "hostile:other-owner",
        "other_owner",
        "object 0: ConfigMap other-owner names another controller (uid \"6f0ba1d6-0000-4000-8000-000000000000\")",
    ),
    ("cluster-scoped", "hostile:cluster-scoped", "not_owned_kind", "object 0: v1/Namespace is not an owned kind"),
    (
        "many-objects",
        "hostile:100k-objects",
        "too_many_objects",
        "100000 objects in one answer, more than the 10000 allowed",
    ),
    ("large-string", "hostile:100mib-string", "too_large", "object 0: the answer passes 16 MiB here"),
    ("deep", "hostile:deep", "too_deep", "object 0: JSON nested deeper than 100 levels"),
    ("invalid-utf8", "hostile:invalid-utf8", "invalid_utf8", "object 1: not valid UTF-8"),
    ("duplicate", "hostile:duplicate", "duplicate", "object 1: ConfigMap duplicate is answered twice"),
    ("status-array", "hostile:status-array", "status_not_object", "status: [] is not a JSON object"),
    ("status-string", "hostile:status-string", "status_not_object", "status: \"x\" is not a JSON object"),
    ("status-number", "hostile:status-number", "status_not_object", "status: 42 is not a JSON object"),
    ("status-null", "hostile:status-null", "status_not_object", "status: null is not a JSON object"),
    ("status-deep", "hostile:status-deep", "too_deep", "status: JSON nested deeper than 100 levels"),
];

fn stalled(status: &Value) -> Option<&Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == "Stalled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_answers_are_refused_without_harm_and_counted() {
    let ns = TestNamespace::new("hostile").await;
    let plane = ns.plane;
    let greeting = module_file("greeting-hostile.wasm");
    plane.apply_yaml(&greeting.manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&greetings_resource());
    let create = |name: &str, message: &str| {
        let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "metadata": {"name": name},
                              "spec": {"message": message}});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        let greetings = greetings.clone();
        async move { greetings.create(&PostParams::default(), &greeting).await.expect("creating a Greeting") }
    };
    let configmap = |name: &'static str, message: &'static str| {
        let ns = &ns;
        async move {
            eventually(&format!("ConfigMap {name} saying {message}"), || async {
                ns.get(&configmaps_resource(), name).await.filter(|c| c.data["data"]["message"] == message)
            })
            .await
        }
    };
    create("good", "hi").await;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let mark = plane.audit_mark().expect("the audit log");
    for (name, message, _, _) in HOSTILE {
        create(name, message).await;
    }
    let operator = Running::start_modules(plane, vec![memcached_module(), greeting], options(&ns.namespace)).await;
    configmap("good", "hi").await;
    converged(&ns, "cache").await;

    for (name, _, reason, words) in HOSTILE {
        let status = eventually(&format!("the Stalled condition of {name}"), || async {
            let status = greetings.get(name).await.ok()?.data.get("status")?.clone();
            stalled(&status).is_some().then_some(status)
        })
        .await;
        let condition = stalled(&status).expect("Stalled");
        assert_eq!(
            (&condition["status"], &condition["reason"]),
            (&json!("True"), &json!("ModuleInvalidOutput")),
            "{name}: {condition}"
        );
        assert!(condition["message"].as_str().is_some_and(|m| m.contains(words)), "{name} ({reason}): {condition}");
        // Nothing of the module's: the status holds the host's condition only.
        assert_eq!(
            status.as_object().map(|s| s.keys().collect::<Vec<_>>()),
            Some(vec![&"conditions".to_owned()]),
            "{name}: {status}"
        );
        eventually(&format!("the Warning event of {name}"), || async {
            ns.event_notes("ModuleInvalidOutput").await.iter().any(|n| n.contains(words)).then_some(())
        })
        .await;
    }

    // Meanwhile the host and both modules keep serving.
    ns.set_spec("cache", json!({"replicas": 2})).await;
    let memcached = converged(&ns, "cache").await;
    assert_eq!(memcached["Deployment"].data["spec"]["replicas"], 2);
    edit(&greetings, "good", |g| g.data["spec"]["message"] = json!("hi again")).await;
    configmap("good", "hi again").await;

    // Written for the hostile parents: their Stalled status, and nothing
    // else, in this namespace or any other.
    let hostile = |name: Option<&str>| HOSTILE.iter().any(|(h, ..)| Some(*h) == name);
    let writes = ns.operator_writes(mark).await;
    let other: Vec<_> = writes
        .iter()
        .filter(|w| hostile(w.name.as_deref()))
        .filter(|w| !(w.resource.as_deref() == Some("greetings") && w.subresource.as_deref() == Some("status")))
        .collect();
    assert!(other.is_empty(), "written for a hostile parent: {other:?}");
    let elsewhere: Vec<_> = plane
        .writes_by(OPERATOR_USER, mark)
        .expect("reading the audit log")
        .into_iter()
        .filter(|w| {
            w.namespace.as_deref() == Some("kube-system")
                || (w.namespace.is_none() && w.resource.as_deref() == Some("namespaces"))
        })
        .collect();
    assert!(elsewhere.is_empty(), "written outside the namespace: {elsewhere:?}");
    for name in ["other-namespace", "other-owner", "duplicate", "invalid-utf8", "status-array"] {
        assert!(ns.get(&configmaps_resource(), name).await.is_none(), "ConfigMap {name} was created");
    }

    let metrics = operator.metrics.encode();
    for (name, _, reason, _) in HOSTILE {
        let labels = format!("module=\"greeting\",reason=\"{reason}\"");
        let counted = metric_value(&metrics, "wasm_operator_module_refused_answers_total", &labels);
        assert!(counted >= 1, "{name}: {reason} not counted: {metrics}");
    }
    let memcached_refused =
        metric_value(&metrics, "wasm_operator_module_refused_answers_total", "module=\"memcached\"");
    assert_eq!(memcached_refused, 0, "{metrics}");
    operator.stop().await.expect("a clean stop: the host is alive");
}

/// A status answer holding a field the CRD's schema does not have: the API
/// server prunes it, and the host compares the answer as the server stores
/// it, so the status is written once and not again on every reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_field_the_schema_prunes_is_written_once() {
    let ns = TestNamespace::new("pruned").await;
    let plane = ns.plane;
    let greeting = module_file("greeting-hostile.wasm");
    plane.apply_yaml(&greeting.manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&greetings_resource());
    let object = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "metadata": {"name": "pruned"},
                        "spec": {"message": "hostile:status-pruned"}});
    let object: DynamicObject = serde_json::from_value(object).expect("a Greeting");
    greetings.create(&PostParams::default(), &object).await.expect("creating a Greeting");
    let mut options = options(&ns.namespace);
    options.resync_period = std::time::Duration::from_millis(300);
    let operator = Running::start_modules(plane, vec![greeting], options).await;
    let status = eventually("the status written", || async {
        let status = greetings.get("pruned").await.ok()?.data.get("status")?.clone();
        (status["phase"] == "Pruned").then_some(status)
    })
    .await;
    assert!(status.get("unknownField").is_none(), "the API server prunes it: {status}");

    let mark = plane.audit_mark().expect("the audit log");
    let before = operator.reconciles("success");
    eventually("ten more reconciles", || async { (operator.reconciles("success") >= before + 10).then_some(()) }).await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "written while nothing changed: {writes:?}");
    operator.stop().await.expect("a clean stop");
}
