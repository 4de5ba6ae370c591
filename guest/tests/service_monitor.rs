//! The Prometheus ServiceMonitor (seed 001).

mod common;

use common::*;
use memcached_logic::guards;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn monitor(spec: Value, current: Option<Value>) -> Value {
    build_service_monitor(&cr(spec), current)
}

fn with_service_monitor(service_monitor: Value) -> Value {
    json!({ "replicas": 3, "monitoring": { "enabled": true, "serviceMonitor": service_monitor } })
}

fn seed_default_monitor() -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": "my-cache",
            "namespace": "default",
            "labels": standard_labels("my-cache"),
            "ownerReferences": [owner_reference("my-cache")],
        },
        "spec": {
            "selector": { "matchLabels": standard_labels("my-cache") },
            "namespaceSelector": { "matchNames": ["default"] },
            "endpoints": [{ "port": "metrics", "interval": "30s", "scrapeTimeout": "10s" }],
        },
    })
}

#[test]
fn seed_service_monitor_with_defaults() {
    let got = rendered(&cr_value(with_service_monitor(json!({}))), "ServiceMonitor").expect("rendered");
    assert_eq!(got, seed_default_monitor());
}

#[test]
fn seed_custom_interval_and_timeout() {
    let got = rendered(
        &cr_value(with_service_monitor(json!({ "interval": "15s", "scrapeTimeout": "5s" }))),
        "ServiceMonitor",
    )
    .unwrap();
    assert_eq!(got["spec"]["endpoints"], json!([{ "port": "metrics", "interval": "15s", "scrapeTimeout": "5s" }]));
    // Everything else as in the defaults example.
    let mut rest = got.clone();
    rest["spec"]["endpoints"] = seed_default_monitor()["spec"]["endpoints"].clone();
    assert_eq!(rest, seed_default_monitor());
}

#[test]
fn seed_additional_labels() {
    let got = rendered(
        &cr_value(with_service_monitor(json!({ "additionalLabels": { "release": "prometheus", "team": "platform" } }))),
        "ServiceMonitor",
    )
    .unwrap();
    assert_eq!(
        got["metadata"]["labels"],
        json!({
            "app.kubernetes.io/name": "memcached",
            "app.kubernetes.io/instance": "my-cache",
            "app.kubernetes.io/managed-by": "memcached-operator",
            "release": "prometheus",
            "team": "platform",
        })
    );
    // The selector stays the standard labels only.
    assert_eq!(got["spec"]["selector"], json!({ "matchLabels": standard_labels("my-cache") }));
}

#[test]
fn seed_full_monitoring_with_all_features_produces_every_expected_resource() {
    let cr = cr_value(json!({
        "replicas": 3,
        "monitoring": {
            "enabled": true,
            "serviceMonitor": { "interval": "15s", "scrapeTimeout": "5s", "additionalLabels": { "release": "prometheus" } },
        },
        "highAvailability": { "podDisruptionBudget": { "enabled": true }, "antiAffinity": { "type": "preferred" } },
    }));
    assert_eq!(rendered_kinds(&cr), ["Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor"]);

    let deployment = rendered(&cr, "Deployment").unwrap();
    let containers = at(&deployment, "/spec/template/spec/containers");
    assert_eq!(containers.as_array().unwrap().len(), 2);
    assert_subset(
        &containers[1],
        &json!({
            "name": "exporter",
            "image": "prom/memcached-exporter:v0.15.4",
            "ports": [{ "name": "metrics", "containerPort": 9150, "protocol": "TCP" }],
        }),
    );
    assert_eq!(at(&deployment, "/spec/replicas"), 3);
    assert_eq!(
        at(
            &deployment,
            "/spec/template/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/weight"
        ),
        100
    );

    let service = rendered(&cr, "Service").unwrap();
    assert_subset(
        &service,
        &json!({ "spec": { "ports": [
            { "name": "memcached", "port": 11211 },
            { "name": "metrics", "port": 9150, "targetPort": "metrics", "protocol": "TCP" },
        ]}}),
    );

    let pdb = rendered(&cr, "PodDisruptionBudget").unwrap();
    assert_eq!(pdb["spec"]["minAvailable"], 1);

    let monitor = rendered(&cr, "ServiceMonitor").unwrap();
    assert_subset(
        &monitor,
        &json!({
            "metadata": { "labels": merge(standard_labels("my-cache"), json!({ "release": "prometheus" })) },
            "spec": { "endpoints": [{ "port": "metrics", "interval": "15s", "scrapeTimeout": "5s" }] },
        }),
    );
}

#[test]
fn seed_monitoring_disabled_creates_no_service_monitor() {
    // The seed's CR has no namespace.
    let cr = json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "my-cache" },
        "spec": { "replicas": 3 },
    });
    assert!(!guards::service_monitor_enabled(&memcached(cr.clone())));
    assert_eq!(rendered_kinds(&cr), ["Deployment", "Service"]);
    assert_eq!(desired("ServiceMonitor", &cr, None, &[]), None);
}

/// Seed "Skip Logic": all three conditions must hold.
#[test]
fn guard_follows_the_skip_rules() {
    let cases = [
        ("monitoring is nil", json!({}), false),
        ("monitoring.enabled false, no serviceMonitor", json!({ "monitoring": { "enabled": false } }), false),
        (
            "monitoring.enabled false with serviceMonitor",
            json!({ "monitoring": { "enabled": false, "serviceMonitor": {} } }),
            false,
        ),
        ("enabled omitted with serviceMonitor", json!({ "monitoring": { "serviceMonitor": {} } }), false),
        ("serviceMonitor is nil", json!({ "monitoring": { "enabled": true } }), false),
        ("enabled with serviceMonitor {}", json!({ "monitoring": { "enabled": true, "serviceMonitor": {} } }), true),
        (
            "enabled with settings",
            json!({ "monitoring": { "enabled": true, "serviceMonitor": { "interval": "1m" } } }),
            true,
        ),
    ];
    for (row, spec, want) in cases {
        let cr = cr_value(spec);
        assert_eq!(guards::service_monitor_enabled(&memcached(cr.clone())), want, "{row}: guard");
        assert_eq!(memcached_logic::exports::service_monitor_enabled(&text(&cr)).unwrap(), want, "{row}: export");
        assert_eq!(desired("ServiceMonitor", &cr, None, &[]).is_some(), want, "{row}: desired");
        assert_eq!(rendered_kinds(&cr).contains(&"ServiceMonitor".to_owned()), want, "{row}: render");
    }
}

#[test]
fn defaults_apply_per_field() {
    let cases = [
        (json!({}), "30s", "10s"),
        (json!({ "interval": "15s" }), "15s", "10s"),
        (json!({ "scrapeTimeout": "5s" }), "30s", "5s"),
        (json!({ "interval": "1m", "scrapeTimeout": "20s" }), "1m", "20s"),
    ];
    for (settings, interval, timeout) in cases {
        let got = monitor(with_service_monitor(settings.clone()), None);
        assert_eq!(
            got["spec"]["endpoints"],
            json!([{ "port": "metrics", "interval": interval, "scrapeTimeout": timeout }]),
            "{settings}"
        );
    }
}

/// "If an additional label has the same key as a standard label, the standard label wins."
#[test]
fn standard_labels_win_over_additional_labels() {
    let cases = [
        ("name", json!({ "app.kubernetes.io/name": "redis" })),
        ("instance", json!({ "app.kubernetes.io/instance": "other" })),
        ("managed-by", json!({ "app.kubernetes.io/managed-by": "helm" })),
        (
            "all three plus one",
            json!({
                "app.kubernetes.io/name": "redis",
                "app.kubernetes.io/instance": "other",
                "app.kubernetes.io/managed-by": "helm",
                "release": "prometheus",
            }),
        ),
    ];
    for (row, additional) in cases {
        let got = monitor(with_service_monitor(json!({ "additionalLabels": additional.clone() })), None);
        let labels = got["metadata"]["labels"].as_object().unwrap();
        for (key, value) in standard_labels("my-cache").as_object().unwrap() {
            assert_eq!(&labels[key], value, "{row}: {key}");
        }
        for (key, value) in additional.as_object().unwrap() {
            if !key.starts_with("app.kubernetes.io/") {
                assert_eq!(&labels[key], value, "{row}: additional {key}");
            }
        }
        assert_eq!(got["spec"]["selector"]["matchLabels"], standard_labels("my-cache"), "{row}");
    }
}

#[test]
fn selectors_follow_the_crs_name_and_namespace() {
    let memcached = memcached(json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "sessions", "namespace": "prod" },
        "spec": with_service_monitor(json!({})),
    }));
    let got = build_service_monitor(&memcached, None);
    assert_eq!(got["metadata"]["name"], "sessions");
    assert_eq!(got["metadata"]["namespace"], "prod");
    assert_eq!(got["spec"]["selector"], json!({ "matchLabels": standard_labels("sessions") }));
    assert_eq!(got["spec"]["namespaceSelector"], json!({ "matchNames": ["prod"] }));
}

/// Seed "Runtime Behavior": each change applied to the existing ServiceMonitor.
#[test]
fn runtime_changes_update_the_existing_service_monitor() {
    let base = with_service_monitor(json!({}));
    let cases = [
        (
            "set interval",
            true,
            json!({ "monitoring": { "serviceMonitor": { "interval": "15s" } } }),
            json!({
                "spec": { "endpoints": [{ "port": "metrics", "interval": "15s", "scrapeTimeout": "10s" }] },
            }),
        ),
        (
            "set scrapeTimeout",
            true,
            json!({ "monitoring": { "serviceMonitor": { "scrapeTimeout": "5s" } } }),
            json!({
                "spec": { "endpoints": [{ "port": "metrics", "interval": "30s", "scrapeTimeout": "5s" }] },
            }),
        ),
        (
            "add additionalLabels",
            true,
            json!({ "monitoring": { "serviceMonitor": { "additionalLabels": { "release": "prometheus" } } } }),
            json!({ "metadata": { "labels": merge(standard_labels("my-cache"), json!({ "release": "prometheus" })) } }),
        ),
        (
            "override a standard label: standard label preserved, no update",
            false,
            json!({ "monitoring": { "serviceMonitor": { "additionalLabels": { "app.kubernetes.io/name": "x" } } } }),
            json!({ "metadata": { "labels": standard_labels("my-cache") } }),
        ),
    ];
    for (row, changes, change, want) in cases {
        let current = monitor(base.clone(), None);
        let updated = monitor(merge(base.clone(), change), Some(current.clone()));
        assert_eq!(updated != current, changes, "{row}: whether the object changes");
        assert_subset(&updated, &want);
    }

    // Removing the additional labels again leaves the standard labels only.
    let labelled =
        merge(base.clone(), json!({ "monitoring": { "serviceMonitor": { "additionalLabels": { "team": "a" } } } }));
    let current = monitor(labelled, None);
    assert_eq!(monitor(base, Some(current))["metadata"]["labels"], standard_labels("my-cache"));
}

/// Disabling (SPEC's deliberate change: the object goes) and deleting the CR
/// (the owner reference lets garbage collection remove it).
#[test]
fn disabling_makes_the_service_monitor_unwanted_and_it_is_owned_by_the_cr() {
    let enabled = cr_value(with_service_monitor(json!({})));
    let current = desired("ServiceMonitor", &enabled, None, &[]).expect("wanted");
    assert_eq!(current["metadata"]["ownerReferences"], json!([owner_reference("my-cache")]));
    let disabled = [
        ("enabled: false", merge(enabled.clone(), json!({ "spec": { "monitoring": { "enabled": false } } }))),
        ("monitoring removed", merge(enabled.clone(), json!({ "spec": { "monitoring": null } }))),
        (
            "serviceMonitor removed",
            merge(enabled.clone(), json!({ "spec": { "monitoring": { "serviceMonitor": null } } })),
        ),
    ];
    for (row, cr) in disabled {
        assert_eq!(desired("ServiceMonitor", &cr, Some(&current), &[]), None, "{row}");
    }
}

#[test]
fn reconciling_twice_with_the_same_spec_changes_nothing() {
    for settings in [json!({}), json!({ "interval": "15s", "scrapeTimeout": "5s", "additionalLabels": { "a": "b" } })] {
        let memcached = cr(with_service_monitor(settings));
        assert_idempotent(|c| build_service_monitor(&memcached, c));
    }
}

#[test]
fn external_drift_is_corrected() {
    let spec = with_service_monitor(json!({ "interval": "15s", "additionalLabels": { "release": "prometheus" } }));
    let want = monitor(spec.clone(), None);
    let drifts = [
        (
            "interval edited",
            json!({ "spec": { "endpoints": [{ "port": "metrics", "interval": "5m", "scrapeTimeout": "10s" }] } }),
        ),
        ("endpoint port edited", json!({ "spec": { "endpoints": [{ "port": "web" }] } })),
        ("selector edited", json!({ "spec": { "selector": { "matchLabels": { "a": "b" } } } })),
        ("namespaceSelector edited", json!({ "spec": { "namespaceSelector": { "any": true } } })),
        ("label removed", json!({ "metadata": { "labels": { "release": null } } })),
        ("label overwritten", json!({ "metadata": { "labels": { "app.kubernetes.io/instance": "x" } } })),
        ("spec replaced by a string", json!({ "spec": "broken" })),
        ("kind edited", json!({ "apiVersion": "monitoring.coreos.com/v1alpha1", "kind": "PodMonitor" })),
    ];
    for (row, drift) in drifts {
        let drifted = merge(want.clone(), drift);
        assert_ne!(drifted, want, "{row}");
        assert_eq!(monitor(spec.clone(), Some(drifted)), want, "{row}");
    }
}

/// Keys the operator does not own (server metadata, other spec keys) survive.
#[test]
fn server_filled_and_foreign_keys_survive_and_the_result_is_a_fixed_point() {
    let spec = with_service_monitor(json!({}));
    let server = merge(
        seed_default_monitor(),
        json!({
            "metadata": {
                "uid": "u-1", "resourceVersion": "17", "generation": 3,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "annotations": { "note": "kept" },
                "managedFields": [{ "manager": "memcached-operator" }],
            },
            "spec": { "jobLabel": "app.kubernetes.io/name" },
        }),
    );
    let built = monitor(spec.clone(), Some(server.clone()));
    assert_eq!(built, server, "nothing the operator owns differs, so nothing changes");
    assert_eq!(monitor(spec, Some(built.clone())), built);
}
