//! The NetworkPolicy (seed 004).

mod common;

use common::*;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use memcached_logic::guards;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn policy(spec: Value, current: Option<&Value>) -> Value {
    let memcached = cr(spec);
    build_json(current, |c: Option<NetworkPolicy>| build_network_policy(&memcached, c))
}

fn tls() -> Value {
    json!({ "enabled": true, "certificateSecretRef": { "name": "memcached-tls" } })
}

fn enabled(extra_network_policy: Value) -> Value {
    json!({ "replicas": 3, "security": { "networkPolicy": merge(json!({ "enabled": true }), extra_network_policy) } })
}

fn tcp_ports(ports: &[i32]) -> Value {
    Value::Array(ports.iter().map(|p| json!({ "protocol": "TCP", "port": p })).collect())
}

fn seed_default_policy() -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": "my-cache",
            "namespace": "default",
            "labels": standard_labels("my-cache"),
            "ownerReferences": [owner_reference("my-cache")],
        },
        "spec": {
            "podSelector": { "matchLabels": standard_labels("my-cache") },
            "policyTypes": ["Ingress"],
            "ingress": [{ "ports": [{ "protocol": "TCP", "port": 11211 }] }],
        },
    })
}

#[test]
fn seed_network_policy_with_defaults_allows_all_sources() {
    let got = rendered(&cr_value(enabled(json!({}))), "NetworkPolicy").expect("rendered");
    assert_eq!(got, seed_default_policy());
    assert!(got["spec"]["ingress"][0].get("from").is_none(), "no from: all sources allowed");
}

#[test]
fn seed_namespace_selector() {
    let peers = json!([{ "namespaceSelector": { "matchLabels": { "env": "production" } } }]);
    let got = rendered(&cr_value(enabled(json!({ "allowedSources": peers.clone() }))), "NetworkPolicy").unwrap();
    assert_eq!(got["spec"]["ingress"], json!([{ "from": peers, "ports": tcp_ports(&[11211]) }]));
}

#[test]
fn seed_pod_selector() {
    let peers = json!([{ "podSelector": { "matchLabels": { "app": "my-webapp" } } }]);
    let got = rendered(&cr_value(enabled(json!({ "allowedSources": peers.clone() }))), "NetworkPolicy").unwrap();
    assert_eq!(got["spec"]["ingress"], json!([{ "from": peers, "ports": tcp_ports(&[11211]) }]));
}

#[test]
fn seed_monitoring_enabled_opens_the_metrics_port() {
    let spec = merge(enabled(json!({})), json!({ "monitoring": { "enabled": true } }));
    let got = rendered(&cr_value(spec), "NetworkPolicy").unwrap();
    assert_eq!(got["spec"]["ingress"], json!([{ "ports": tcp_ports(&[11211, 9150]) }]));
}

#[test]
fn seed_tls_enabled_opens_the_tls_port() {
    let spec = merge(enabled(json!({})), json!({ "security": { "tls": tls() } }));
    let got = rendered(&cr_value(spec), "NetworkPolicy").unwrap();
    assert_eq!(got["spec"]["ingress"], json!([{ "ports": tcp_ports(&[11211, 11212]) }]));
}

#[test]
fn seed_full_security_configuration() {
    let peer = json!({
        "namespaceSelector": { "matchLabels": { "env": "production" } },
        "podSelector": { "matchLabels": { "app": "my-webapp" } },
    });
    let spec = json!({
        "replicas": 3,
        "monitoring": { "enabled": true },
        "security": { "tls": tls(), "networkPolicy": { "enabled": true, "allowedSources": [peer.clone()] } },
    });
    let got = rendered(&cr_value(spec), "NetworkPolicy").unwrap();
    let mut expected = seed_default_policy();
    expected["spec"]["ingress"] = json!([{ "from": [peer], "ports": tcp_ports(&[11211, 11212, 9150]) }]);
    assert_eq!(got, expected);
}

#[test]
fn seed_network_policy_disabled_by_default() {
    let cr = json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "my-cache" },
        "spec": { "replicas": 3 },
    });
    assert!(!guards::network_policy_enabled(&memcached(cr.clone())));
    assert!(!rendered_kinds(&cr).contains(&"NetworkPolicy".to_owned()));
    assert_eq!(desired("NetworkPolicy", &cr, None, &[]), None);
}

/// Seed "Skip Logic".
#[test]
fn guard_follows_the_skip_rules() {
    let cases = [
        ("security is nil", json!({}), false),
        ("networkPolicy is nil", json!({ "security": {} }), false),
        ("networkPolicy is nil, tls on", json!({ "security": { "tls": tls() } }), false),
        ("enabled false", json!({ "security": { "networkPolicy": { "enabled": false } } }), false),
        ("enabled omitted", json!({ "security": { "networkPolicy": { "allowedSources": [] } } }), false),
        ("enabled true", json!({ "security": { "networkPolicy": { "enabled": true } } }), true),
    ];
    for (row, spec, want) in cases {
        let cr = cr_value(spec);
        assert_eq!(guards::network_policy_enabled(&memcached(cr.clone())), want, "{row}: guard");
        assert_eq!(memcached_logic::exports::network_policy_enabled(&text(&cr)).unwrap(), want, "{row}: export");
        assert_eq!(desired("NetworkPolicy", &cr, None, &[]).is_some(), want, "{row}: desired");
    }
}

/// Seed table "Ingress Ports": 11211 always, 11212 with TLS, 9150 with
/// monitoring, all in one rule.
#[test]
fn ingress_ports_follow_the_seed_table() {
    let cases = [
        ("neither", json!({}), vec![11211]),
        ("tls", json!({ "security": { "tls": tls() } }), vec![11211, 11212]),
        ("tls disabled", json!({ "security": { "tls": { "enabled": false } } }), vec![11211]),
        ("monitoring", json!({ "monitoring": { "enabled": true } }), vec![11211, 9150]),
        ("monitoring disabled", json!({ "monitoring": { "enabled": false, "serviceMonitor": {} } }), vec![11211]),
        ("both", json!({ "monitoring": { "enabled": true }, "security": { "tls": tls() } }), vec![11211, 11212, 9150]),
    ];
    for (row, extra, ports) in cases {
        let got = policy(merge(enabled(json!({})), extra), None);
        let rules = got["spec"]["ingress"].as_array().unwrap();
        assert_eq!(rules.len(), 1, "{row}: a single ingress rule");
        assert_eq!(rules[0]["ports"], tcp_ports(&ports), "{row}");
    }
}

/// Seed table "Ingress From": nil or empty → no `from`; a list → exactly it.
#[test]
fn ingress_from_follows_the_allowed_sources_table() {
    let ip_block = json!({ "ipBlock": { "cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"] } });
    let ns = json!({ "namespaceSelector": { "matchLabels": { "env": "production" } } });
    let pods = json!({ "podSelector": { "matchLabels": { "app": "web" } } });
    let cases = [
        ("allowedSources omitted", json!({}), None),
        ("allowedSources empty", json!({ "allowedSources": [] }), None),
        ("one namespaceSelector", json!({ "allowedSources": [ns.clone()] }), Some(json!([ns.clone()]))),
        ("one podSelector", json!({ "allowedSources": [pods.clone()] }), Some(json!([pods.clone()]))),
        ("one ipBlock", json!({ "allowedSources": [ip_block.clone()] }), Some(json!([ip_block.clone()]))),
        (
            "several peers keep their order",
            json!({ "allowedSources": [ip_block.clone(), ns.clone(), pods.clone()] }),
            Some(json!([ip_block, ns, pods])),
        ),
    ];
    for (row, network_policy, want) in cases {
        let got = policy(enabled(network_policy), None);
        let rule = &got["spec"]["ingress"][0];
        assert_eq!(rule.get("from").cloned(), want, "{row}");
        assert_eq!(rule["ports"], tcp_ports(&[11211]), "{row}: ports apply alike");
    }
}

#[test]
fn labels_pod_selector_and_policy_types() {
    let memcached = memcached(json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "sessions", "namespace": "prod" },
        "spec": enabled(json!({})),
    }));
    let got = to_value(&build_network_policy(&memcached, None));
    assert_eq!(got["metadata"]["name"], "sessions");
    assert_eq!(got["metadata"]["namespace"], "prod");
    assert_eq!(got["metadata"]["labels"], standard_labels("sessions"));
    assert_eq!(got["spec"]["podSelector"], json!({ "matchLabels": standard_labels("sessions") }));
    assert_eq!(got["spec"]["policyTypes"], json!(["Ingress"]), "ingress only: egress unrestricted");
    assert!(got["spec"].get("egress").is_none());
}

/// Seed "Runtime Behavior": each change on the existing NetworkPolicy.
#[test]
fn runtime_changes_update_the_existing_network_policy() {
    let peers = json!([{ "podSelector": { "matchLabels": { "app": "web" } } }]);
    let base = enabled(json!({}));
    let with_monitoring = merge(base.clone(), json!({ "monitoring": { "enabled": true } }));
    let with_tls = merge(base.clone(), json!({ "security": { "tls": tls() } }));
    let with_sources = enabled(json!({ "allowedSources": peers.clone() }));
    let cases = [
        ("enable monitoring", base.clone(), with_monitoring.clone(), json!([{ "ports": tcp_ports(&[11211, 9150]) }])),
        (
            "disable monitoring",
            with_monitoring.clone(),
            merge(with_monitoring, json!({ "monitoring": { "enabled": false } })),
            json!([{ "ports": tcp_ports(&[11211]) }]),
        ),
        ("enable TLS", base.clone(), with_tls.clone(), json!([{ "ports": tcp_ports(&[11211, 11212]) }])),
        (
            "disable TLS",
            with_tls.clone(),
            merge(with_tls, json!({ "security": { "tls": { "enabled": false } } })),
            json!([{ "ports": tcp_ports(&[11211]) }]),
        ),
        (
            "set allowedSources",
            base.clone(),
            with_sources.clone(),
            json!([{ "from": peers, "ports": tcp_ports(&[11211]) }]),
        ),
        (
            "clear allowedSources",
            with_sources.clone(),
            enabled(json!({ "allowedSources": [] })),
            json!([{ "ports": tcp_ports(&[11211]) }]),
        ),
        ("remove allowedSources", with_sources, base, json!([{ "ports": tcp_ports(&[11211]) }])),
    ];
    for (row, from, to, ingress) in cases {
        let current = policy(from, None);
        let updated = policy(to, Some(&current));
        assert_ne!(updated, current, "{row}: must update");
        assert_eq!(updated["spec"]["ingress"], ingress, "{row}");
    }
}

/// SPEC deliberate change: disabling (or removing security) makes the object unwanted.
#[test]
fn disabling_makes_the_network_policy_unwanted_and_it_is_owned_by_the_cr() {
    let on = cr_value(enabled(json!({})));
    let current = desired("NetworkPolicy", &on, None, &[]).expect("wanted");
    assert_eq!(current["metadata"]["ownerReferences"], json!([owner_reference("my-cache")]));
    for (row, cr) in [
        (
            "enabled: false",
            merge(on.clone(), json!({ "spec": { "security": { "networkPolicy": { "enabled": false } } } })),
        ),
        ("security removed", merge(on.clone(), json!({ "spec": { "security": null } }))),
    ] {
        assert_eq!(desired("NetworkPolicy", &cr, Some(&current), &[]), None, "{row}");
    }
}

#[test]
fn reconciling_twice_with_the_same_spec_changes_nothing() {
    let specs = [
        enabled(json!({})),
        merge(
            enabled(json!({ "allowedSources": [{ "ipBlock": { "cidr": "10.0.0.0/8" } }] })),
            json!({ "monitoring": { "enabled": true }, "security": { "tls": tls() } }),
        ),
    ];
    for spec in specs {
        let memcached = cr(spec);
        assert_idempotent(|c| build_network_policy(&memcached, c));
    }
}

#[test]
fn external_drift_is_corrected() {
    let spec = enabled(json!({ "allowedSources": [{ "podSelector": { "matchLabels": { "app": "web" } } }] }));
    let want = policy(spec.clone(), None);
    let drifts = [
        ("port added", json!({ "spec": { "ingress": [{ "ports": [{ "port": 22, "protocol": "TCP" }] }] } })),
        ("from removed", json!({ "spec": { "ingress": [{ "ports": [{ "port": 11211, "protocol": "TCP" }] }] } })),
        ("podSelector emptied", json!({ "spec": { "podSelector": { "matchLabels": null } } })),
        ("policyTypes changed", json!({ "spec": { "policyTypes": ["Ingress", "Egress"] } })),
        ("labels changed", json!({ "metadata": { "labels": { "app.kubernetes.io/managed-by": "me" } } })),
    ];
    for (row, drift) in drifts {
        let drifted = merge(want.clone(), drift);
        assert_ne!(drifted, want, "{row}");
        assert_eq!(policy(spec.clone(), Some(&drifted)), want, "{row}");
    }
}

#[test]
fn server_filled_fields_survive_and_the_result_is_a_fixed_point() {
    let spec = enabled(json!({}));
    let server = merge(
        policy(spec.clone(), None),
        json!({ "metadata": {
            "uid": "u", "resourceVersion": "9", "generation": 1,
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "ownerReferences": [merge(owner_reference("my-cache"), json!({ "uid": "cr-uid" }))],
        }}),
    );
    let built = policy(spec.clone(), Some(&server));
    assert_eq!(built, server);
    assert_eq!(policy(spec, Some(&built)), built);
}
