//! The CR's status (SPEC "Status").

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use memcached_logic::MemcachedStatus;
use memcached_logic::status::{Observed, compute_status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const NOW: &str = "2024-06-01T12:00:00Z";
const EARLIER: &str = "2024-01-01T00:00:00Z";

fn time(text: &str) -> Time {
    from_value(json!(text))
}

/// A Deployment with this status (`replicas`, `updatedReplicas`, `readyReplicas`).
fn deployment_with(status: Value) -> Deployment {
    from_value(
        json!({ "metadata": { "name": "my-cache", "namespace": "default" }, "spec": { "selector": {}, "template": {} }, "status": status }),
    )
}

fn status_for(cr: &Value, deployment: Option<&Deployment>, missing: &[&str]) -> MemcachedStatus {
    let memcached = memcached(cr.clone());
    compute_status(
        &memcached,
        &Observed { deployment, missing_secrets: missing.to_vec(), problem: None, now: time(NOW) },
    )
}

fn condition<'a>(status: &'a MemcachedStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_} condition"))
}

/// (status, reason) of each condition, in the order Available, Progressing, Degraded, Ready.
fn summary(status: &MemcachedStatus) -> [(String, String); 4] {
    ["Available", "Progressing", "Degraded", "Ready"].map(|t| {
        let c = condition(status, t);
        (c.status.clone(), c.reason.clone())
    })
}

fn expect(rows: [(&str, &str); 4]) -> [(String, String); 4] {
    rows.map(|(s, r)| (s.to_owned(), r.to_owned()))
}

fn autoscaling_spec() -> Value {
    json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 8 } })
}

/// (row, spec, Deployment status (None: no Deployment, null: no status),
/// missing Secrets, expected (status, reason) per condition, ready, desired)
type ConditionCase =
    (&'static str, Value, Option<Value>, Vec<&'static str>, [(&'static str, &'static str); 4], i32, i32);

/// Every branch of every condition.
#[test]
fn conditions_follow_the_spec_rules() {
    let cases: Vec<ConditionCase> = vec![
        (
            "no Deployment yet",
            json!({}),
            None,
            vec![],
            [("False", "Unavailable"), ("True", "Progressing"), ("True", "Degraded"), ("False", "MemcachedNotReady")],
            0,
            1,
        ),
        (
            "Deployment without status",
            json!({ "replicas": 2 }),
            Some(Value::Null),
            vec![],
            [("False", "Unavailable"), ("True", "Progressing"), ("True", "Degraded"), ("False", "MemcachedNotReady")],
            0,
            2,
        ),
        (
            "all ready",
            json!({ "replicas": 3 }),
            Some(json!({ "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3 })),
            vec![],
            [
                ("True", "Available"),
                ("False", "ProgressingComplete"),
                ("False", "NotDegraded"),
                ("True", "MemcachedReady"),
            ],
            3,
            3,
        ),
        (
            "default replicas, ready",
            json!({}),
            Some(json!({ "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1 })),
            vec![],
            [
                ("True", "Available"),
                ("False", "ProgressingComplete"),
                ("False", "NotDegraded"),
                ("True", "MemcachedReady"),
            ],
            1,
            1,
        ),
        (
            "some ready",
            json!({ "replicas": 3 }),
            Some(json!({ "replicas": 3, "updatedReplicas": 3, "readyReplicas": 1 })),
            vec![],
            [
                ("True", "Available"),
                ("False", "ProgressingComplete"),
                ("True", "Degraded"),
                ("False", "MemcachedNotReady"),
            ],
            1,
            3,
        ),
        (
            "none ready",
            json!({ "replicas": 3 }),
            Some(json!({ "replicas": 3, "updatedReplicas": 3 })),
            vec![],
            [
                ("False", "Unavailable"),
                ("False", "ProgressingComplete"),
                ("True", "Degraded"),
                ("False", "MemcachedNotReady"),
            ],
            0,
            3,
        ),
        (
            "rolling: updated < desired",
            json!({ "replicas": 3 }),
            Some(json!({ "replicas": 3, "updatedReplicas": 1, "readyReplicas": 3 })),
            vec![],
            [("True", "Available"), ("True", "Progressing"), ("False", "NotDegraded"), ("True", "MemcachedReady")],
            3,
            3,
        ),
        (
            "rolling: total != desired (surge)",
            json!({ "replicas": 3 }),
            Some(json!({ "replicas": 4, "updatedReplicas": 3, "readyReplicas": 3 })),
            vec![],
            [("True", "Available"), ("True", "Progressing"), ("False", "NotDegraded"), ("True", "MemcachedReady")],
            3,
            3,
        ),
        (
            "scaled to zero",
            json!({ "replicas": 0 }),
            Some(json!({})),
            vec![],
            [
                ("False", "Unavailable"),
                ("False", "ProgressingComplete"),
                ("False", "NotDegraded"),
                ("False", "MemcachedNotReady"),
            ],
            0,
            0,
        ),
        (
            "missing Secret although all are ready",
            json!({ "replicas": 2, "security": { "sasl": { "enabled": true, "credentialsSecretRef": { "name": "sasl" } } } }),
            Some(json!({ "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2 })),
            vec!["sasl"],
            [
                ("True", "Available"),
                ("False", "ProgressingComplete"),
                ("True", "SecretNotFound"),
                ("True", "MemcachedReady"),
            ],
            2,
            2,
        ),
        (
            "missing Secret and none ready",
            json!({ "replicas": 2 }),
            None,
            vec!["a", "b"],
            [
                ("False", "Unavailable"),
                ("True", "Progressing"),
                ("True", "SecretNotFound"),
                ("False", "MemcachedNotReady"),
            ],
            0,
            2,
        ),
        (
            "autoscaling: desired is the Deployment's status.replicas",
            autoscaling_spec(),
            Some(json!({ "replicas": 4, "updatedReplicas": 4, "readyReplicas": 4 })),
            vec![],
            [
                ("True", "Available"),
                ("False", "ProgressingComplete"),
                ("False", "NotDegraded"),
                ("True", "MemcachedReady"),
            ],
            4,
            4,
        ),
        (
            "autoscaling: partly ready",
            autoscaling_spec(),
            Some(json!({ "replicas": 4, "updatedReplicas": 4, "readyReplicas": 2 })),
            vec![],
            [
                ("True", "Available"),
                ("False", "ProgressingComplete"),
                ("True", "Degraded"),
                ("False", "MemcachedNotReady"),
            ],
            2,
            4,
        ),
        (
            "autoscaling: no Deployment",
            autoscaling_spec(),
            None,
            vec![],
            [
                ("False", "Unavailable"),
                ("True", "Progressing"),
                ("False", "NotDegraded"),
                ("False", "MemcachedNotReady"),
            ],
            0,
            0,
        ),
    ];
    for (row, spec, deployment_status, missing, want, ready, desired) in cases {
        let deployment = deployment_status.map(|s| {
            if s.is_null() { from_value(json!({ "metadata": { "name": "my-cache" } })) } else { deployment_with(s) }
        });
        let status = status_for(&cr_value(spec), deployment.as_ref(), &missing);
        assert_eq!(summary(&status), expect(want), "{row}");
        assert_eq!(status.ready_replicas, ready, "{row}: readyReplicas");
        assert_eq!(
            condition(&status, "Available").message,
            format!("{ready}/{desired} replicas are ready"),
            "{row}: Available message"
        );
        let is_ready = want[3].0 == "True";
        let servers: Vec<String> = if is_ready { vec!["my-cache.default:11211".into()] } else { vec![] };
        assert_eq!(status.server_list, servers, "{row}: serverList only when Ready");
        for c in &status.conditions {
            assert_eq!(c.last_transition_time, time(NOW), "{row}: a new condition starts now");
        }
    }
}

#[test]
fn secret_not_found_names_every_missing_secret() {
    let status = status_for(&cr_value(json!({})), None, &["memcached-sasl", "memcached-tls"]);
    let degraded = condition(&status, "Degraded");
    assert_eq!(degraded.reason, "SecretNotFound");
    assert!(degraded.message.contains("memcached-sasl"), "{}", degraded.message);
    assert!(degraded.message.contains("memcached-tls"), "{}", degraded.message);
}

#[test]
fn missing_secrets_are_found_by_the_status_export() {
    let cr = cr_value(json!({
        "replicas": 1,
        "security": {
            "sasl": { "enabled": true, "credentialsSecretRef": { "name": "sasl-creds" } },
            "tls": { "enabled": true, "certificateSecretRef": { "name": "tls-certs" } },
        },
    }));
    let deployment = text(&merge(
        to_value(&deployment_with(json!({ "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1 }))),
        json!({ "apiVersion": "apps/v1", "kind": "Deployment" }),
    ));
    let cases = [
        ("both exist", vec![secret_json("sasl-creds", &[]), secret_json("tls-certs", &[])], vec![]),
        ("tls missing", vec![secret_json("sasl-creds", &[])], vec!["tls-certs"]),
        ("both missing, unrelated present", vec![secret_json("other", &[])], vec!["sasl-creds", "tls-certs"]),
    ];
    for (row, related, missing) in cases {
        let answer =
            memcached_logic::exports::status(&text(&cr), std::slice::from_ref(&deployment), &related, NOW, None)
                .unwrap();
        let status: MemcachedStatus = serde_json::from_str(&answer).unwrap();
        let degraded = condition(&status, "Degraded");
        if missing.is_empty() {
            assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("False", "NotDegraded"), "{row}");
        } else {
            assert_eq!((degraded.status.as_str(), degraded.reason.as_str()), ("True", "SecretNotFound"), "{row}");
            for name in ["sasl-creds", "tls-certs"] {
                assert_eq!(
                    degraded.message.contains(name),
                    missing.contains(&name),
                    "{row}: {name} in {}",
                    degraded.message
                );
            }
        }
        assert_eq!(status.ready_replicas, 1, "{row}: the owned Deployment was read");
    }
}

#[test]
fn the_status_export_reads_only_this_crs_deployment() {
    let cr = cr_value(json!({ "replicas": 1 }));
    let ours = merge(
        to_value(&deployment_with(json!({ "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1 }))),
        json!({ "apiVersion": "apps/v1", "kind": "Deployment" }),
    );
    let other = merge(ours.clone(), json!({ "metadata": { "name": "someone-else" } }));
    let service = json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "my-cache" } });
    let status = |owned: &[Value]| -> MemcachedStatus {
        let owned: Vec<String> = owned.iter().map(text).collect();
        serde_json::from_str(&memcached_logic::exports::status(&text(&cr), &owned, &[], NOW, None).unwrap()).unwrap()
    };
    assert_eq!(status(&[service.clone(), ours]).ready_replicas, 1);
    assert_eq!(status(&[service, other]).ready_replicas, 0);
}

/// The status reads a Deployment's `status` alone and a Secret's name
/// alone: what else they hold is skipped, not checked (the API server
/// returned them). A status that is not the Deployment's shape is refused.
#[test]
fn the_status_export_reads_only_what_it_needs_of_owned_and_related_objects() {
    let cr = cr_value(
        json!({ "replicas": 2, "security": { "sasl": { "enabled": true, "credentialsSecretRef": { "name": "sasl-creds" } } } }),
    );
    let deployment = |status: Value| {
        text(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": NAME, "namespace": NAMESPACE },
            // Not a DeploymentSpec: a whole typed read would refuse it.
            "spec": { "replicas": "two", "template": [] },
            "status": status,
        }))
    };
    // Data that is not base64: a whole typed Secret would refuse it.
    let secret = text(
        &json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "sasl-creds" }, "data": { "password-file": "!" } }),
    );
    let status = |owned: String| {
        memcached_logic::exports::status(&text(&cr), &[owned], std::slice::from_ref(&secret), NOW, None)
    };
    let answer: MemcachedStatus = serde_json::from_str(
        &status(deployment(json!({ "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1 }))).unwrap(),
    )
    .unwrap();
    assert_eq!(answer.ready_replicas, 1);
    assert_eq!(condition(&answer, "Degraded").reason, "Degraded", "the Secret was found by its name");
    let refused = status(deployment(json!({ "readyReplicas": "one" }))).unwrap_err();
    assert!(refused.to_string().contains("readyReplicas"), "{refused}");
}

#[test]
fn observed_generation_and_condition_generation() {
    for generation in [None, Some(1), Some(42)] {
        let mut cr = cr_value(json!({}));
        if let Some(g) = generation {
            cr["metadata"]["generation"] = json!(g);
        }
        let status = status_for(&cr, None, &[]);
        assert_eq!(status.observed_generation, generation);
        for c in &status.conditions {
            assert_eq!(c.observed_generation, generation, "{}", c.type_);
        }
    }
}

#[test]
fn server_list_uses_the_namespace() {
    let ready = deployment_with(json!({ "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1 }));
    let cases = [
        (json!({ "name": "sessions", "namespace": "prod" }), "sessions.prod:11211"),
        (json!({ "name": "my-cache", "namespace": "default" }), "my-cache.default:11211"),
    ];
    for (metadata, want) in cases {
        let cr = json!({ "apiVersion": API_VERSION, "kind": "Memcached", "metadata": metadata, "spec": {} });
        assert_eq!(status_for(&cr, Some(&ready), &[]).server_list, [want]);
    }
}

/// lastTransitionTime stays while a condition's status is unchanged and
/// moves to now when it flips, condition by condition.
#[test]
fn last_transition_time_moves_only_when_the_status_flips() {
    let previous = |statuses: [&str; 4]| -> Value {
        let conditions: Vec<Value> = ["Available", "Progressing", "Degraded", "Ready"]
            .iter()
            .zip(statuses)
            .map(|(t, s)| json!({ "type": t, "status": s, "reason": "Old", "message": "old", "lastTransitionTime": EARLIER }))
            .collect();
        json!({ "readyReplicas": 0, "conditions": conditions })
    };
    let all_ready = deployment_with(json!({ "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3 }));
    // Now: Available True, Progressing False, Degraded False, Ready True.
    let cases = [
        ("nothing flips", previous(["True", "False", "False", "True"]), [EARLIER, EARLIER, EARLIER, EARLIER]),
        ("everything flips", previous(["False", "True", "True", "False"]), [NOW, NOW, NOW, NOW]),
        ("only Ready flips", previous(["True", "False", "False", "False"]), [EARLIER, EARLIER, EARLIER, NOW]),
        ("Available and Degraded flip", previous(["False", "False", "True", "True"]), [NOW, EARLIER, NOW, EARLIER]),
        ("no previous conditions", json!({ "readyReplicas": 0 }), [NOW, NOW, NOW, NOW]),
    ];
    for (row, previous_status, want) in cases {
        let mut cr = cr_value(json!({ "replicas": 3 }));
        cr["status"] = previous_status;
        let status = status_for(&cr, Some(&all_ready), &[]);
        for (t, want) in ["Available", "Progressing", "Degraded", "Ready"].iter().zip(want) {
            assert_eq!(condition(&status, t).last_transition_time, time(want), "{row}: {t}");
        }
        // Reason and message are current even when the time is kept.
        assert_eq!(condition(&status, "Ready").reason, "MemcachedReady", "{row}");
    }
}

#[test]
fn a_reason_change_without_a_status_change_keeps_the_time() {
    // Degraded stays True, its reason changes from Degraded to SecretNotFound.
    let none_ready = deployment_with(json!({ "replicas": 2, "updatedReplicas": 2 }));
    let mut cr = cr_value(json!({ "replicas": 2 }));
    let first = status_for(&cr, Some(&none_ready), &[]);
    assert_eq!(condition(&first, "Degraded").reason, "Degraded");
    cr["status"] = to_value(&first);
    let later: MemcachedStatus = {
        let memcached = memcached(cr);
        compute_status(
            &memcached,
            &Observed {
                deployment: Some(&none_ready),
                missing_secrets: vec!["x"],
                problem: None,
                now: time("2030-01-01T00:00:00Z"),
            },
        )
    };
    let degraded = condition(&later, "Degraded");
    assert_eq!(degraded.reason, "SecretNotFound");
    assert_eq!(degraded.last_transition_time, time(NOW));
}

/// A status computed from its own output for the same world is identical,
/// so the host writes it only once ("only when it changed").
#[test]
fn recomputing_for_an_unchanged_world_changes_nothing() {
    let ready = deployment_with(json!({ "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2 }));
    let mut cr = cr_value(json!({ "replicas": 2 }));
    cr["metadata"]["generation"] = json!(3);
    let first = status_for(&cr, Some(&ready), &[]);
    cr["status"] = to_value(&first);
    let memcached = memcached(cr);
    let second = compute_status(
        &memcached,
        &Observed {
            deployment: Some(&ready),
            missing_secrets: vec![],
            problem: None,
            now: time("2031-01-01T00:00:00Z"),
        },
    );
    assert_eq!(second, first);
}

#[test]
fn an_invalid_spec_is_reported_as_degraded_by_the_status_export() {
    let cr = cr_value(json!({ "replicas": 65 }));
    let status: MemcachedStatus =
        serde_json::from_str(&memcached_logic::exports::status(&text(&cr), &[], &[], NOW, None).unwrap()).unwrap();
    let degraded = condition(&status, "Degraded");
    assert_eq!(degraded.status, "True");
    assert!(degraded.message.contains("spec.replicas"), "{}", degraded.message);
}

#[test]
fn the_status_serializes_with_the_spec_field_names() {
    let ready = deployment_with(json!({ "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1 }));
    let mut cr = cr_value(json!({}));
    cr["metadata"]["generation"] = json!(2);
    let value = to_value(&status_for(&cr, Some(&ready), &[]));
    assert_subset(
        &value,
        &json!({
            "observedGeneration": 2,
            "readyReplicas": 1,
            "serverList": ["my-cache.default:11211"],
            "conditions": [
                { "type": "Available", "status": "True", "reason": "Available", "message": "1/1 replicas are ready", "lastTransitionTime": NOW, "observedGeneration": 2 },
                { "type": "Progressing", "status": "False", "reason": "ProgressingComplete" },
                { "type": "Degraded", "status": "False", "reason": "NotDegraded" },
                { "type": "Ready", "status": "True", "reason": "MemcachedReady" },
            ],
        }),
    );
}
