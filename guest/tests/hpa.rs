//! The HorizontalPodAutoscaler (SPEC "HorizontalPodAutoscaler", defaults table).

mod common;

use common::*;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use memcached_logic::guards;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// A valid autoscaling spec (the default CPU metric needs a CPU request).
fn autoscaling(settings: Value) -> Value {
    json!({
        "resources": { "requests": { "cpu": "100m" } },
        "autoscaling": merge(json!({ "enabled": true, "maxReplicas": 5 }), settings),
    })
}

fn hpa(spec: Value, current: Option<&Value>) -> Value {
    let memcached = cr(spec);
    build_json(current, |c: Option<HorizontalPodAutoscaler>| build_hpa(&memcached, c))
}

fn cpu_80() -> Value {
    json!([{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 80 } } }])
}

#[test]
fn renders_the_hpa_with_every_default() {
    let got = rendered(&cr_value(autoscaling(json!({}))), "HorizontalPodAutoscaler").expect("rendered");
    assert_subset(
        &got,
        &json!({
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": "my-cache",
                "namespace": "default",
                "labels": standard_labels("my-cache"),
                "ownerReferences": [owner_reference("my-cache")],
            },
            "spec": {
                "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "my-cache" },
                "minReplicas": 1,
                "maxReplicas": 5,
                "metrics": cpu_80(),
                "behavior": { "scaleDown": { "stabilizationWindowSeconds": 300 } },
            },
        }),
    );
}

#[test]
fn scale_target_and_labels_follow_the_cr() {
    let memcached = memcached(json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "sessions", "namespace": "prod" },
        "spec": autoscaling(json!({})),
    }));
    let got = to_value(&build_hpa(&memcached, None));
    assert_eq!(got["metadata"]["name"], "sessions");
    assert_eq!(got["metadata"]["namespace"], "prod");
    assert_eq!(got["metadata"]["labels"], standard_labels("sessions"));
    assert_eq!(
        got["spec"]["scaleTargetRef"],
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "name": "sessions" })
    );
}

#[test]
fn min_and_max_replicas() {
    let cases = [
        (json!({}), 1, 5),
        (json!({ "minReplicas": 2 }), 2, 5),
        (json!({ "minReplicas": 3, "maxReplicas": 3 }), 3, 3),
        (json!({ "minReplicas": 1, "maxReplicas": 64 }), 1, 64),
    ];
    for (settings, min, max) in cases {
        let got = hpa(autoscaling(settings.clone()), None);
        assert_eq!(got["spec"]["minReplicas"], min, "{settings}");
        assert_eq!(got["spec"]["maxReplicas"], max, "{settings}");
    }
}

#[test]
fn metrics_default_to_cpu_80_percent_and_are_otherwise_taken_as_given() {
    let memory = json!([{ "type": "Resource", "resource": { "name": "memory", "target": { "type": "AverageValue", "averageValue": "100Mi" } } }]);
    let two = json!([
        { "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 60 } } },
        { "type": "Pods", "pods": { "metric": { "name": "connections" }, "target": { "type": "AverageValue", "averageValue": "100" } } },
    ]);
    let cases = [
        ("omitted", json!({}), cpu_80()),
        ("empty", json!({ "metrics": [] }), cpu_80()),
        ("memory", json!({ "metrics": memory.clone() }), memory),
        ("two, in order", json!({ "metrics": two.clone() }), two),
    ];
    for (row, settings, want) in cases {
        assert_eq!(hpa(autoscaling(settings), None)["spec"]["metrics"], want, "{row}");
    }
}

#[test]
fn behavior_defaults_to_a_300_second_scale_down_stabilization() {
    // (row, behavior, scaleDown window, scaleUp window); None: not asserted.
    let cases = [
        ("omitted", json!({}), Some(json!(300)), None),
        (
            "scaleDown given",
            json!({ "behavior": { "scaleDown": { "stabilizationWindowSeconds": 60 } } }),
            Some(json!(60)),
            None,
        ),
        (
            "scaleUp only",
            json!({ "behavior": { "scaleUp": { "stabilizationWindowSeconds": 30 } } }),
            None,
            Some(json!(30)),
        ),
    ];
    for (row, settings, scale_down, scale_up) in cases {
        let got = hpa(autoscaling(settings), None);
        if let Some(want) = scale_down {
            assert_eq!(at(&got, "/spec/behavior/scaleDown/stabilizationWindowSeconds"), &want, "{row}: scaleDown");
        }
        if let Some(want) = scale_up {
            assert_eq!(at(&got, "/spec/behavior/scaleUp/stabilizationWindowSeconds"), &want, "{row}: scaleUp");
        }
    }
    // Given policies are kept as given.
    let policies = json!([{ "type": "Pods", "value": 1, "periodSeconds": 60 }]);
    let got = hpa(
        autoscaling(json!({ "behavior": { "scaleDown": { "policies": policies.clone(), "selectPolicy": "Min" } } })),
        None,
    );
    assert_eq!(got["spec"]["behavior"]["scaleDown"]["policies"], policies);
    assert_eq!(got["spec"]["behavior"]["scaleDown"]["selectPolicy"], "Min");
}

#[test]
fn guard_follows_autoscaling_enabled() {
    let cases = [
        ("autoscaling nil", json!({}), false),
        ("enabled omitted", json!({ "autoscaling": { "maxReplicas": 3 } }), false),
        ("enabled false", json!({ "replicas": 2, "autoscaling": { "enabled": false, "maxReplicas": 3 } }), false),
        ("enabled true", autoscaling(json!({})), true),
    ];
    for (row, spec, want) in cases {
        let cr = cr_value(spec);
        assert_eq!(guards::hpa_enabled(&memcached(cr.clone())), want, "{row}: guard");
        assert_eq!(memcached_logic::exports::hpa_enabled(&text(&cr)).unwrap(), want, "{row}: export");
        assert_eq!(desired("HorizontalPodAutoscaler", &cr, None, &[]).is_some(), want, "{row}: desired");
        assert_eq!(rendered_kinds(&cr).contains(&"HorizontalPodAutoscaler".to_owned()), want, "{row}: render");
    }
}

#[test]
fn disabling_makes_the_hpa_unwanted() {
    let on = cr_value(autoscaling(json!({})));
    let current = desired("HorizontalPodAutoscaler", &on, None, &[]).expect("wanted");
    assert_eq!(current["metadata"]["ownerReferences"], json!([owner_reference("my-cache")]));
    let off = merge(on, json!({ "spec": { "autoscaling": { "enabled": false } } }));
    assert_eq!(desired("HorizontalPodAutoscaler", &off, Some(&current), &[]), None);
}

#[test]
fn changing_the_spec_updates_an_existing_hpa() {
    let current = hpa(autoscaling(json!({})), None);
    let cases = [
        ("maxReplicas", json!({ "maxReplicas": 9 }), "/spec/maxReplicas", json!(9)),
        ("minReplicas", json!({ "minReplicas": 2 }), "/spec/minReplicas", json!(2)),
        (
            "metrics",
            json!({ "metrics": [{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 50 } } }] }),
            "/spec/metrics/0/resource/target/averageUtilization",
            json!(50),
        ),
        (
            "behavior",
            json!({ "behavior": { "scaleDown": { "stabilizationWindowSeconds": 10 } } }),
            "/spec/behavior/scaleDown/stabilizationWindowSeconds",
            json!(10),
        ),
    ];
    for (row, settings, pointer, want) in cases {
        let updated = hpa(autoscaling(settings.clone()), Some(&current));
        assert_eq!(at(&updated, pointer), &want, "{row}");
        assert_eq!(updated, hpa(autoscaling(settings), None), "{row}: same as a new HPA");
    }
}

#[test]
fn reconciling_twice_with_the_same_spec_changes_nothing() {
    for settings in [
        json!({}),
        json!({ "minReplicas": 2, "behavior": { "scaleUp": { "policies": [{ "type": "Pods", "value": 2, "periodSeconds": 30 }] } } }),
    ] {
        let memcached = cr(autoscaling(settings));
        assert_idempotent(|c| build_hpa(&memcached, c));
    }
}

#[test]
fn external_drift_is_corrected() {
    let spec = autoscaling(json!({ "minReplicas": 2 }));
    let want = hpa(spec.clone(), None);
    for (row, drift) in [
        ("maxReplicas", json!({ "spec": { "maxReplicas": 50 } })),
        ("minReplicas", json!({ "spec": { "minReplicas": 1 } })),
        ("scaleTargetRef", json!({ "spec": { "scaleTargetRef": { "name": "other" } } })),
        ("metrics", json!({ "spec": { "metrics": [] } })),
        ("behavior", json!({ "spec": { "behavior": { "scaleDown": { "stabilizationWindowSeconds": 0 } } } })),
        ("labels", json!({ "metadata": { "labels": { "app.kubernetes.io/name": "x" } } })),
    ] {
        let drifted = merge(want.clone(), drift);
        assert_ne!(drifted, want, "{row}");
        assert_eq!(hpa(spec.clone(), Some(&drifted)), want, "{row}");
    }
}

/// An HPA as the server returns it: status and metadata survive, the
/// server's completed behavior and canonical quantity spelling cause no change.
#[test]
fn server_filled_fields_survive_and_the_result_is_a_fixed_point() {
    let metric = |value: &str| json!([{ "type": "Pods", "pods": { "metric": { "name": "connections" }, "target": { "type": "AverageValue", "averageValue": value } } }]);
    let spec = autoscaling(json!({ "metrics": metric("1000m") }));
    let server = merge(
        hpa(spec.clone(), None),
        json!({
            "metadata": { "uid": "u", "resourceVersion": "8", "creationTimestamp": "2024-01-01T00:00:00Z" },
            "spec": { "metrics": metric("1") },
            "status": { "currentReplicas": 2, "desiredReplicas": 2, "lastScaleTime": "2024-01-01T00:00:00Z" },
        }),
    );
    let built = hpa(spec.clone(), Some(&server));
    assert_eq!(built, server, "an equal quantity in the server's spelling is kept");
    assert_eq!(hpa(spec, Some(&built)), built);

    // A different amount is not mistaken for a respelling.
    let changed = hpa(autoscaling(json!({ "metrics": metric("2") })), Some(&server));
    assert_eq!(changed["spec"]["metrics"], metric("2"));
}
