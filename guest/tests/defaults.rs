//! Defaults (SPEC "Spec fields and defaults"; seed 001's interval/scrapeTimeout defaults).

mod common;

use common::*;
use memcached_logic::exports;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn defaulted(cr: &Value) -> Value {
    let answer = memcached_logic::exports::default(&text(cr)).unwrap_or_else(|err| panic!("default failed: {err}"));
    serde_json::from_str(&answer).expect("default answers JSON")
}

fn defaulted_spec(spec: Value) -> Value {
    defaulted(&cr_value(spec))["spec"].clone()
}

#[test]
fn a_minimal_cr_gets_every_top_level_default_and_no_optional_section() {
    assert_eq!(
        defaulted_spec(json!({})),
        json!({
            "replicas": 1,
            "image": "memcached:1.6",
            "memcached": { "maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0 },
        })
    );
}

/// Each present section gets its defaults: (row, spec, fields expected after defaulting).
#[test]
fn every_present_section_gets_its_defaults() {
    let cases = [
        (
            "highAvailability present: soft",
            json!({ "highAvailability": {} }),
            json!({ "highAvailability": { "antiAffinityPreset": "soft" } }),
        ),
        (
            "antiAffinity.type required: hard",
            json!({ "highAvailability": { "antiAffinity": { "type": "required" } } }),
            json!({ "highAvailability": { "antiAffinityPreset": "hard", "antiAffinity": { "type": "required" } } }),
        ),
        (
            "antiAffinity.type preferred: soft",
            json!({ "highAvailability": { "antiAffinity": { "type": "preferred" } } }),
            json!({ "highAvailability": { "antiAffinityPreset": "soft" } }),
        ),
        (
            "graceful shutdown: 10 and 30",
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true } } }),
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30 } } }),
        ),
        (
            "monitoring: exporter image",
            json!({ "monitoring": { "enabled": true } }),
            json!({ "monitoring": { "enabled": true, "exporterImage": "prom/memcached-exporter:v0.15.4" } }),
        ),
        (
            "serviceMonitor: 30s and 10s",
            json!({ "monitoring": { "enabled": true, "serviceMonitor": {} } }),
            json!({ "monitoring": { "serviceMonitor": { "interval": "30s", "scrapeTimeout": "10s" } } }),
        ),
        (
            "autoscaling: no replicas, CPU 80%, scale-down stabilization 300",
            json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
            json!({ "autoscaling": {
                "enabled": true, "maxReplicas": 4,
                "metrics": [{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 80 } } }],
                "behavior": { "scaleDown": { "stabilizationWindowSeconds": 300 } },
            }}),
        ),
    ];
    for (row, spec, want) in cases {
        let got = defaulted_spec(spec);
        assert_subset(&got, &want);
        assert!(got.get("image").is_some(), "{row}: top-level defaults too");
    }
}

#[test]
fn replicas_stay_absent_under_autoscaling() {
    let got = defaulted_spec(
        json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
    );
    assert!(got.get("replicas").is_none(), "{got}");
    // As the Go operator stores it: the HPA's own default applies.
    assert!(got["autoscaling"].get("minReplicas").is_none(), "{got}");
    let disabled = defaulted_spec(json!({ "autoscaling": { "enabled": false, "maxReplicas": 4 } }));
    assert_eq!(disabled["replicas"], 1);
    assert_eq!(
        disabled["autoscaling"],
        json!({ "enabled": false, "maxReplicas": 4 }),
        "a disabled section is left alone"
    );
}

#[test]
fn values_the_user_set_are_kept() {
    let spec = json!({
        "replicas": 5,
        "image": "memcached:1.6.38",
        "memcached": { "maxMemoryMB": 256, "maxConnections": 10, "threads": 2, "maxItemSize": "4m", "verbosity": 2, "extraArgs": ["-R", "5"] },
        "highAvailability": {
            "antiAffinityPreset": "hard",
            "podDisruptionBudget": { "enabled": true, "maxUnavailable": "25%" },
            "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 3, "terminationGracePeriodSeconds": 9 },
        },
        "monitoring": { "enabled": true, "exporterImage": "e:1", "serviceMonitor": { "interval": "1m", "scrapeTimeout": "20s" } },
    });
    let got = defaulted_spec(spec.clone());
    assert_eq!(got, spec, "nothing to fill in, nothing changed");
}

#[test]
fn applying_defaults_twice_is_a_no_op() {
    let specs = [
        json!({}),
        json!({ "highAvailability": { "antiAffinity": { "type": "required" }, "podDisruptionBudget": { "enabled": true }, "gracefulShutdown": {} } }),
        json!({ "monitoring": { "enabled": false, "serviceMonitor": {} }, "security": { "networkPolicy": { "enabled": true } } }),
        json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4, "behavior": { "scaleUp": { "stabilizationWindowSeconds": 5 } } } }),
        json!({ "service": { "annotations": { "a": "b" } }, "memcached": { "threads": 16 } }),
    ];
    for spec in specs {
        let once = defaulted(&cr_value(spec.clone()));
        let twice = defaulted(&once);
        assert_eq!(twice, once, "{spec}");
        assert_ne!(once, cr_value(spec.clone()), "{spec}: the first pass did fill something in");
    }
}

/// Defaults mean what the builders assume: a CR and its defaulted form
/// render the very same objects.
#[test]
fn defaulting_does_not_change_what_is_rendered() {
    let specs = [
        json!({}),
        json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "enabled": true }, "gracefulShutdown": { "enabled": true } } }),
        json!({ "monitoring": { "enabled": true, "serviceMonitor": {} }, "security": { "networkPolicy": { "enabled": true } } }),
        json!({ "highAvailability": { "antiAffinity": { "type": "required" } } }),
        json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
    ];
    for spec in specs {
        let cr = cr_value(spec.clone());
        assert_eq!(render(&defaulted(&cr)), render(&cr), "{spec}");
    }
}

#[test]
fn metadata_and_status_are_untouched() {
    let mut cr = cr_value(json!({}));
    cr["metadata"]["labels"] = json!({ "team": "a" });
    cr["metadata"]["generation"] = json!(7);
    cr["status"] = json!({ "readyReplicas": 2, "observedGeneration": 6 });
    let got = defaulted(&cr);
    assert_eq!(got["metadata"], cr["metadata"]);
    assert_eq!(got["status"], cr["status"]);
    assert_eq!(got["apiVersion"], API_VERSION);
    assert_eq!(got["kind"], "Memcached");
}

/// The CRD's OpenAPI schema carries the same scalar defaults, so the API
/// server fills in what `default` fills in.
#[test]
fn the_crd_schema_declares_the_same_defaults() {
    use kube_core::CustomResourceExt;
    let crd = serde_json::to_value(memcached_logic::Memcached::crd()).unwrap();
    let spec = at(&crd, "/spec/versions/0/schema/openAPIV3Schema/properties/spec");
    let property = |path: &[&str]| -> Value {
        let mut node = spec;
        for name in path {
            node = node.pointer(&format!("/properties/{name}")).unwrap_or_else(|| panic!("no property {path:?}"));
            // Optional nested types may be wrapped in allOf/anyOf.
            if node.get("properties").is_none() && node.get("default").is_none() {
                for wrapper in ["allOf", "anyOf", "oneOf"] {
                    if let Some(inner) = node.get(wrapper).and_then(|w| w.as_array()).and_then(|w| w.first()) {
                        node = inner;
                    }
                }
            }
        }
        node.get("default").cloned().unwrap_or(Value::Null)
    };
    let cases = [
        (&["image"][..], json!("memcached:1.6")),
        (&["memcached", "maxMemoryMB"], json!(64)),
        (&["memcached", "maxConnections"], json!(1024)),
        (&["memcached", "threads"], json!(4)),
        (&["memcached", "maxItemSize"], json!("1m")),
        (&["memcached", "verbosity"], json!(0)),
        (&["highAvailability", "gracefulShutdown", "preStopDelaySeconds"], json!(10)),
        (&["highAvailability", "gracefulShutdown", "terminationGracePeriodSeconds"], json!(30)),
        (&["monitoring", "exporterImage"], json!("prom/memcached-exporter:v0.15.4")),
        (&["monitoring", "serviceMonitor", "interval"], json!("30s")),
        (&["monitoring", "serviceMonitor", "scrapeTimeout"], json!("10s")),
    ];
    for (path, want) in cases {
        assert_eq!(property(path), want, "{path:?}");
    }
}

/// The PDB's minAvailable 1 applies only while maxUnavailable is unset, so
/// `default` leaves it to the PDB builder: written out, it would read as the
/// user's own minAvailable and fail the "below replicas" rule at 1 replica.
#[test]
fn defaulting_never_changes_whether_a_cr_is_valid() {
    let specs = [
        json!({ "highAvailability": { "podDisruptionBudget": { "enabled": true } } }),
        json!({ "replicas": 2, "highAvailability": { "podDisruptionBudget": { "enabled": true } } }),
        json!({ "replicas": 3, "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
        json!({ "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1 } } }),
    ];
    for spec in specs {
        let cr = json!({ "apiVersion": "memcached.c5c3.io/v1alpha1", "kind": "Memcached",
                         "metadata": { "name": "my-cache", "namespace": "default" }, "spec": spec });
        let before = exports::validate(&cr.to_string()).expect("validates");
        let defaulted = exports::default(&cr.to_string()).expect("defaults");
        let after = exports::validate(&defaulted).expect("validates");
        assert_eq!(before, after, "{spec}");
    }
    let defaulted = defaulted_spec(json!({ "highAvailability": { "podDisruptionBudget": { "enabled": true } } }));
    assert!(defaulted["highAvailability"]["podDisruptionBudget"].get("minAvailable").is_none(), "{defaulted}");
}
