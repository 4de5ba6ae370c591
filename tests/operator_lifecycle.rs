//! The operator against a real kube-apiserver: creation, every
//! runtime-behaviour row of the seeds' tables (enable, change, disable and
//! re-enable each feature; annotations replaced wholesale; standard labels
//! win; ports follow TLS and monitoring), drift, steady state, status,
//! Secrets, garbage collection and objects that are not ours.

#[path = "operator_support.rs"]
mod operator_support;

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use operator_support::*;
use serde_json::{Value, json};

fn port_names(object: &DynamicObject, pointer: &str) -> Vec<String> {
    object
        .data
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

fn container_names(deployment: &DynamicObject) -> Vec<String> {
    port_names(deployment, "/spec/template/spec/containers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_every_object_owned_by_the_cr_with_events_and_status() {
    let ns = TestNamespace::new("create").await;
    create_everything_secrets(&ns).await;
    let cr = ns.create_memcached("full-cache", everything_spec()).await;
    let _operator = ns.start_operator().await;

    let live = converged(&ns, "full-cache").await;
    assert_eq!(live.len(), 6, "every owned kind exists: {:?}", live.keys().collect::<Vec<_>>());
    for (kind, object) in &live {
        assert_eq!(controller_uid(object), cr.uid(), "{kind} is controlled by the CR");
        let reference = object.owner_references().iter().find(|r| r.controller == Some(true)).cloned();
        let reference = reference.expect("a controller reference");
        assert_eq!((reference.kind.as_str(), reference.name.as_str()), ("Memcached", "full-cache"));
        assert_eq!(reference.block_owner_deletion, Some(true), "{kind}");
    }
    let created = eventually("six Created events", || async {
        let notes = ns.event_notes("Created").await;
        (notes.len() >= 6).then_some(notes)
    })
    .await;
    for (kind, _) in owned_kinds() {
        assert!(created.contains(&format!("Created {kind} full-cache")), "{kind}: {created:?}");
    }
    let status = ns.wait_status("full-cache", |s| s["conditions"].as_array().is_some_and(|c| c.len() == 4)).await;
    // Autoscaled: the desired count is the Deployment's, 0 without pods here.
    assert_eq!(condition(&status, "Degraded")["reason"], "NotDegraded", "both Secrets exist: {status}");
    assert_eq!(status["readyReplicas"], 0);
    assert!(ns.event_notes("Updated").await.is_empty(), "nothing was updated after creation");
}

/// Both served versions reconcile: the operator watches the storage version
/// (v1beta1), so a CR written through v1alpha1 is the same object, and its
/// children's controller references name v1beta1, as the Go operator's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cr_of_either_served_version_owns_its_children_through_v1beta1() {
    let ns = TestNamespace::new("versions").await;
    let beta = ns.api(&gvk("memcached.c5c3.io", "v1beta1", "Memcached", "memcacheds"));
    let mut created = Vec::new();
    for (version, api) in [("v1alpha1", ns.memcacheds()), ("v1beta1", beta.clone())] {
        let name = format!("cache-{version}");
        let cr: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("memcached.c5c3.io/{version}"), "kind": "Memcached",
            "metadata": {"name": name}, "spec": {"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true}}},
        }))
        .expect("a Memcached");
        let cr = api.create(&PostParams::default(), &cr).await.expect("creating the CR");
        created.push((name, cr.uid()));
    }
    let _operator = ns.start_operator().await;
    for (name, uid) in created {
        let live = converged(&ns, &name).await;
        assert_eq!(live.len(), 3, "{name}: Deployment, Service and PDB: {:?}", live.keys().collect::<Vec<_>>());
        for (kind, object) in &live {
            let reference = object.owner_references().iter().find(|r| r.controller == Some(true)).cloned();
            let reference = reference.unwrap_or_else(|| panic!("{name}: {kind} has a controller reference"));
            assert_eq!(reference.api_version, "memcached.c5c3.io/v1beta1", "{name}: {kind}");
            assert_eq!((reference.name.as_str(), Some(reference.uid)), (name.as_str(), uid.clone()), "{kind}");
        }
        // The status the operator wrote reads the same through both versions.
        let through_beta = beta.get(&name).await.expect("read as v1beta1");
        let through_alpha = ns.memcacheds().get(&name).await.expect("read as v1alpha1");
        assert_eq!(through_beta.data["status"], through_alpha.data["status"], "{name}");
        assert_eq!(through_beta.data["status"]["observedGeneration"], 1, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_cr_costs_no_write_at_all() {
    let ns = TestNamespace::new("steady").await;
    create_everything_secrets(&ns).await;
    ns.create_memcached("steady", everything_spec()).await;
    let first = ns.start_operator().await;
    converged(&ns, "steady").await;
    let status = ns.wait_status("steady", |s| s["conditions"].is_array()).await;
    // Let the writes of the first pass settle into the caches.
    eventually("the first operator to go idle", || async {
        let before = first.reconciles("success");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        (first.reconciles("success") == before).then_some(())
    })
    .await;
    first.stop().await.expect("a clean stop");

    // A fresh operator reconciles the CR from scratch: nothing to write.
    let mark = ns.plane.audit_mark().expect("an audit mark");
    let second = ns.start_operator().await;
    eventually("a full reconcile", || async { (second.reconciles("success") >= 1).then_some(()) }).await;
    // A metadata-only change of the CR triggers another reconcile.
    let touched = json!({"metadata": {"labels": {"touched": "yes"}}});
    ns.memcacheds().patch("steady", &PatchParams::default(), &Patch::Merge(&touched)).await.expect("labelling");
    eventually("a second reconcile", || async { (second.reconciles("success") >= 2).then_some(()) }).await;

    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "an unchanged CR must cost no write; the operator wrote: {writes:#?}");
    assert_eq!(second.metric("wasm_operator_create_or_update_total", "outcome=\"unchanged\""), 12);
    let after = ns.memcacheds().get("steady").await.expect("the CR").data["status"].clone();
    assert_eq!(after, status, "the status did not change");
}

/// Waits until `operator` has made no reconcile for a second, and says how
/// many it made.
async fn settled(operator: &Running) -> u64 {
    eventually("the operator to go idle", || async {
        let before = operator.reconciles("success") + operator.reconciles("error");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let after = operator.reconciles("success") + operator.reconciles("error");
        (after == before).then_some(after)
    })
    .await
}

/// Its own writes (six children, a status) come back as watch events; they
/// wake no reconcile of their own: once all six are in the caches, one
/// more reconcile (the next step, for modules written in steps) finds
/// nothing to write. A change made by someone else still wakes one (and
/// its next step, when it wrote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_own_writes_wake_no_reconcile_and_other_changes_do() {
    let ns = TestNamespace::new("echo").await;
    create_everything_secrets(&ns).await;
    let operator = ns.start_operator().await;
    let mark = ns.plane.audit_mark().expect("an audit mark");
    ns.create_memcached("echo", everything_spec()).await;
    assert_eq!(converged(&ns, "echo").await.len(), 6);
    ns.wait_status("echo", |s| s["conditions"].is_array()).await;
    assert_eq!(settled(&operator).await, 2, "seven writes: the reconcile, and its next step");
    assert_eq!(operator.metric("wasm_operator_reconcile_steps_total", "outcome=\"continued\""), 1);
    assert_eq!(operator.reconciles("error"), 0);
    let writes: Vec<_> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() != Some("events")).collect();
    assert_eq!(writes.len(), 7, "six children and the status, and nothing at the next step: {:?}", described(&writes));

    let mark = ns.plane.audit_mark().expect("an audit mark");
    let labelled = json!({"metadata": {"labels": {"edited-by": "someone-else"}}});
    let services = ns.api(&resource_of("Service"));
    services.patch("echo", &PatchParams::default(), &Patch::Merge(&labelled)).await.expect("labelling the Service");
    eventually("a reconcile for the edited Service", || async { (operator.reconciles("success") >= 3).then_some(()) })
        .await;
    // The Memcached module sets the Service's labels whole (as the Go
    // operator does), so it takes the label back: one update, then the
    // next step, which writes nothing.
    let reconciles = settled(&operator).await;
    let writes: Vec<_> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() != Some("events")).collect();
    assert_eq!(described(&writes), ["update services echo"]);
    assert_eq!(reconciles, 4, "one edit: a reconcile, and its next step");
}

/// One row of the runtime-behaviour tables: a spec, which optional kinds
/// must exist, and a check of the live objects.
struct Row {
    what: &'static str,
    spec: Value,
    optional: [bool; 4],
    check: fn(&BTreeMap<&'static str, DynamicObject>),
}

fn minimal() -> Value {
    json!({"replicas": 3})
}

fn with(mut base: Value, pointer: &str, value: Value) -> Value {
    let mut target = &mut base;
    for segment in pointer.trim_start_matches('/').split('/') {
        target = &mut target[segment];
    }
    *target = value;
    base
}

fn rows() -> Vec<Row> {
    let pdb = |min: i64| {
        with(minimal(), "/highAvailability", json!({"podDisruptionBudget": {"enabled": true, "minAvailable": min}}))
    };
    let hpa = |max: i64| {
        let autoscaled =
            with(minimal(), "/autoscaling", json!({"enabled": true, "minReplicas": 2, "maxReplicas": max}));
        // The default metric is CPU utilization, which needs a CPU request.
        with(with(autoscaled, "/replicas", Value::Null), "/resources", json!({"requests": {"cpu": "100m"}}))
    };
    let monitoring = |interval: &str| {
        with(
            minimal(),
            "/monitoring",
            json!({"enabled": true, "serviceMonitor": {"interval": interval, "additionalLabels": {"release": "prom", "app.kubernetes.io/name": "mine"}}}),
        )
    };
    let network_policy = |namespace: &str| {
        with(
            minimal(),
            "/security",
            json!({"networkPolicy": {"enabled": true, "allowedSources": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}]}}),
        )
    };
    let tls = with(minimal(), "/security", json!({"tls": {"enabled": true, "certificateSecretRef": {"name": "tls"}}}));
    let annotated = |annotations: Value| with(minimal(), "/service", json!({"annotations": annotations}));
    vec![
        Row {
            what: "minimal",
            spec: minimal(),
            optional: [false; 4],
            check: |live| {
                assert_eq!(container_names(&live["Deployment"]), ["memcached"]);
                assert_eq!(port_names(&live["Service"], "/spec/ports"), ["memcached"]);
                assert_eq!(live["Deployment"].data["spec"]["replicas"], 3);
            },
        },
        Row {
            what: "enable the PDB",
            spec: pdb(1),
            optional: [true, false, false, false],
            check: |live| {
                assert_eq!(live["PodDisruptionBudget"].data["spec"]["minAvailable"], 1);
            },
        },
        Row {
            what: "change the PDB",
            spec: pdb(2).clone(),
            optional: [true, false, false, false],
            check: |live| {
                assert_eq!(live["PodDisruptionBudget"].data["spec"]["minAvailable"], 2);
            },
        },
        Row { what: "disable the PDB", spec: minimal(), optional: [false; 4], check: |_| {} },
        Row { what: "re-enable the PDB", spec: pdb(1), optional: [true, false, false, false], check: |_| {} },
        Row {
            what: "enable the HPA",
            spec: hpa(5),
            optional: [false, true, false, false],
            check: |live| {
                assert_eq!(live["HorizontalPodAutoscaler"].data["spec"]["maxReplicas"], 5);
                assert_eq!(live["HorizontalPodAutoscaler"].data["spec"]["scaleTargetRef"]["kind"], "Deployment");
            },
        },
        Row {
            what: "change the HPA",
            spec: hpa(9),
            optional: [false, true, false, false],
            check: |live| {
                assert_eq!(live["HorizontalPodAutoscaler"].data["spec"]["maxReplicas"], 9);
            },
        },
        Row { what: "disable the HPA", spec: minimal(), optional: [false; 4], check: |_| {} },
        Row { what: "re-enable the HPA", spec: hpa(5), optional: [false, true, false, false], check: |_| {} },
        Row {
            what: "enable monitoring",
            spec: monitoring("30s"),
            optional: [false, false, true, false],
            check: |live| {
                assert_eq!(container_names(&live["Deployment"]), ["memcached", "exporter"]);
                assert_eq!(port_names(&live["Service"], "/spec/ports"), ["memcached", "metrics"]);
                let labels = &live["ServiceMonitor"].metadata.labels;
                let labels = labels.as_ref().expect("labels");
                assert_eq!(labels.get("release").map(String::as_str), Some("prom"));
                assert_eq!(
                    labels.get("app.kubernetes.io/name").map(String::as_str),
                    Some("memcached"),
                    "the standard label wins"
                );
                assert_eq!(live["ServiceMonitor"].data["spec"]["endpoints"][0]["interval"], "30s");
            },
        },
        Row {
            what: "change the ServiceMonitor",
            spec: monitoring("10s"),
            optional: [false, false, true, false],
            check: |live| {
                assert_eq!(live["ServiceMonitor"].data["spec"]["endpoints"][0]["interval"], "10s");
            },
        },
        Row {
            what: "disable monitoring",
            spec: minimal(),
            optional: [false; 4],
            check: |live| {
                assert_eq!(container_names(&live["Deployment"]), ["memcached"]);
                assert_eq!(port_names(&live["Service"], "/spec/ports"), ["memcached"]);
            },
        },
        Row {
            what: "re-enable monitoring",
            spec: monitoring("30s"),
            optional: [false, false, true, false],
            check: |_| {},
        },
        Row {
            what: "enable the NetworkPolicy",
            spec: network_policy("web"),
            optional: [false, false, false, true],
            check: |live| {
                let from = &live["NetworkPolicy"].data["spec"]["ingress"][0]["from"][0];
                assert_eq!(from["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], "web");
            },
        },
        Row {
            what: "change the NetworkPolicy",
            spec: network_policy("api"),
            optional: [false, false, false, true],
            check: |live| {
                let from = &live["NetworkPolicy"].data["spec"]["ingress"][0]["from"][0];
                assert_eq!(from["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], "api");
            },
        },
        Row { what: "disable the NetworkPolicy", spec: minimal(), optional: [false; 4], check: |_| {} },
        Row {
            what: "re-enable the NetworkPolicy",
            spec: network_policy("web"),
            optional: [false, false, false, true],
            check: |_| {},
        },
        Row {
            what: "TLS on: the TLS port appears",
            spec: tls.clone(),
            optional: [false; 4],
            check: |live| {
                assert_eq!(port_names(&live["Service"], "/spec/ports"), ["memcached", "memcached-tls"]);
            },
        },
        Row {
            what: "TLS off: the TLS port goes",
            spec: minimal(),
            optional: [false; 4],
            check: |live| {
                assert_eq!(port_names(&live["Service"], "/spec/ports"), ["memcached"]);
            },
        },
        Row {
            what: "service annotations",
            spec: annotated(json!({"a": "1"})),
            optional: [false; 4],
            check: |live| {
                assert_eq!(live["Service"].metadata.annotations.as_ref().map(|a| a.len()), Some(1));
                assert_eq!(live["Service"].annotations().get("a").map(String::as_str), Some("1"));
            },
        },
        Row {
            what: "service annotations replaced wholesale",
            spec: annotated(json!({"b": "2"})),
            optional: [false; 4],
            check: |live| {
                let annotations = live["Service"].annotations();
                assert_eq!(annotations.keys().collect::<Vec<_>>(), ["b"]);
            },
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feature_can_be_enabled_changed_disabled_and_re_enabled() {
    let ns = TestNamespace::new("rows").await;
    ns.create_secret("tls", json!({"tls.crt": "crt", "tls.key": "key"})).await;
    let cr = ns.create_memcached("rows", minimal()).await;
    let _operator = ns.start_operator().await;
    let optional = ["PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"];
    for row in rows() {
        ns.set_spec("rows", row.spec.clone()).await;
        let live = converged(&ns, "rows").await;
        for (kind, wanted) in optional.iter().zip(row.optional) {
            assert_eq!(live.contains_key(kind), wanted, "{}: {kind}", row.what);
        }
        assert!(live.contains_key("Deployment") && live.contains_key("Service"), "{}", row.what);
        (row.check)(&live);
    }
    // Events about children are written after the reconcile, off its path.
    let deleted = optional.iter().map(|kind| ("Deleted", format!("Deleted {kind} rows")));
    for (reason, note) in deleted.chain([("Updated", "Updated Deployment rows".to_owned())]) {
        let (ns, wanted) = (&ns, &note);
        eventually(&note, || async move { ns.event_notes(reason).await.contains(wanted).then_some(()) }).await;
    }
    assert_eq!(ns.memcacheds().get("rows").await.expect("the CR").uid(), cr.uid());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_drift_is_corrected() {
    let ns = TestNamespace::new("drift").await;
    ns.create_memcached("drift", json!({"replicas": 2, "service": {"annotations": {"mine": "yes"}}})).await;
    let _operator = ns.start_operator().await;
    converged(&ns, "drift").await;

    let deployments = ns.api(&resource_of("Deployment"));
    let drift = json!({"spec": {"replicas": 7, "template": {"spec": {"containers": [{"name": "memcached", "image": "evil:latest"}]}}}});
    deployments.patch("drift", &PatchParams::default(), &Patch::Strategic(&drift)).await.expect("drifting");
    let services = ns.api(&resource_of("Service"));
    let foreign = json!({"metadata": {"annotations": {"someone-else": "x"}}});
    services.patch("drift", &PatchParams::default(), &Patch::Merge(&foreign)).await.expect("annotating");

    let live = converged(&ns, "drift").await;
    assert_eq!(live["Deployment"].data["spec"]["replicas"], 2);
    let image = &live["Deployment"].data["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_ne!(image, "evil:latest");
    assert_eq!(live["Service"].annotations().keys().collect::<Vec<_>>(), ["mine"], "annotations are ours alone");

    // Deleted by someone: created again.
    services.delete("drift", &DeleteParams::default()).await.expect("deleting the Service");
    let recreated = ns.wait_for("Service", "drift").await;
    assert_ne!(recreated.uid(), live["Service"].uid());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_status_drives_every_condition_and_the_server_list() {
    let ns = TestNamespace::new("status").await;
    ns.create_memcached("cache", json!({"replicas": 3})).await;
    let _operator = ns.start_operator().await;
    converged(&ns, "cache").await;
    let deployments = ns.api(&resource_of("Deployment"));
    let status_of = |s: &Value, t: &str| {
        (
            condition(s, t)["status"].as_str().unwrap_or("").to_owned(),
            condition(s, t)["reason"].as_str().unwrap_or("").to_owned(),
        )
    };

    // No pods yet (there is no kubelet here: the test plays it).
    let status = ns.wait_status("cache", |s| s["conditions"].is_array()).await;
    assert_eq!(status_of(&status, "Available"), ("False".into(), "Unavailable".into()));
    assert_eq!(status_of(&status, "Ready"), ("False".into(), "MemcachedNotReady".into()));
    let first_transition = condition(&status, "Available")["lastTransitionTime"].clone();
    // Condition times have second precision: let one pass.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    let set = |replicas: i64, ready: i64, updated: i64| json!({"status": {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated, "availableReplicas": ready}});
    deployments.patch_status("cache", &PatchParams::default(), &Patch::Merge(&set(3, 1, 3))).await.expect("status");
    let status = ns.wait_status("cache", |s| s["readyReplicas"] == 1).await;
    assert_eq!(status_of(&status, "Available"), ("True".into(), "Available".into()));
    assert_eq!(status_of(&status, "Degraded"), ("True".into(), "Degraded".into()));
    assert_eq!(status_of(&status, "Progressing"), ("False".into(), "ProgressingComplete".into()));
    assert_eq!(status["serverList"].as_array().map(Vec::len).unwrap_or(0), 0, "not Ready yet: {status}");
    assert_ne!(condition(&status, "Available")["lastTransitionTime"], first_transition);

    deployments.patch_status("cache", &PatchParams::default(), &Patch::Merge(&set(3, 3, 3))).await.expect("status");
    let status = ns.wait_status("cache", |s| s["readyReplicas"] == 3).await;
    assert_eq!(status_of(&status, "Ready"), ("True".into(), "MemcachedReady".into()));
    assert_eq!(status_of(&status, "Degraded"), ("False".into(), "NotDegraded".into()));
    assert_eq!(status["serverList"], json!([format!("cache.{}:11211", ns.namespace)]));
    let available_since = condition(&status, "Available")["lastTransitionTime"].clone();

    // A rollout: fewer updated replicas than desired.
    deployments.patch_status("cache", &PatchParams::default(), &Patch::Merge(&set(3, 3, 1))).await.expect("status");
    let status = ns.wait_status("cache", |s| condition(s, "Progressing")["status"] == "True").await;
    assert_eq!(
        condition(&status, "Available")["lastTransitionTime"],
        available_since,
        "unchanged status keeps its time"
    );

    // A new generation is observed.
    let cr = ns.set_spec("cache", json!({"replicas": 4})).await;
    let status = ns.wait_status("cache", |_| true).await;
    assert_eq!(status["observedGeneration"], json!(cr.metadata.generation.expect("a generation")));
    assert_eq!(condition(&status, "Ready")["observedGeneration"], status["observedGeneration"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn referenced_secrets_feed_the_pod_template_and_the_degraded_condition() {
    let ns = TestNamespace::new("secrets").await;
    let spec = json!({"security": {"sasl": {"enabled": true, "credentialsSecretRef": {"name": "sasl"}}}});
    ns.create_memcached("cache", spec).await;
    let _operator = ns.start_operator().await;

    let status = ns.wait_status("cache", |s| condition(s, "Degraded")["reason"] == "SecretNotFound").await;
    assert!(condition(&status, "Degraded")["message"].as_str().is_some_and(|m| m.contains("sasl")), "{status}");
    let hash_of = |d: &DynamicObject| d.data["spec"]["template"]["metadata"]["annotations"].clone();
    let without_secret = hash_of(&ns.wait_for("Deployment", "cache").await);

    // The Secret appears: the Secret watch wakes the CR.
    ns.create_secret("sasl", json!({"memcached-sasl-db": "user:one"})).await;
    ns.wait_status("cache", |s| condition(s, "Degraded")["reason"] != "SecretNotFound").await;
    let live = converged(&ns, "cache").await;
    let with_secret = hash_of(&live["Deployment"]);
    assert_ne!(with_secret, without_secret, "the secret hash follows the Secret");

    // Its data changes: a new hash, so pods restart with the new credentials.
    let secrets = ns.api(&secret_resource());
    let change = json!({"stringData": {"memcached-sasl-db": "user:two"}});
    secrets.patch("sasl", &PatchParams::default(), &Patch::Merge(&change)).await.expect("changing the Secret");
    eventually("a new pod-template hash", || async {
        let deployment = ns.get(&resource_of("Deployment"), "cache").await?;
        (hash_of(&deployment) != with_secret).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_cr_garbage_collects_every_owned_object() {
    let ns = TestNamespace::new("gc").await;
    create_everything_secrets(&ns).await;
    ns.create_memcached("full-cache", everything_spec()).await;
    let _operator = ns.start_operator().await;
    assert_eq!(converged(&ns, "full-cache").await.len(), 6);
    ns.memcacheds().delete("full-cache", &DeleteParams::foreground()).await.expect("deleting the CR");
    for (kind, _) in owned_kinds() {
        ns.wait_gone(kind, "full-cache").await;
    }
    ns.wait_gone_memcached("full-cache").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_that_are_not_ours_are_never_deleted_nor_taken_over() {
    let ns = TestNamespace::new("foreign").await;
    // Someone else's PDB and NetworkPolicy carry the names ours would have;
    // both features are off, so ours must not exist.
    let foreign_pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "cache"},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "other"}}}});
    let pdbs = ns.api(&resource_of("PodDisruptionBudget"));
    let foreign_pdb: DynamicObject = serde_json::from_value(foreign_pdb).expect("a PDB");
    let foreign_pdb = pdbs.create(&PostParams::default(), &foreign_pdb).await.expect("creating a foreign PDB");
    // And a ConfigMap-controlled Service where ours would go.
    let owner = ns.api(&gvk("", "v1", "ConfigMap", "configmaps"));
    let owner_cm: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}))
            .expect("cm");
    let owner_cm = owner.create(&PostParams::default(), &owner_cm).await.expect("creating the other owner");
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cache", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_cm.uid(), "controller": true}]},
        "spec": {"ports": [{"port": 1}], "selector": {"app": "other"}}});
    let services = ns.api(&resource_of("Service"));
    let foreign_service = services
        .create(&PostParams::default(), &serde_json::from_value(service).expect("a Service"))
        .await
        .expect("creating a foreign Service");

    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let operator = ns.start_operator().await;
    let status = ns.wait_status("cache", |s| condition(s, "Degraded")["reason"] == "ReconcileFailed").await;
    let message = condition(&status, "Degraded")["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("Service"), "the failure names the Service: {message}");
    eventually("a ReconcileFailed warning", || async {
        (!ns.event_notes("ReconcileFailed").await.is_empty()).then_some(())
    })
    .await;
    assert!(operator.reconciles("error") >= 1);

    let pdb = pdbs.get("cache").await.expect("the foreign PDB is still there");
    assert_eq!(pdb.uid(), foreign_pdb.uid());
    assert_eq!(pdb.resource_version(), foreign_pdb.resource_version(), "not even touched");
    let service = services.get("cache").await.expect("the foreign Service is still there");
    assert_eq!(service.resource_version(), foreign_service.resource_version(), "not taken over");
    assert_eq!(controller_uid(&service), owner_cm.uid());
    ns.wait_for("Deployment", "cache").await;
}

/// A stop that comes as soon as the operator serves, often before its first
/// list of the parents is complete (a rolling update that replaces a pod
/// just started), stops it in time: kube-runtime's graceful shutdown alone
/// waited for that list for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_stopped_as_soon_as_it_serves_stops_in_time() {
    let ns = TestNamespace::new("quick-stop").await;
    for i in 0..3 {
        ns.create_memcached(&format!("cache-{i}"), json!({})).await;
    }
    for round in 0..5 {
        let operator = ns.start_operator().await;
        let deadline = std::time::Instant::now() + WAIT;
        while operator.metric("wasm_operator_module_info", "") == 0 {
            assert!(std::time::Instant::now() < deadline, "round {round}: the module never served");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        operator.stop().await.unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
}
