//! The headless Service (seed 000/003, SPEC "Service, ServiceMonitor, NetworkPolicy").

mod common;

use common::*;
use k8s_openapi::api::core::v1::Service;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn service_json(spec: Value, current: Option<&Value>) -> Value {
    let memcached = cr(spec);
    build_json(current, |c: Option<Service>| build_service(&memcached, c))
}

fn seed_minimal_service() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "my-cache",
            "namespace": "default",
            "labels": standard_labels("my-cache"),
            "ownerReferences": [owner_reference("my-cache")],
        },
        "spec": {
            "clusterIP": "None",
            "selector": standard_labels("my-cache"),
            "ports": [
                { "name": "memcached", "port": 11211, "targetPort": "memcached", "protocol": "TCP" }
            ],
        },
    })
}

#[test]
fn seed_minimal_cr_produces_exactly_the_seed_service() {
    let service = rendered(&cr_value(json!({})), "Service").expect("the Service is always rendered");
    assert_eq!(service, seed_minimal_service());
}

#[test]
fn seed_cr_with_custom_annotations_adds_exactly_those_annotations() {
    let spec = json!({ "service": { "annotations": {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "11211",
    }}});
    let service = rendered(&cr_value(spec), "Service").unwrap();
    let expected = merge(
        seed_minimal_service(),
        json!({ "metadata": { "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "11211",
        }}}),
    );
    assert_eq!(service, expected);
}

#[test]
fn builder_sets_no_owner_reference_but_everything_else_the_seed_shows() {
    let service = service_json(json!({}), None);
    let mut expected = seed_minimal_service();
    expected["metadata"].as_object_mut().unwrap().remove("ownerReferences");
    assert_eq!(service, expected);
}

/// Seed table "CR State → Service Annotations", each row on a new Service and
/// on one that already carries annotations (replaced wholesale, never merged).
#[test]
fn annotations_follow_the_seed_table_and_are_replaced_wholesale() {
    let existing = json!({ "metadata": { "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "prometheus.io/scrape": "false",
        "stale": "x",
    }}});
    let cases: [(&str, Value, Value); 5] = [
        ("spec.service is nil", json!({}), Value::Null),
        ("spec.service is empty", json!({ "service": {} }), Value::Null),
        ("spec.service.annotations empty", json!({ "service": { "annotations": {} } }), Value::Null),
        (
            "spec.service.annotations set",
            json!({ "service": { "annotations": { "prometheus.io/scrape": "true", "a/b": "c" } } }),
            json!({ "prometheus.io/scrape": "true", "a/b": "c" }),
        ),
        (
            "one annotation",
            json!({ "service": { "annotations": { "service.beta.kubernetes.io/x": "1" } } }),
            json!({ "service.beta.kubernetes.io/x": "1" }),
        ),
    ];
    for (row, spec, want) in cases {
        let fresh = service_json(spec.clone(), None);
        assert_eq!(at(&fresh, "/metadata/annotations"), &want, "{row}: new Service");

        let current = merge(service_json(json!({}), None), existing.clone());
        let updated = service_json(spec, Some(&current));
        assert_eq!(at(&updated, "/metadata/annotations"), &want, "{row}: existing annotations must be replaced");
    }
}

#[test]
fn labels_and_selector_are_the_standard_labels_of_the_cr() {
    for (name, namespace) in [("my-cache", "default"), ("sessions", "prod"), ("a", "kube-system")] {
        let memcached = memcached(json!({
            "apiVersion": API_VERSION, "kind": "Memcached",
            "metadata": { "name": name, "namespace": namespace }, "spec": {},
        }));
        let service = to_value(&build_service(&memcached, None));
        assert_eq!(service["metadata"]["name"], name);
        assert_eq!(service["metadata"]["namespace"], namespace);
        assert_eq!(service["metadata"]["labels"], standard_labels(name), "{name}");
        assert_eq!(service["spec"]["selector"], standard_labels(name), "{name}");
        assert_eq!(service["spec"]["clusterIP"], "None");
    }
}

/// SPEC: memcached always, memcached-tls 11212 with TLS, metrics 9150 with
/// monitoring; targetPort by name.
#[test]
fn ports_follow_tls_and_monitoring() {
    let tls = json!({ "enabled": true, "certificateSecretRef": { "name": "memcached-tls" } });
    let cases = [
        ("plain", json!({}), vec![("memcached", 11211)]),
        ("tls", json!({ "security": { "tls": tls } }), vec![("memcached", 11211), ("memcached-tls", 11212)]),
        (
            "tls disabled",
            json!({ "security": { "tls": { "enabled": false, "certificateSecretRef": { "name": "x" } } } }),
            vec![("memcached", 11211)],
        ),
        ("monitoring", json!({ "monitoring": { "enabled": true } }), vec![("memcached", 11211), ("metrics", 9150)]),
        ("monitoring disabled", json!({ "monitoring": { "enabled": false } }), vec![("memcached", 11211)]),
        (
            "tls and monitoring",
            json!({ "security": { "tls": tls }, "monitoring": { "enabled": true } }),
            vec![("memcached", 11211), ("memcached-tls", 11212), ("metrics", 9150)],
        ),
    ];
    for (row, spec, want) in cases {
        let service = service_json(spec, None);
        let want: Vec<Value> = want
            .into_iter()
            .map(|(name, port)| json!({ "name": name, "port": port, "targetPort": name, "protocol": "TCP" }))
            .collect();
        assert_eq!(service["spec"]["ports"], Value::Array(want), "{row}");
    }
}

/// Runtime: enabling or disabling a feature on an existing Service gives the
/// same Service as building for the new spec from nothing.
#[test]
fn changing_the_spec_updates_an_existing_service() {
    let tls = json!({ "security": { "tls": { "enabled": true, "certificateSecretRef": { "name": "t" } } } });
    let monitoring = json!({ "monitoring": { "enabled": true } });
    let annotated = json!({ "service": { "annotations": { "a": "1" } } });
    let all = merge(merge(tls.clone(), monitoring.clone()), annotated.clone());
    let specs = [json!({}), tls, monitoring, annotated, all];
    for from in &specs {
        for to in &specs {
            let current = service_json(from.clone(), None);
            let updated = service_json(to.clone(), Some(&current));
            assert_eq!(updated, service_json(to.clone(), None), "from {from} to {to}");
        }
    }
}

#[test]
fn reconciling_twice_with_the_same_spec_changes_nothing() {
    let specs = [
        json!({}),
        json!({ "service": { "annotations": { "a": "b" } }, "monitoring": { "enabled": true } }),
        json!({ "security": { "tls": { "enabled": true, "certificateSecretRef": { "name": "t" } } } }),
    ];
    for spec in specs {
        let memcached = cr(spec);
        assert_idempotent(|c| build_service(&memcached, c));
    }
}

#[test]
fn external_drift_is_corrected() {
    let spec = json!({ "service": { "annotations": { "keep": "me" } }, "monitoring": { "enabled": true } });
    let want = service_json(spec.clone(), None);
    let drifts = [
        ("selector edited", json!({ "spec": { "selector": { "app.kubernetes.io/instance": "other", "x": "y" } } })),
        (
            "ports replaced",
            json!({ "spec": { "ports": [{ "name": "x", "port": 1, "targetPort": 2, "protocol": "UDP" }] } }),
        ),
        ("annotation added and removed", json!({ "metadata": { "annotations": { "keep": null, "added": "1" } } })),
        ("standard label overwritten", json!({ "metadata": { "labels": { "app.kubernetes.io/name": "redis" } } })),
        ("extra label added", json!({ "metadata": { "labels": { "team": "x" } } })),
        ("clusterIP removed", json!({ "spec": { "clusterIP": null } })),
    ];
    for (row, drift) in drifts {
        let drifted = merge(want.clone(), drift);
        assert_ne!(drifted, want, "{row}: the drift must change something");
        assert_eq!(service_json(spec.clone(), Some(&drifted)), want, "{row}");
    }
}

/// A Service as the API server returns it: the builder keeps what the
/// server filled in, and building again from its output changes nothing.
#[test]
fn server_filled_fields_survive_and_the_result_is_a_fixed_point() {
    let server = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "my-cache",
            "namespace": "default",
            "uid": "0b8c1c2e-1111-2222-3333-444455556666",
            "resourceVersion": "4242",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": standard_labels("my-cache"),
            "ownerReferences": [merge(owner_reference("my-cache"), json!({ "uid": "cr-uid" }))],
        },
        "spec": {
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "ipFamilies": ["IPv4", "IPv6"],
            "ipFamilyPolicy": "RequireDualStack",
            "sessionAffinity": "None",
            "type": "ClusterIP",
            "internalTrafficPolicy": "Cluster",
            "publishNotReadyAddresses": false,
            "selector": standard_labels("my-cache"),
            "ports": [{ "name": "memcached", "port": 11211, "targetPort": "memcached", "protocol": "TCP" }],
        },
        "status": { "loadBalancer": {} },
    });
    for spec in [json!({}), json!({ "monitoring": { "enabled": true }, "service": { "annotations": { "a": "b" } } })] {
        let built = service_json(spec.clone(), Some(&server));
        assert_subset(
            &built,
            &json!({
                "metadata": {
                    "uid": "0b8c1c2e-1111-2222-3333-444455556666",
                    "resourceVersion": "4242",
                    "creationTimestamp": "2024-01-01T00:00:00Z",
                    "ownerReferences": [merge(owner_reference("my-cache"), json!({ "uid": "cr-uid" }))],
                },
                "spec": {
                    "clusterIP": "None",
                    "clusterIPs": ["None"],
                    "ipFamilies": ["IPv4", "IPv6"],
                    "ipFamilyPolicy": "RequireDualStack",
                    "sessionAffinity": "None",
                    "type": "ClusterIP",
                    "internalTrafficPolicy": "Cluster",
                    "publishNotReadyAddresses": false,
                },
                "status": { "loadBalancer": {} },
            }),
        );
        assert_eq!(service_json(spec, Some(&built)), built, "fixed point");
    }
    // Unchanged spec on the server's own answer: nothing to write at all.
    assert_eq!(service_json(json!({}), Some(&server)), server);
}

#[test]
fn the_service_is_always_wanted() {
    for spec in [json!({}), json!({ "replicas": 0 }), json!({ "monitoring": { "enabled": false } })] {
        let cr = cr_value(spec);
        assert!(desired("Service", &cr, None, &[]).is_some());
        assert!(rendered_kinds(&cr).contains(&"Service".to_owned()));
    }
}
