//! Validation (SPEC "Spec fields and defaults" ranges and "Cross-field validation").

mod common;

use common::*;
use memcached_logic::Error;
use memcached_logic::api::validation::validate;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The distinct field paths validation reports for a CR with this spec.
fn paths(cr: &Value) -> Vec<String> {
    let mut paths: Vec<String> = validate(&memcached(cr.clone())).into_iter().map(|e| e.path).collect();
    paths.sort();
    paths.dedup();
    paths
}

#[track_caller]
fn assert_rejected(row: &str, spec: Value, want: &[&str]) {
    let cr = cr_value(spec);
    assert_eq!(paths(&cr), want, "{row}");
    // The JSON export gives the same answer.
    let exported = memcached_logic::exports::validate(&text(&cr)).unwrap();
    let mut exported: Vec<String> = exported.into_iter().map(|e| e.path).collect();
    exported.sort();
    exported.dedup();
    assert_eq!(exported, want, "{row}: export");
}

#[test]
fn memory_limit_must_cover_max_memory_plus_32_mib() {
    let limit = |memory: &str| json!({ "limits": { "memory": memory } });
    let bad = ["spec.resources.limits.memory"];
    let cases: [(&str, Value, &[&str]); 10] = [
        ("default 64 MB: 95Mi too small", json!({ "resources": limit("95Mi") }), &bad),
        ("default 64 MB: 96Mi is enough", json!({ "resources": limit("96Mi") }), &[]),
        ("default 64 MB: 64Mi too small", json!({ "resources": limit("64Mi") }), &bad),
        ("default 64 MB: 1Gi", json!({ "resources": limit("1Gi") }), &[]),
        ("decimal: 100M is 95.4Mi", json!({ "resources": limit("100M") }), &bad),
        ("decimal: 101M is 96.3Mi", json!({ "resources": limit("101M") }), &[]),
        ("128 MB needs 160Mi", json!({ "memcached": { "maxMemoryMB": 128 }, "resources": limit("159Mi") }), &bad),
        ("128 MB with 160Mi", json!({ "memcached": { "maxMemoryMB": 128 }, "resources": limit("160Mi") }), &[]),
        ("garbage quantity", json!({ "resources": limit("lots") }), &bad),
        ("only requests", json!({ "resources": { "requests": { "memory": "1Mi" } } }), &[]),
    ];
    for (row, spec, want) in cases {
        assert_rejected(row, spec, want);
    }
}

#[test]
fn pdb_bounds_are_exclusive_and_an_integer_min_available_is_below_replicas() {
    let pdb = |replicas: Option<i32>, settings: Value| {
        let mut spec =
            json!({ "highAvailability": { "podDisruptionBudget": merge(json!({ "enabled": true }), settings) } });
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        spec
    };
    let min = "spec.highAvailability.podDisruptionBudget.minAvailable";
    let max = "spec.highAvailability.podDisruptionBudget.maxUnavailable";
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("both set", pdb(Some(3), json!({ "minAvailable": 1, "maxUnavailable": 1 })), vec![max]),
        ("both set as percentages", pdb(Some(3), json!({ "minAvailable": "50%", "maxUnavailable": "50%" })), vec![max]),
        ("minAvailable = replicas", pdb(Some(3), json!({ "minAvailable": 3 })), vec![min]),
        ("minAvailable > replicas", pdb(Some(3), json!({ "minAvailable": 5 })), vec![min]),
        ("minAvailable below replicas", pdb(Some(3), json!({ "minAvailable": 2 })), vec![]),
        ("minAvailable 1 with default replicas 1", pdb(None, json!({ "minAvailable": 1 })), vec![min]),
        ("percentage is not compared", pdb(Some(1), json!({ "minAvailable": "100%" })), vec![]),
        ("maxUnavailable alone", pdb(Some(1), json!({ "maxUnavailable": 1 })), vec![]),
        ("negative", pdb(Some(3), json!({ "maxUnavailable": -1 })), vec![max]),
        ("not a percentage", pdb(Some(3), json!({ "maxUnavailable": "half" })), vec![max]),
        ("neither", pdb(Some(2), json!({})), vec![]),
        (
            "disabled: nothing checked",
            json!({ "replicas": 1, "highAvailability": { "podDisruptionBudget": { "enabled": false, "minAvailable": 5, "maxUnavailable": 1 } } }),
            vec![],
        ),
        (
            "under autoscaling: compared with minReplicas",
            merge(
                pdb(None, json!({ "minAvailable": 2 })),
                json!({
                    "resources": { "requests": { "cpu": "1" } },
                    "autoscaling": { "enabled": true, "minReplicas": 2, "maxReplicas": 5 },
                }),
            ),
            vec![min],
        ),
        (
            "under autoscaling: below minReplicas",
            merge(
                pdb(None, json!({ "minAvailable": 2 })),
                json!({
                    "resources": { "requests": { "cpu": "1" } },
                    "autoscaling": { "enabled": true, "minReplicas": 3, "maxReplicas": 5 },
                }),
            ),
            vec![],
        ),
    ];
    for (row, spec, want) in cases {
        assert_rejected(row, spec, &want);
    }
}

#[test]
fn graceful_shutdown_grace_period_exceeds_the_pre_stop_delay() {
    let path = "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds";
    let graceful = |settings: Value| json!({ "highAvailability": { "gracefulShutdown": settings } });
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("defaults 10 < 30", graceful(json!({ "enabled": true })), vec![]),
        (
            "equal",
            graceful(json!({ "enabled": true, "preStopDelaySeconds": 20, "terminationGracePeriodSeconds": 20 })),
            vec![path],
        ),
        (
            "smaller",
            graceful(json!({ "enabled": true, "preStopDelaySeconds": 20, "terminationGracePeriodSeconds": 15 })),
            vec![path],
        ),
        (
            "greater",
            graceful(json!({ "enabled": true, "preStopDelaySeconds": 20, "terminationGracePeriodSeconds": 21 })),
            vec![],
        ),
        ("delay vs default grace 30", graceful(json!({ "enabled": true, "preStopDelaySeconds": 30 })), vec![path]),
        (
            "grace vs default delay 10",
            graceful(json!({ "enabled": true, "terminationGracePeriodSeconds": 10 })),
            vec![path],
        ),
        (
            "disabled: not compared",
            graceful(json!({ "enabled": false, "preStopDelaySeconds": 60, "terminationGracePeriodSeconds": 5 })),
            vec![],
        ),
    ];
    for (row, spec, want) in cases {
        assert_rejected(row, spec, &want);
    }
}

#[test]
fn sasl_and_tls_need_their_secret_names() {
    let sasl = "spec.security.sasl.credentialsSecretRef.name";
    let tls = "spec.security.tls.certificateSecretRef.name";
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("sasl without ref", json!({ "sasl": { "enabled": true } }), vec![sasl]),
        ("sasl with empty ref", json!({ "sasl": { "enabled": true, "credentialsSecretRef": {} } }), vec![sasl]),
        (
            "sasl with empty name",
            json!({ "sasl": { "enabled": true, "credentialsSecretRef": { "name": "" } } }),
            vec![sasl],
        ),
        ("sasl with a name", json!({ "sasl": { "enabled": true, "credentialsSecretRef": { "name": "s" } } }), vec![]),
        (
            "sasl with an invalid name",
            json!({ "sasl": { "enabled": true, "credentialsSecretRef": { "name": "Bad_Name" } } }),
            vec![sasl],
        ),
        ("sasl disabled", json!({ "sasl": { "enabled": false } }), vec![]),
        ("tls without ref", json!({ "tls": { "enabled": true } }), vec![tls]),
        (
            "tls with empty name",
            json!({ "tls": { "enabled": true, "certificateSecretRef": { "name": "" } } }),
            vec![tls],
        ),
        (
            "tls with a name",
            json!({ "tls": { "enabled": true, "certificateSecretRef": { "name": "t" }, "enableClientCert": true } }),
            vec![],
        ),
        ("tls disabled", json!({ "tls": { "enabled": false, "enableClientCert": true } }), vec![]),
        ("both missing", json!({ "sasl": { "enabled": true }, "tls": { "enabled": true } }), vec![sasl, tls]),
    ];
    for (row, security, want) in cases {
        assert_rejected(row, json!({ "security": security }), &want);
    }
}

#[test]
fn autoscaling_rules() {
    let cpu = json!({ "resources": { "requests": { "cpu": "100m" } } });
    let auto = |settings: Value| {
        merge(cpu.clone(), json!({ "autoscaling": merge(json!({ "enabled": true, "maxReplicas": 5 }), settings) }))
    };
    let memory_metric = json!([{ "type": "Resource", "resource": { "name": "memory", "target": { "type": "Utilization", "averageUtilization": 70 } } }]);
    let cpu_value_metric = json!([{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "AverageValue", "averageValue": "500m" } } }]);
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("valid", auto(json!({})), vec![]),
        ("replicas present", merge(auto(json!({})), json!({ "replicas": 3 })), vec!["spec.replicas"]),
        ("min > max", auto(json!({ "minReplicas": 6 })), vec!["spec.autoscaling.minReplicas"]),
        ("min = max", auto(json!({ "minReplicas": 5 })), vec![]),
        ("maxReplicas missing", auto(json!({ "maxReplicas": null })), vec!["spec.autoscaling.maxReplicas"]),
        ("minReplicas 0", auto(json!({ "minReplicas": 0 })), vec!["spec.autoscaling.minReplicas"]),
        (
            "default CPU metric without CPU request",
            merge(auto(json!({})), json!({ "resources": null })),
            vec!["spec.resources.requests.cpu"],
        ),
        (
            "CPU request only as a limit",
            merge(auto(json!({})), json!({ "resources": { "requests": null, "limits": { "cpu": "1" } } })),
            vec!["spec.resources.requests.cpu"],
        ),
        (
            "memory metric needs no CPU request",
            merge(auto(json!({ "metrics": memory_metric })), json!({ "resources": null })),
            vec![],
        ),
        (
            "CPU AverageValue needs no CPU request",
            merge(auto(json!({ "metrics": cpu_value_metric })), json!({ "resources": null })),
            vec![],
        ),
        (
            "disabled: nothing checked",
            json!({ "replicas": 3, "autoscaling": { "enabled": false, "minReplicas": 9, "maxReplicas": 1 } }),
            vec![],
        ),
    ];
    for (row, spec, want) in cases {
        assert_rejected(row, spec, &want);
    }
}

#[test]
fn the_two_anti_affinity_spellings_must_agree() {
    let path = "spec.highAvailability.antiAffinity.type";
    let cases = [
        ("soft", "preferred", vec![]),
        ("hard", "required", vec![]),
        ("soft", "required", vec![path]),
        ("hard", "preferred", vec![path]),
    ];
    for (preset, type_, want) in cases {
        let spec = json!({ "highAvailability": { "antiAffinityPreset": preset, "antiAffinity": { "type": type_ } } });
        assert_rejected(&format!("{preset} / {type_}"), spec, &want);
    }
}

/// Every range and pattern of SPEC's field table, at and beyond each bound.
#[test]
fn ranges_and_patterns() {
    let cases: Vec<(Value, Option<&str>)> = vec![
        (json!({ "replicas": -1 }), Some("spec.replicas")),
        (json!({ "replicas": 0 }), None),
        (json!({ "replicas": 64 }), None),
        (json!({ "replicas": 65 }), Some("spec.replicas")),
        (json!({ "image": "" }), Some("spec.image")),
        (json!({ "image": "memcached 1.6" }), Some("spec.image")),
        (json!({ "memcached": { "maxMemoryMB": 15 } }), Some("spec.memcached.maxMemoryMB")),
        (json!({ "memcached": { "maxMemoryMB": 16 } }), None),
        (json!({ "memcached": { "maxMemoryMB": 65536 } }), None),
        (json!({ "memcached": { "maxMemoryMB": 65537 } }), Some("spec.memcached.maxMemoryMB")),
        (json!({ "memcached": { "maxConnections": 0 } }), Some("spec.memcached.maxConnections")),
        (json!({ "memcached": { "maxConnections": 1 } }), None),
        (json!({ "memcached": { "maxConnections": 65536 } }), None),
        (json!({ "memcached": { "maxConnections": 65537 } }), Some("spec.memcached.maxConnections")),
        (json!({ "memcached": { "threads": 0 } }), Some("spec.memcached.threads")),
        (json!({ "memcached": { "threads": 1 } }), None),
        (json!({ "memcached": { "threads": 128 } }), None),
        (json!({ "memcached": { "threads": 129 } }), Some("spec.memcached.threads")),
        (json!({ "memcached": { "maxItemSize": "1m" } }), None),
        (json!({ "memcached": { "maxItemSize": "512k" } }), None),
        (json!({ "memcached": { "maxItemSize": "1M" } }), Some("spec.memcached.maxItemSize")),
        (json!({ "memcached": { "maxItemSize": "1g" } }), Some("spec.memcached.maxItemSize")),
        (json!({ "memcached": { "maxItemSize": "m" } }), Some("spec.memcached.maxItemSize")),
        (json!({ "memcached": { "maxItemSize": "1.5m" } }), Some("spec.memcached.maxItemSize")),
        (json!({ "memcached": { "maxItemSize": "" } }), Some("spec.memcached.maxItemSize")),
        (json!({ "memcached": { "verbosity": -1 } }), Some("spec.memcached.verbosity")),
        (json!({ "memcached": { "verbosity": 0 } }), None),
        (json!({ "memcached": { "verbosity": 2 } }), None),
        (json!({ "memcached": { "verbosity": 3 } }), Some("spec.memcached.verbosity")),
        (
            json!({ "highAvailability": { "gracefulShutdown": { "preStopDelaySeconds": 0 } } }),
            Some("spec.highAvailability.gracefulShutdown.preStopDelaySeconds"),
        ),
        (json!({ "highAvailability": { "gracefulShutdown": { "preStopDelaySeconds": 1 } } }), None),
        (json!({ "highAvailability": { "gracefulShutdown": { "preStopDelaySeconds": 300 } } }), None),
        (
            json!({ "highAvailability": { "gracefulShutdown": { "preStopDelaySeconds": 301 } } }),
            Some("spec.highAvailability.gracefulShutdown.preStopDelaySeconds"),
        ),
        (
            json!({ "highAvailability": { "gracefulShutdown": { "terminationGracePeriodSeconds": 0 } } }),
            Some("spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds"),
        ),
        (json!({ "highAvailability": { "gracefulShutdown": { "terminationGracePeriodSeconds": 600 } } }), None),
        (
            json!({ "highAvailability": { "gracefulShutdown": { "terminationGracePeriodSeconds": 601 } } }),
            Some("spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds"),
        ),
        (json!({ "monitoring": { "enabled": true, "exporterImage": "" } }), Some("spec.monitoring.exporterImage")),
        (
            json!({ "monitoring": { "enabled": true, "serviceMonitor": { "interval": "30s", "scrapeTimeout": "1m30s" } } }),
            None,
        ),
        (
            json!({ "monitoring": { "enabled": true, "serviceMonitor": { "interval": "thirty" } } }),
            Some("spec.monitoring.serviceMonitor.interval"),
        ),
        (
            json!({ "monitoring": { "enabled": true, "serviceMonitor": { "scrapeTimeout": "10" } } }),
            Some("spec.monitoring.serviceMonitor.scrapeTimeout"),
        ),
        (
            json!({ "monitoring": { "enabled": true, "serviceMonitor": { "additionalLabels": { "bad key!": "x" } } } }),
            Some("spec.monitoring.serviceMonitor.additionalLabels[bad key!]"),
        ),
        (
            json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 1025 } }),
            Some("spec.autoscaling.maxReplicas"),
        ),
    ];
    for (spec, want) in cases {
        let want: Vec<&str> = want.into_iter().collect();
        assert_rejected(&spec.to_string(), spec, &want);
    }
}

/// The OpenAPI schema's bounds hold whether or not a section is enabled, so
/// `validate` checks them in disabled sections too (same answers as the API server).
#[test]
fn schema_bounds_apply_in_disabled_sections_too() {
    let spread: Vec<Value> = (0..17)
        .map(|i| json!({ "maxSkew": 1, "topologyKey": format!("k{i}"), "whenUnsatisfiable": "ScheduleAnyway" }))
        .collect();
    let metrics: Vec<Value> = (0..17)
        .map(|_| json!({ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 50 } } }))
        .collect();
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "autoscaling disabled, replicas out of range",
            json!({ "autoscaling": { "enabled": false, "minReplicas": 0, "maxReplicas": 1025 } }),
            vec!["spec.autoscaling.maxReplicas", "spec.autoscaling.minReplicas"],
        ),
        (
            "autoscaling disabled, 17 metrics",
            json!({ "autoscaling": { "enabled": false, "maxReplicas": 2, "metrics": metrics.clone() } }),
            vec!["spec.autoscaling.metrics"],
        ),
        (
            "autoscaling enabled, 17 metrics",
            json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 2, "metrics": metrics } }),
            vec!["spec.autoscaling.metrics"],
        ),
        (
            "17 topology spread constraints",
            json!({ "highAvailability": { "topologySpreadConstraints": spread.clone() } }),
            vec!["spec.highAvailability.topologySpreadConstraints"],
        ),
        (
            "16 topology spread constraints",
            json!({ "highAvailability": { "topologySpreadConstraints": spread[..16] } }),
            vec![],
        ),
    ];
    for (row, spec, want) in cases {
        assert_rejected(row, spec, &want);
    }
}

#[test]
fn metadata_name_is_required_and_a_dns_label() {
    let cases = [
        (json!({}), vec!["metadata.name"]),
        (json!({ "name": "" }), vec!["metadata.name"]),
        (json!({ "name": "My_Cache" }), vec!["metadata.name"]),
        (json!({ "name": "1cache" }), vec!["metadata.name"]),
        (json!({ "name": "cache-1" }), vec![]),
        (json!({ "name": "cache", "namespace": "Bad NS" }), vec!["metadata.namespace"]),
    ];
    for (metadata, want) in cases {
        let cr = json!({ "apiVersion": API_VERSION, "kind": "Memcached", "metadata": metadata, "spec": {} });
        assert_eq!(paths(&cr), want, "{metadata}");
    }
}

/// Every CR example in the seeds, and a CR using every feature, is valid.
#[test]
fn valid_crs_produce_no_errors() {
    let tls = json!({ "enabled": true, "certificateSecretRef": { "name": "memcached-tls" } });
    let specs = [
        ("000 minimal", json!({})),
        (
            "000 annotations",
            json!({ "service": { "annotations": { "prometheus.io/scrape": "true", "prometheus.io/port": "11211" } } }),
        ),
        ("001 defaults", json!({ "replicas": 3, "monitoring": { "enabled": true, "serviceMonitor": {} } })),
        (
            "001 interval",
            json!({ "replicas": 3, "monitoring": { "enabled": true, "serviceMonitor": { "interval": "15s", "scrapeTimeout": "5s" } } }),
        ),
        (
            "001 labels",
            json!({ "replicas": 3, "monitoring": { "enabled": true, "serviceMonitor": { "additionalLabels": { "release": "prometheus", "team": "platform" } } } }),
        ),
        (
            "001 full",
            json!({
                "replicas": 3,
                "monitoring": { "enabled": true, "serviceMonitor": { "interval": "15s", "scrapeTimeout": "5s", "additionalLabels": { "release": "prometheus" } } },
                "highAvailability": { "podDisruptionBudget": { "enabled": true }, "antiAffinity": { "type": "preferred" } },
            }),
        ),
        ("001/004 disabled", json!({ "replicas": 3 })),
        ("004 defaults", json!({ "replicas": 3, "security": { "networkPolicy": { "enabled": true } } })),
        (
            "004 namespace selector",
            json!({ "replicas": 3, "security": { "networkPolicy": { "enabled": true, "allowedSources": [{ "namespaceSelector": { "matchLabels": { "env": "production" } } }] } } }),
        ),
        (
            "004 pod selector",
            json!({ "replicas": 3, "security": { "networkPolicy": { "enabled": true, "allowedSources": [{ "podSelector": { "matchLabels": { "app": "my-webapp" } } }] } } }),
        ),
        (
            "004 monitoring",
            json!({ "replicas": 3, "monitoring": { "enabled": true }, "security": { "networkPolicy": { "enabled": true } } }),
        ),
        ("004 tls", json!({ "replicas": 3, "security": { "tls": tls.clone(), "networkPolicy": { "enabled": true } } })),
        (
            "004 full",
            json!({
                "replicas": 3,
                "monitoring": { "enabled": true },
                "security": {
                    "tls": tls.clone(),
                    "networkPolicy": { "enabled": true, "allowedSources": [{
                        "namespaceSelector": { "matchLabels": { "env": "production" } },
                        "podSelector": { "matchLabels": { "app": "my-webapp" } },
                    }] },
                },
            }),
        ),
        ("002 pdb", json!({ "replicas": 2, "highAvailability": { "podDisruptionBudget": { "enabled": true } } })),
        (
            "everything",
            json!({
                "replicas": 4,
                "image": "memcached:1.6.38",
                "resources": { "requests": { "cpu": "500m", "memory": "300Mi" }, "limits": { "memory": "288Mi" } },
                "memcached": { "maxMemoryMB": 256, "maxConnections": 2048, "threads": 8, "maxItemSize": "2m", "verbosity": 1, "extraArgs": ["-R", "20"] },
                "highAvailability": {
                    "antiAffinityPreset": "hard",
                    "antiAffinity": { "type": "required" },
                    "topologySpreadConstraints": [{ "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway" }],
                    "podDisruptionBudget": { "enabled": true, "maxUnavailable": "25%" },
                    "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 15, "terminationGracePeriodSeconds": 45 },
                },
                "monitoring": { "enabled": true, "exporterImage": "prom/memcached-exporter:v0.15.4", "serviceMonitor": { "interval": "1m", "scrapeTimeout": "30s" } },
                "security": {
                    "podSecurityContext": { "runAsNonRoot": true },
                    "containerSecurityContext": { "allowPrivilegeEscalation": false },
                    "sasl": { "enabled": true, "credentialsSecretRef": { "name": "sasl" } },
                    "tls": { "enabled": true, "certificateSecretRef": { "name": "tls" }, "enableClientCert": true },
                    "networkPolicy": { "enabled": true, "allowedSources": [{ "ipBlock": { "cidr": "10.0.0.0/8" } }] },
                },
                "service": { "annotations": { "a.b/c": "d" } },
            }),
        ),
        (
            "autoscaling",
            json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "minReplicas": 2, "maxReplicas": 10 } }),
        ),
    ];
    for (row, spec) in specs {
        let cr = cr_value(spec);
        assert_eq!(validate(&memcached(cr.clone())), vec![], "{row}");
        assert!(memcached_logic::exports::render(&text(&cr)).is_ok(), "{row}: renders");
    }
}

/// An invalid CR is an error for render and desired (a host never deletes on bad input).
#[test]
fn render_and_desired_refuse_an_invalid_cr_naming_the_field() {
    let cr = text(&cr_value(json!({ "security": { "tls": { "enabled": true } } })));
    let path = "spec.security.tls.certificateSecretRef.name";
    let check = |err: Error| match err {
        Error::Invalid(errors) => assert!(errors.iter().any(|e| e.path == path), "{errors:?}"),
        other => panic!("expected Invalid, got {other:?}"),
    };
    check(memcached_logic::exports::render(&cr).unwrap_err());
    check(memcached_logic::exports::desired(&cr, &[], &[]).unwrap_err());
}

#[test]
fn malformed_input_names_the_field() {
    let cases = [
        (
            json!({ "apiVersion": API_VERSION, "kind": "Memcached", "metadata": { "name": "c" }, "spec": { "replicas": "three" } }),
            "spec.replicas",
        ),
        (
            json!({ "apiVersion": API_VERSION, "kind": "Memcached", "metadata": { "name": "c" }, "spec": { "highAvailability": { "antiAffinityPreset": "medium" } } }),
            "spec.highAvailability.antiAffinityPreset",
        ),
        (json!({ "apiVersion": API_VERSION, "kind": "Redis", "metadata": { "name": "c" }, "spec": {} }), "kind"),
        (
            json!({ "apiVersion": "memcached.c5c3.io/v1", "kind": "Memcached", "metadata": { "name": "c" }, "spec": {} }),
            "apiVersion",
        ),
    ];
    for (cr, path) in cases {
        match memcached_logic::exports::validate(&text(&cr)) {
            Err(Error::Malformed(errors)) => assert_eq!(errors[0].path, path, "{cr}"),
            other => panic!("{cr}: expected Malformed, got {other:?}"),
        }
    }
}

/// SPEC: cross-field rules are CEL rules in the CRD (so the API server
/// rejects what `validate` rejects), each pointing at the same field.
#[test]
fn the_crd_carries_a_cel_rule_for_every_cross_field_rule() {
    use kube_core::CustomResourceExt;
    let crd = serde_json::to_value(memcached_logic::Memcached::crd()).unwrap();
    let mut field_paths = Vec::new();
    collect_rules(&crd, "", &mut field_paths);
    for want in [
        "spec.replicas",
        "spec.resources.limits.memory",
        "spec.highAvailability.podDisruptionBudget.minAvailable",
        "spec.highAvailability.podDisruptionBudget.maxUnavailable",
        "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
        "spec.security.sasl.credentialsSecretRef.name",
        "spec.security.tls.certificateSecretRef.name",
        "spec.autoscaling.minReplicas",
        "spec.autoscaling.maxReplicas",
        "spec.highAvailability.antiAffinity.type",
    ] {
        assert!(field_paths.iter().any(|p| p == want), "no CEL rule for {want}; have {field_paths:?}");
    }
}

/// SPEC scopes the rules of SASL, TLS, graceful shutdown, the PDB and
/// autoscaling to "X enabled", and `validate` checks nothing in a disabled
/// section: so every CEL rule on an object with an `enabled` switch must be
/// conditional on it, or the API server would reject CRs `validate` accepts.
#[test]
fn cel_rules_of_switchable_sections_apply_only_when_enabled() {
    use kube_core::CustomResourceExt;
    let crd = serde_json::to_value(memcached_logic::Memcached::crd()).unwrap();
    let mut rules = Vec::new();
    collect_switchable_rules(&crd, &mut rules);
    assert!(
        rules.len() >= 6,
        "expected the rules of sasl, tls, gracefulShutdown, podDisruptionBudget, autoscaling; got {rules:?}"
    );
    for rule in rules {
        assert!(rule.starts_with("!self.enabled ||"), "not conditional on enabled: {rule}");
    }
}

fn collect_switchable_rules(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            let switchable = map.get("properties").is_some_and(|p| p.get("enabled").is_some());
            if let (true, Some(Value::Array(rules))) = (switchable, map.get("x-kubernetes-validations")) {
                out.extend(rules.iter().map(|r| r["rule"].as_str().unwrap_or_default().to_owned()));
            }
            map.values().for_each(|child| collect_switchable_rules(child, out));
        }
        Value::Array(items) => items.iter().for_each(|i| collect_switchable_rules(i, out)),
        _ => {}
    }
}

/// The absolute field path of every CEL rule: the schema property path of the
/// object carrying the rule joined with the rule's fieldPath.
fn collect_rules(schema: &Value, at_path: &str, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(rules)) = map.get("x-kubernetes-validations") {
                for rule in rules {
                    let field = rule["fieldPath"].as_str().unwrap_or("");
                    out.push(format!("{at_path}{field}").trim_start_matches('.').to_owned());
                }
            }
            if let Some(Value::Object(properties)) = map.get("properties") {
                for (name, child) in properties {
                    collect_rules(child, &format!("{at_path}.{name}"), out);
                }
            }
            for (key, child) in map {
                if key != "properties" && key != "x-kubernetes-validations" {
                    collect_rules(child, at_path, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_rules(i, at_path, out)),
        _ => {}
    }
}
