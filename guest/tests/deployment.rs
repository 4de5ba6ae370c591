//! The Deployment (SPEC "Deployment"; seed 002's CreateOrUpdate behaviour).

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const SECRET_HASH: &str = "memcached.c5c3.io/secret-hash";
const RESTART_TRIGGER: &str = "memcached.c5c3.io/restart-trigger";

fn deployment(spec: Value, current: Option<&Value>, secrets: &[Secret]) -> Value {
    deployment_of(&cr_value(spec), current, secrets)
}

fn deployment_of(cr: &Value, current: Option<&Value>, secrets: &[Secret]) -> Value {
    let memcached = memcached(cr.clone());
    build_json(current, |c: Option<Deployment>| build_deployment(&memcached, c, secrets))
}

fn pod(deployment: &Value) -> &Value {
    at(deployment, "/spec/template/spec")
}

fn container<'a>(deployment: &'a Value, name: &str) -> &'a Value {
    pod(deployment)["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name} in {deployment}"))
}

fn container_names(deployment: &Value) -> Vec<String> {
    pod(deployment)["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_owned()).collect()
}

fn pod_annotation<'a>(deployment: &'a Value, key: &str) -> Option<&'a str> {
    at(deployment, "/spec/template/metadata/annotations").get(key).and_then(Value::as_str)
}

fn sasl() -> Value {
    json!({ "enabled": true, "credentialsSecretRef": { "name": "sasl-secret" } })
}

fn tls(client_cert: bool) -> Value {
    json!({ "enabled": true, "certificateSecretRef": { "name": "tls-secret" }, "enableClientCert": client_cert })
}

fn with_version(name: &str, version: Option<&str>) -> Value {
    let mut labels = standard_labels(name);
    if let Some(version) = version {
        labels["app.kubernetes.io/version"] = json!(version);
    }
    labels
}

// ---- labels, selector, replicas, strategy ----

#[test]
fn labels_carry_the_image_tag_as_version_and_the_selector_only_the_standard_labels() {
    let cases = [
        (None, Some("1.6")),
        (Some("memcached:1.6"), Some("1.6")),
        (Some("memcached:1.6.38-alpine"), Some("1.6.38-alpine")),
        (Some("registry.example.com:5000/cache/memcached:1.6.21"), Some("1.6.21")),
        (Some("registry.example.com:5000/cache/memcached"), None),
        (Some("memcached"), None),
        (Some("memcached@sha256:0123456789abcdef"), None),
        (Some("memcached:1.6@sha256:0123456789abcdef"), None),
        (Some("memcached:-bad-"), None),
    ];
    for (image, version) in cases {
        let spec = match image {
            Some(image) => json!({ "image": image }),
            None => json!({}),
        };
        let got = deployment(spec, None, &[]);
        let want = with_version("my-cache", version);
        assert_eq!(got["metadata"]["labels"], want, "{image:?}: metadata labels");
        assert_eq!(at(&got, "/spec/template/metadata/labels"), &want, "{image:?}: pod labels = metadata labels");
        assert_eq!(got["spec"]["selector"], json!({ "matchLabels": standard_labels("my-cache") }), "{image:?}");
        assert_eq!(container(&got, "memcached")["image"], image.unwrap_or("memcached:1.6"), "{image:?}");
    }
}

#[test]
fn name_namespace_and_selector_follow_the_cr() {
    let memcached = memcached(json!({
        "apiVersion": API_VERSION, "kind": "Memcached",
        "metadata": { "name": "sessions", "namespace": "prod" }, "spec": {},
    }));
    let got = to_value(&build_deployment(&memcached, None, &[]));
    assert_eq!(got["metadata"]["name"], "sessions");
    assert_eq!(got["metadata"]["namespace"], "prod");
    assert_eq!(got["spec"]["selector"], json!({ "matchLabels": standard_labels("sessions") }));
    assert!(got["metadata"].get("ownerReferences").is_none(), "builders set no owner reference");
}

#[test]
fn replicas_default_to_one_and_autoscaling_keeps_the_current_count() {
    let auto =
        json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 10 } });
    // (row, spec, current replicas, want)
    let cases = [
        ("default", json!({}), None, json!(1)),
        ("explicit", json!({ "replicas": 3 }), None, json!(3)),
        ("zero", json!({ "replicas": 0 }), None, json!(0)),
        ("spec wins over current", json!({ "replicas": 2 }), Some(5), json!(2)),
        ("default wins over current", json!({}), Some(5), json!(1)),
        (
            "autoscaling disabled",
            json!({ "replicas": 2, "autoscaling": { "enabled": false, "maxReplicas": 9 } }),
            Some(5),
            json!(2),
        ),
        ("autoscaling, new Deployment", auto.clone(), None, Value::Null),
        ("autoscaling keeps what the HPA set", auto, Some(7), json!(7)),
    ];
    for (row, spec, current_replicas, want) in cases {
        let current =
            current_replicas.map(|r| merge(deployment(json!({}), None, &[]), json!({ "spec": { "replicas": r } })));
        let got = deployment(spec, current.as_ref(), &[]);
        assert_eq!(at(&got, "/spec/replicas"), &want, "{row}");
    }
}

#[test]
fn strategy_is_rolling_update_with_surge_1_and_no_unavailability() {
    let got = deployment(json!({ "replicas": 3 }), None, &[]);
    assert_eq!(
        got["spec"]["strategy"],
        json!({ "type": "RollingUpdate", "rollingUpdate": { "maxSurge": 1, "maxUnavailable": 0 } })
    );
}

// ---- the memcached container ----

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tls {
    Off,
    On,
    ClientCert,
}

/// The args exactly as SPEC lists them, for defaults in `-m -c -t -I`.
fn spec_args(verbosity: i32, sasl: bool, tls: Tls, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["-m", "64", "-c", "1024", "-t", "4", "-I", "1m"];
    match verbosity {
        1 => args.push("-v"),
        2 => args.push("-vv"),
        _ => {}
    }
    if sasl {
        args.extend(["-Y", "/etc/memcached/sasl/password-file"]);
    }
    if tls != Tls::Off {
        args.extend([
            "-Z",
            "-o",
            "ssl_chain_cert=/etc/memcached/tls/tls.crt",
            "-o",
            "ssl_key=/etc/memcached/tls/tls.key",
        ]);
    }
    if tls == Tls::ClientCert {
        args.extend(["-o", "ssl_ca_cert=/etc/memcached/tls/ca.crt"]);
    }
    args.extend(extra);
    args.into_iter().map(String::from).collect()
}

/// Every combination of verbosity 0/1/2 (and unset), SASL, TLS, TLS with
/// client certificates, and extraArgs.
#[test]
fn args_in_spec_order_for_every_combination() {
    let extras: [&[&str]; 3] = [&[], &["-R", "30"], &["--lock-memory"]];
    let mut count = 0;
    for verbosity in [None, Some(0), Some(1), Some(2)] {
        for with_sasl in [false, true] {
            for tls_mode in [Tls::Off, Tls::On, Tls::ClientCert] {
                for extra in extras {
                    let mut config = json!({});
                    if let Some(v) = verbosity {
                        config["verbosity"] = json!(v);
                    }
                    if !extra.is_empty() {
                        config["extraArgs"] = json!(extra);
                    }
                    let mut security = json!({});
                    if with_sasl {
                        security["sasl"] = sasl();
                    }
                    match tls_mode {
                        Tls::Off => {}
                        Tls::On => security["tls"] = tls(false),
                        Tls::ClientCert => security["tls"] = tls(true),
                    }
                    let spec = json!({ "memcached": config, "security": security });
                    let got = deployment(spec.clone(), None, &[]);
                    let want = spec_args(verbosity.unwrap_or(0), with_sasl, tls_mode, extra);
                    assert_eq!(strings(&container(&got, "memcached")["args"]), want, "{spec}");
                    count += 1;
                }
            }
        }
    }
    assert_eq!(count, 4 * 2 * 3 * 3);
}

#[test]
fn args_carry_the_configured_memcached_settings() {
    let cases = [
        (json!({}), ["64", "1024", "4", "1m"]),
        (json!({ "maxMemoryMB": 128 }), ["128", "1024", "4", "1m"]),
        (json!({ "maxConnections": 4096, "threads": 8 }), ["64", "4096", "8", "1m"]),
        (json!({ "maxItemSize": "512k" }), ["64", "1024", "4", "512k"]),
        (
            json!({ "maxMemoryMB": 65536, "maxConnections": 1, "threads": 128, "maxItemSize": "2m" }),
            ["65536", "1", "128", "2m"],
        ),
    ];
    for (config, [m, c, t, i]) in cases {
        let got = deployment(json!({ "memcached": config }), None, &[]);
        assert_eq!(strings(&container(&got, "memcached")["args"]), ["-m", m, "-c", c, "-t", t, "-I", i], "{config}");
    }
}

#[test]
fn client_cert_without_tls_adds_nothing() {
    let spec = json!({ "security": { "tls": { "enabled": false, "certificateSecretRef": { "name": "t" }, "enableClientCert": true } } });
    let got = deployment(spec, None, &[]);
    assert_eq!(strings(&container(&got, "memcached")["args"]), spec_args(0, false, Tls::Off, &[]));
    assert!(pod(&got).get("volumes").is_none());
}

#[test]
fn ports_follow_tls() {
    let plain = json!([{ "name": "memcached", "containerPort": 11211, "protocol": "TCP" }]);
    let with_tls = json!([
        { "name": "memcached", "containerPort": 11211, "protocol": "TCP" },
        { "name": "memcached-tls", "containerPort": 11212, "protocol": "TCP" },
    ]);
    let cases = [
        ("plain", json!({}), plain.clone()),
        ("monitoring does not touch memcached's ports", json!({ "monitoring": { "enabled": true } }), plain),
        ("tls", json!({ "security": { "tls": tls(false) } }), with_tls.clone()),
        ("tls with client certs", json!({ "security": { "tls": tls(true) } }), with_tls),
    ];
    for (row, spec, want) in cases {
        assert_eq!(container(&deployment(spec, None, &[]), "memcached")["ports"], want, "{row}");
    }
}

#[test]
fn probes_are_tcp_on_the_memcached_port() {
    let got = deployment(json!({}), None, &[]);
    let memcached = container(&got, "memcached");
    assert_eq!(
        memcached["livenessProbe"],
        json!({ "tcpSocket": { "port": "memcached" }, "initialDelaySeconds": 10, "periodSeconds": 10 })
    );
    assert_eq!(
        memcached["readinessProbe"],
        json!({ "tcpSocket": { "port": "memcached" }, "initialDelaySeconds": 5, "periodSeconds": 5 })
    );
}

#[test]
fn resources_come_from_the_spec() {
    let resources = json!({ "requests": { "cpu": "100m", "memory": "96Mi" }, "limits": { "memory": "128Mi" } });
    let exporter_resources = json!({ "requests": { "cpu": "10m" }, "limits": { "memory": "32Mi" } });
    let got = deployment(
        json!({ "resources": resources, "monitoring": { "enabled": true, "exporterResources": exporter_resources } }),
        None,
        &[],
    );
    assert_eq!(container(&got, "memcached")["resources"], resources);
    assert_eq!(container(&got, "exporter")["resources"], exporter_resources);

    let none = deployment(json!({ "monitoring": { "enabled": true } }), None, &[]);
    assert!(container(&none, "memcached").get("resources").is_none());
    assert!(container(&none, "exporter").get("resources").is_none());
}

#[test]
fn security_contexts_on_both_containers_and_the_pod() {
    let container_context = json!({
        "runAsNonRoot": true, "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
        "capabilities": { "drop": ["ALL"] },
    });
    let pod_context = json!({ "runAsUser": 11211, "fsGroup": 11211, "seccompProfile": { "type": "RuntimeDefault" } });
    let cases = [
        (
            "both",
            json!({ "podSecurityContext": pod_context, "containerSecurityContext": container_context }),
            Some(&pod_context),
            Some(&container_context),
        ),
        ("container only", json!({ "containerSecurityContext": container_context }), None, Some(&container_context)),
        ("pod only", json!({ "podSecurityContext": pod_context }), Some(&pod_context), None),
        ("neither", json!({}), None, None),
    ];
    for (row, security, want_pod, want_container) in cases {
        let got = deployment(json!({ "security": security, "monitoring": { "enabled": true } }), None, &[]);
        assert_eq!(pod(&got).get("securityContext"), want_pod, "{row}: pod");
        for name in ["memcached", "exporter"] {
            assert_eq!(container(&got, name).get("securityContext"), want_container, "{row}: {name}");
        }
    }
}

#[test]
fn graceful_shutdown_adds_a_pre_stop_sleep_and_the_grace_period() {
    // (row, gracefulShutdown, preStop sleep, terminationGracePeriodSeconds)
    let cases = [
        ("enabled with defaults", json!({ "enabled": true }), Some("10"), Some(30)),
        (
            "custom",
            json!({ "enabled": true, "preStopDelaySeconds": 5, "terminationGracePeriodSeconds": 60 }),
            Some("5"),
            Some(60),
        ),
        (
            "disabled",
            json!({ "enabled": false, "preStopDelaySeconds": 5, "terminationGracePeriodSeconds": 60 }),
            None,
            None,
        ),
    ];
    for (row, graceful, sleep, grace) in cases {
        let got = deployment(json!({ "highAvailability": { "gracefulShutdown": graceful } }), None, &[]);
        let lifecycle = container(&got, "memcached").get("lifecycle").cloned();
        let want_lifecycle = sleep.map(|s| json!({ "preStop": { "exec": { "command": ["sleep", s] } } }));
        assert_eq!(lifecycle, want_lifecycle, "{row}: lifecycle");
        assert_eq!(pod(&got).get("terminationGracePeriodSeconds"), grace.map(|g| json!(g)).as_ref(), "{row}: grace");
    }
}

#[test]
fn disabling_graceful_shutdown_removes_the_hook_and_a_custom_grace_period() {
    let on = |grace: i64| json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "terminationGracePeriodSeconds": grace } } });
    let off = json!({ "highAvailability": { "gracefulShutdown": { "enabled": false } } });
    // A custom period goes (the server then defaults it to 30); the server's
    // own default of 30 stays, so the server's answer is a fixed point.
    for (grace, want) in [(60, Value::Null), (30, json!(30))] {
        let current = deployment(on(grace), None, &[]);
        let got = deployment(off.clone(), Some(&current), &[]);
        assert!(container(&got, "memcached").get("lifecycle").is_none(), "grace {grace}");
        assert_eq!(at(&got, "/spec/template/spec/terminationGracePeriodSeconds"), &want, "grace {grace}");
    }
}

#[test]
fn exporter_sidecar_follows_monitoring() {
    let cases = [
        ("no monitoring", json!({}), None),
        ("disabled", json!({ "monitoring": { "enabled": false, "exporterImage": "x:1" } }), None),
        ("enabled", json!({ "monitoring": { "enabled": true } }), Some("prom/memcached-exporter:v0.15.4")),
        (
            "custom image",
            json!({ "monitoring": { "enabled": true, "exporterImage": "my/exporter:v1" } }),
            Some("my/exporter:v1"),
        ),
    ];
    for (row, spec, image) in cases {
        let got = deployment(spec, None, &[]);
        match image {
            None => assert_eq!(container_names(&got), ["memcached"], "{row}"),
            Some(image) => {
                assert_eq!(container_names(&got), ["memcached", "exporter"], "{row}");
                let exporter = container(&got, "exporter");
                assert_eq!(exporter["image"], image, "{row}");
                assert_eq!(
                    exporter["ports"],
                    json!([{ "name": "metrics", "containerPort": 9150, "protocol": "TCP" }]),
                    "{row}"
                );
            }
        }
    }
}

#[test]
fn secret_volumes_and_read_only_mounts() {
    let sasl_volume = json!({
        "name": "sasl-credentials",
        "secret": { "secretName": "sasl-secret", "items": [{ "key": "password-file", "path": "password-file" }] },
    });
    let tls_volume = |client: bool| {
        let mut items =
            vec![json!({ "key": "tls.crt", "path": "tls.crt" }), json!({ "key": "tls.key", "path": "tls.key" })];
        if client {
            items.push(json!({ "key": "ca.crt", "path": "ca.crt" }));
        }
        json!({ "name": "tls-certificates", "secret": { "secretName": "tls-secret", "items": items } })
    };
    let sasl_mount = json!({ "name": "sasl-credentials", "mountPath": "/etc/memcached/sasl", "readOnly": true });
    let tls_mount = json!({ "name": "tls-certificates", "mountPath": "/etc/memcached/tls", "readOnly": true });
    let cases = [
        ("none", json!({}), Value::Null, Value::Null),
        ("sasl", json!({ "sasl": sasl() }), json!([sasl_volume]), json!([sasl_mount])),
        ("tls", json!({ "tls": tls(false) }), json!([tls_volume(false)]), json!([tls_mount])),
        ("tls + client cert", json!({ "tls": tls(true) }), json!([tls_volume(true)]), json!([tls_mount])),
        (
            "sasl + tls",
            json!({ "sasl": sasl(), "tls": tls(true) }),
            json!([sasl_volume, tls_volume(true)]),
            json!([sasl_mount, tls_mount]),
        ),
        (
            "sasl disabled",
            json!({ "sasl": { "enabled": false, "credentialsSecretRef": { "name": "s" } } }),
            Value::Null,
            Value::Null,
        ),
    ];
    for (row, security, volumes, mounts) in cases {
        let got = deployment(json!({ "security": security, "monitoring": { "enabled": true } }), None, &[]);
        assert_eq!(at(&got, "/spec/template/spec/volumes"), &volumes, "{row}: volumes");
        assert_eq!(container(&got, "memcached").get("volumeMounts").unwrap_or(&Value::Null), &mounts, "{row}: mounts");
        assert!(container(&got, "exporter").get("volumeMounts").is_none(), "{row}: exporter mounts nothing");
    }
}

// ---- scheduling ----

fn anti_affinity_term(name: &str) -> Value {
    json!({
        "labelSelector": { "matchLabels": { "app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name } },
        "topologyKey": "kubernetes.io/hostname",
    })
}

#[test]
fn anti_affinity_soft_or_hard_in_both_spellings() {
    let soft = json!({ "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{ "weight": 100, "podAffinityTerm": anti_affinity_term("my-cache") }],
    }});
    let hard = json!({ "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [anti_affinity_term("my-cache")],
    }});
    let cases = [
        ("no highAvailability", None, Value::Null),
        ("highAvailability present: soft", Some(json!({})), soft.clone()),
        ("preset soft", Some(json!({ "antiAffinityPreset": "soft" })), soft.clone()),
        ("preset hard", Some(json!({ "antiAffinityPreset": "hard" })), hard.clone()),
        ("type preferred", Some(json!({ "antiAffinity": { "type": "preferred" } })), soft.clone()),
        ("type required", Some(json!({ "antiAffinity": { "type": "required" } })), hard.clone()),
        ("antiAffinity without type", Some(json!({ "antiAffinity": {} })), soft.clone()),
        ("both soft", Some(json!({ "antiAffinityPreset": "soft", "antiAffinity": { "type": "preferred" } })), soft),
        ("both hard", Some(json!({ "antiAffinityPreset": "hard", "antiAffinity": { "type": "required" } })), hard),
    ];
    for (row, ha, want) in cases {
        let spec = match ha {
            Some(ha) => json!({ "replicas": 3, "highAvailability": ha }),
            None => json!({ "replicas": 3 }),
        };
        let got = deployment(spec, None, &[]);
        assert_eq!(pod(&got).get("affinity").unwrap_or(&Value::Null), &want, "{row}");
    }
}

/// Passed as written, as the Go operator does: a selector added here would
/// change the pod template, so switching operators would roll every pod.
/// (Without a labelSelector a constraint counts no pods; README says so.)
#[test]
fn topology_spread_constraints_are_passed_as_written() {
    let explicit_selector = json!({ "matchLabels": { "tier": "cache" } });
    let constraints = json!([
        { "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway" },
        { "maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": explicit_selector },
    ]);
    let got =
        deployment(json!({ "highAvailability": { "topologySpreadConstraints": constraints.clone() } }), None, &[]);
    assert_eq!(pod(&got)["topologySpreadConstraints"], constraints);
    for spec in [
        json!({}),
        json!({ "highAvailability": {} }),
        json!({ "highAvailability": { "topologySpreadConstraints": [] } }),
    ] {
        assert!(pod(&deployment(spec.clone(), None, &[])).get("topologySpreadConstraints").is_none(), "{spec}");
    }
}

// ---- pod template annotations ----

/// SHA-256 hex over `name\0key\0value` entries, Secrets sorted by name, keys sorted.
fn spec_hash(entries: &[(&str, &str, &str)]) -> String {
    let mut entries = entries.to_vec();
    entries.sort();
    let mut hasher = Sha256::new();
    for (name, key, value) in entries {
        hasher.update(name.as_bytes());
        hasher.update([0u8]);
        hasher.update(key.as_bytes());
        hasher.update([0u8]);
        hasher.update(value.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn secret_hash_is_present_only_when_a_referenced_secret_has_data() {
    let both = json!({ "security": { "sasl": sasl(), "tls": tls(true) } });
    let sasl_data = secret("sasl-secret", &[("password-file", "user:pw")]);
    let tls_data = secret("tls-secret", &[("tls.key", "K"), ("tls.crt", "C"), ("ca.crt", "A")]);
    let cases: Vec<(&str, Value, Vec<Secret>, Option<String>)> = vec![
        ("no secrets referenced", json!({}), vec![sasl_data.clone()], None),
        ("referenced secrets missing", both.clone(), vec![], None),
        (
            "referenced secrets without data",
            both.clone(),
            vec![secret("sasl-secret", &[]), secret("tls-secret", &[])],
            None,
        ),
        ("an unreferenced secret is ignored", both.clone(), vec![secret("other", &[("k", "v")])], None),
        (
            "sasl only",
            json!({ "security": { "sasl": sasl() } }),
            vec![sasl_data.clone(), tls_data.clone()],
            Some(spec_hash(&[("sasl-secret", "password-file", "user:pw")])),
        ),
        (
            "one of two present",
            both.clone(),
            vec![tls_data.clone()],
            Some(spec_hash(&[
                ("tls-secret", "tls.key", "K"),
                ("tls-secret", "tls.crt", "C"),
                ("tls-secret", "ca.crt", "A"),
            ])),
        ),
        (
            "both",
            both.clone(),
            vec![sasl_data.clone(), tls_data.clone()],
            Some(spec_hash(&[
                ("sasl-secret", "password-file", "user:pw"),
                ("tls-secret", "tls.crt", "C"),
                ("tls-secret", "tls.key", "K"),
                ("tls-secret", "ca.crt", "A"),
            ])),
        ),
        (
            "tls disabled: its secret no longer counts",
            json!({ "security": { "sasl": sasl(), "tls": { "enabled": false, "certificateSecretRef": { "name": "tls-secret" } } } }),
            vec![sasl_data.clone(), tls_data.clone()],
            Some(spec_hash(&[("sasl-secret", "password-file", "user:pw")])),
        ),
    ];
    for (row, spec, secrets, want) in cases {
        let got = deployment(spec, None, &secrets);
        assert_eq!(pod_annotation(&got, SECRET_HASH).map(str::to_owned), want, "{row}");
        if let Some(hash) = pod_annotation(&got, SECRET_HASH) {
            assert_eq!(hash.len(), 64, "{row}: SHA-256 in hex");
        }
    }
}

#[test]
fn secret_hash_changes_with_any_secret_value_and_ignores_input_order() {
    let spec = json!({ "security": { "sasl": sasl(), "tls": tls(false) } });
    let hash =
        |secrets: &[Secret]| pod_annotation(&deployment(spec.clone(), None, secrets), SECRET_HASH).map(str::to_owned);
    let sasl_secret = secret("sasl-secret", &[("password-file", "a")]);
    let tls_secret = secret("tls-secret", &[("tls.crt", "c"), ("tls.key", "k")]);
    let base = hash(&[sasl_secret.clone(), tls_secret.clone()]).expect("hashed");

    assert_eq!(hash(&[tls_secret.clone(), sasl_secret.clone()]).unwrap(), base, "order of the Secrets");
    // A Secret whose keys arrive in another order (JSON) hashes the same.
    let reordered: Secret =
        from_value(json!({ "metadata": { "name": "tls-secret" }, "data": { "tls.key": "aw==", "tls.crt": "Yw==" } }));
    assert_eq!(hash(&[sasl_secret.clone(), reordered]).unwrap(), base, "order of the keys");

    let changes = [
        ("sasl value", vec![secret("sasl-secret", &[("password-file", "b")]), tls_secret.clone()]),
        ("tls value", vec![sasl_secret.clone(), secret("tls-secret", &[("tls.crt", "c"), ("tls.key", "K")])]),
        (
            "key added",
            vec![sasl_secret.clone(), secret("tls-secret", &[("tls.crt", "c"), ("tls.key", "k"), ("x", "")])],
        ),
        ("secret gone", vec![tls_secret.clone()]),
        // The separators keep the boundaries: moving a byte from key to value changes the hash.
        ("boundary moved", vec![secret("sasl-secret", &[("password-fil", "ea")]), tls_secret.clone()]),
    ];
    for (row, secrets) in changes {
        assert_ne!(hash(&secrets).unwrap(), base, "{row}");
    }
}

#[test]
fn secret_hash_follows_secret_changes_on_an_existing_deployment() {
    let spec = json!({ "security": { "sasl": sasl() } });
    let current = merge(
        deployment(spec.clone(), None, &[secret("sasl-secret", &[("password-file", "old")])]),
        json!({ "spec": { "template": { "metadata": { "annotations": { "kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z" } } } } }),
    );
    let rotated = deployment(spec.clone(), Some(&current), &[secret("sasl-secret", &[("password-file", "new")])]);
    assert_eq!(
        pod_annotation(&rotated, SECRET_HASH),
        Some(spec_hash(&[("sasl-secret", "password-file", "new")]).as_str())
    );
    assert_eq!(
        pod_annotation(&rotated, "kubectl.kubernetes.io/restartedAt"),
        Some("2024-01-01T00:00:00Z"),
        "foreign annotation kept"
    );

    let deleted = deployment(spec, Some(&rotated), &[]);
    assert_eq!(pod_annotation(&deleted, SECRET_HASH), None, "the annotation goes with the data");
    assert_eq!(pod_annotation(&deleted, "kubectl.kubernetes.io/restartedAt"), Some("2024-01-01T00:00:00Z"));
}

#[test]
fn secret_hash_through_the_desired_export() {
    let cr = cr_value(json!({ "security": { "sasl": sasl() } }));
    let related = [secret_json("sasl-secret", &[("password-file", "pw")]), secret_json("unrelated", &[("a", "b")])];
    let got = desired("Deployment", &cr, None, &related).unwrap();
    assert_eq!(pod_annotation(&got, SECRET_HASH), Some(spec_hash(&[("sasl-secret", "password-file", "pw")]).as_str()));
    let without = desired("Deployment", &cr, None, &[]).unwrap();
    assert_eq!(pod_annotation(&without, SECRET_HASH), None);
}

#[test]
fn restart_trigger_is_copied_from_the_cr_annotation() {
    let with_annotation = |value: Option<&str>| {
        let mut cr = cr_value(json!({}));
        if let Some(value) = value {
            cr["metadata"]["annotations"] = json!({ RESTART_TRIGGER: value, "unrelated": "x" });
        }
        cr
    };
    let first = deployment_of(&with_annotation(Some("1")), None, &[]);
    assert_eq!(pod_annotation(&first, RESTART_TRIGGER), Some("1"));
    assert_eq!(pod_annotation(&first, "unrelated"), None, "only the trigger is copied");

    let second = deployment_of(&with_annotation(Some("2")), Some(&first), &[]);
    assert_eq!(pod_annotation(&second, RESTART_TRIGGER), Some("2"));

    let removed = deployment_of(&with_annotation(None), Some(&second), &[]);
    assert_eq!(pod_annotation(&removed, RESTART_TRIGGER), None);
    assert!(at(&removed, "/spec/template/metadata").get("annotations").is_none());

    assert!(
        at(&deployment_of(&with_annotation(None), None, &[]), "/spec/template/metadata").get("annotations").is_none()
    );
}

// ---- CreateOrUpdate: runtime changes, idempotence, drift ----

fn feature_specs() -> Vec<(&'static str, Value)> {
    vec![
        ("minimal", json!({})),
        ("replicas", json!({ "replicas": 3 })),
        ("image", json!({ "image": "memcached:1.6.38-alpine" })),
        ("config", json!({ "memcached": { "maxMemoryMB": 256, "verbosity": 2, "extraArgs": ["-R", "30"] } })),
        ("resources", json!({ "resources": { "limits": { "memory": "512Mi" }, "requests": { "cpu": "250m" } } })),
        (
            "monitoring",
            json!({ "monitoring": { "enabled": true, "exporterResources": { "limits": { "memory": "32Mi" } } } }),
        ),
        ("sasl", json!({ "security": { "sasl": sasl() } })),
        ("tls", json!({ "security": { "tls": tls(true) } })),
        (
            "security contexts",
            json!({ "security": { "podSecurityContext": { "runAsUser": 1000 }, "containerSecurityContext": { "runAsNonRoot": true } } }),
        ),
        ("soft", json!({ "highAvailability": { "antiAffinityPreset": "soft" } })),
        ("hard", json!({ "highAvailability": { "antiAffinity": { "type": "required" } } })),
        (
            "spread",
            json!({ "highAvailability": { "topologySpreadConstraints": [{ "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule" }] } }),
        ),
        (
            "graceful",
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "terminationGracePeriodSeconds": 45 } } }),
        ),
        (
            "everything",
            json!({
                "replicas": 2,
                "memcached": { "verbosity": 1 },
                "resources": { "requests": { "memory": "1Gi" } },
                "monitoring": { "enabled": true },
                "security": { "sasl": sasl(), "tls": tls(true), "podSecurityContext": { "fsGroup": 1 }, "containerSecurityContext": { "privileged": false } },
                "highAvailability": {
                    "antiAffinityPreset": "hard",
                    "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 3, "terminationGracePeriodSeconds": 20 },
                    "topologySpreadConstraints": [{ "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway" }],
                },
            }),
        ),
    ]
}

/// Enabling, changing and disabling each feature on an existing Deployment
/// gives the Deployment a new CR would get (for every pair of specs).
#[test]
fn every_spec_change_on_an_existing_deployment_matches_a_fresh_build() {
    let secrets = [secret("sasl-secret", &[("password-file", "p")]), secret("tls-secret", &[("tls.crt", "c")])];
    for (from_row, from) in feature_specs() {
        let current = deployment(from, None, &secrets);
        for (to_row, to) in feature_specs() {
            let updated = deployment(to.clone(), Some(&current), &secrets);
            assert_eq!(updated, deployment(to, None, &secrets), "from {from_row} to {to_row}");
        }
    }
}

#[test]
fn reconciling_twice_with_the_same_spec_changes_nothing() {
    let secrets = [secret("sasl-secret", &[("password-file", "p")])];
    for (row, spec) in feature_specs() {
        let memcached = cr(spec);
        let first = build_deployment(&memcached, None, &secrets);
        let second = build_deployment(&memcached, Some(first.clone()), &secrets);
        assert_eq!(first, second, "{row}");
    }
}

#[test]
fn external_drift_is_corrected() {
    let (_, spec) = feature_specs().pop().expect("everything");
    let secrets = [secret("sasl-secret", &[("password-file", "p")])];
    let want = deployment(spec.clone(), None, &secrets);
    let mut memcached_drifted = container(&want, "memcached").clone();
    memcached_drifted["image"] = json!("memcached:evil");
    memcached_drifted["args"] = json!(["-m", "1"]);
    memcached_drifted["command"] = json!(["/bin/sh"]);
    memcached_drifted["ports"] = json!([{ "containerPort": 1 }]);
    memcached_drifted["livenessProbe"] =
        json!({ "httpGet": { "port": 80 }, "initialDelaySeconds": 99, "periodSeconds": 99 });
    memcached_drifted["readinessProbe"] = Value::Null;
    memcached_drifted["volumeMounts"] = json!([]);
    memcached_drifted["securityContext"] = json!({ "privileged": true });
    memcached_drifted["resources"] = json!({ "limits": { "cpu": "9" } });
    memcached_drifted["lifecycle"] = Value::Null;
    let drifts = [
        ("replicas", json!({ "spec": { "replicas": 9 } })),
        (
            "labels",
            json!({ "metadata": { "labels": { "app.kubernetes.io/version": "0.1", "app.kubernetes.io/instance": "x" } } }),
        ),
        ("selector", json!({ "spec": { "selector": { "matchLabels": { "x": "y" } } } })),
        ("strategy", json!({ "spec": { "strategy": { "type": "Recreate", "rollingUpdate": null } } })),
        (
            "pod labels",
            json!({ "spec": { "template": { "metadata": { "labels": { "app.kubernetes.io/name": "x" } } } } }),
        ),
        ("secret hash", json!({ "spec": { "template": { "metadata": { "annotations": { SECRET_HASH: "0" } } } } })),
        ("memcached container", json!({ "spec": { "template": { "spec": { "containers": [memcached_drifted] } } } })),
        (
            "containers reordered",
            json!({ "spec": { "template": { "spec": { "containers": [
            container(&want, "exporter").clone(), container(&want, "memcached").clone(),
        ] } } } }),
        ),
        (
            "exporter image",
            json!({ "spec": { "template": { "spec": { "containers": [
            container(&want, "memcached").clone(), merge(container(&want, "exporter").clone(), json!({ "image": "x", "ports": [] })),
        ] } } } }),
        ),
        ("volumes", json!({ "spec": { "template": { "spec": { "volumes": [{ "name": "x", "emptyDir": {} }] } } } })),
        ("affinity", json!({ "spec": { "template": { "spec": { "affinity": null } } } })),
        ("spread", json!({ "spec": { "template": { "spec": { "topologySpreadConstraints": null } } } })),
        (
            "pod security context",
            json!({ "spec": { "template": { "spec": { "securityContext": { "runAsUser": 0 } } } } }),
        ),
        ("grace period", json!({ "spec": { "template": { "spec": { "terminationGracePeriodSeconds": 1 } } } })),
    ];
    for (row, drift) in drifts {
        let drifted = merge(want.clone(), drift);
        assert_ne!(drifted, want, "{row}");
        assert_eq!(deployment(spec.clone(), Some(&drifted), &secrets), want, "{row}");
    }
}

// ---- mutate in place ----

/// What the API server adds to a Deployment the builder made: defaults on
/// the Deployment, pod, containers, probes and secret volumes, plus status.
fn server_shaped(built: &Value) -> Value {
    let mut server = merge(
        built.clone(),
        json!({
            "metadata": {
                "uid": "5f1c0a9e-0000-4000-8000-000000000001",
                "resourceVersion": "123456",
                "generation": 4,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "annotations": { "deployment.kubernetes.io/revision": "3" },
                "ownerReferences": [merge(owner_reference("my-cache"), json!({ "uid": "cr-uid" }))],
            },
            "spec": {
                "progressDeadlineSeconds": 600,
                "revisionHistoryLimit": 10,
                "template": { "spec": {
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                } },
            },
            "status": {
                "observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                "conditions": [{ "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "ok",
                                 "lastTransitionTime": "2024-01-01T00:00:00Z", "lastUpdateTime": "2024-01-01T00:00:00Z" }],
            },
        }),
    );
    let pod = server.pointer_mut("/spec/template/spec").unwrap().as_object_mut().unwrap();
    pod.entry("securityContext").or_insert(json!({}));
    pod.entry("terminationGracePeriodSeconds").or_insert(json!(30));
    for container in pod["containers"].as_array_mut().unwrap() {
        let container = container.as_object_mut().unwrap();
        container.insert("terminationMessagePath".into(), json!("/dev/termination-log"));
        container.insert("terminationMessagePolicy".into(), json!("File"));
        container.insert("imagePullPolicy".into(), json!("IfNotPresent"));
        container.entry("resources").or_insert(json!({}));
        for probe in ["livenessProbe", "readinessProbe"] {
            if let Some(Value::Object(probe)) = container.get_mut(probe) {
                probe.insert("timeoutSeconds".into(), json!(1));
                probe.insert("successThreshold".into(), json!(1));
                probe.insert("failureThreshold".into(), json!(3));
            }
        }
    }
    if let Some(Value::Array(volumes)) = pod.get_mut("volumes") {
        for volume in volumes {
            volume["secret"]["defaultMode"] = json!(420);
        }
    }
    server
}

#[test]
fn server_filled_fields_survive_and_the_result_is_a_fixed_point() {
    let secrets = [secret("sasl-secret", &[("password-file", "p")]), secret("tls-secret", &[("tls.crt", "c")])];
    for (row, spec) in feature_specs() {
        let server = server_shaped(&deployment(spec.clone(), None, &secrets));
        let built = deployment(spec.clone(), Some(&server), &secrets);
        assert_eq!(built, server, "{row}: the server's answer for an unchanged CR needs no write");
        assert_eq!(deployment(spec, Some(&built), &secrets), built, "{row}: fixed point");
    }
}

#[test]
fn server_filled_fields_survive_a_spec_change() {
    let secrets = [secret("sasl-secret", &[("password-file", "p")]), secret("tls-secret", &[("tls.crt", "c")])];
    let before = json!({ "security": { "sasl": sasl(), "tls": tls(false) }, "monitoring": { "enabled": true } });
    let after = json!({
        "image": "memcached:1.6.38",
        "memcached": { "threads": 8 },
        "security": { "sasl": sasl(), "tls": tls(true) },
        "monitoring": { "enabled": true, "exporterImage": "e:2" },
    });
    let server = server_shaped(&deployment(before, None, &secrets));
    let built = deployment(after.clone(), Some(&server), &secrets);

    assert_eq!(built["status"], server["status"]);
    assert_subset(
        &built,
        &json!({
            "metadata": {
                "uid": "5f1c0a9e-0000-4000-8000-000000000001",
                "resourceVersion": "123456",
                "annotations": { "deployment.kubernetes.io/revision": "3" },
                "ownerReferences": [merge(owner_reference("my-cache"), json!({ "uid": "cr-uid" }))],
            },
            "spec": {
                "progressDeadlineSeconds": 600,
                "revisionHistoryLimit": 10,
                "template": { "spec": {
                    "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                    "securityContext": {}, "terminationGracePeriodSeconds": 30,
                } },
            },
        }),
    );
    for name in ["memcached", "exporter"] {
        assert_subset(
            container(&built, name),
            &json!({ "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent", "resources": {} }),
        );
    }
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_subset(
            &container(&built, "memcached")[probe],
            &json!({ "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3 }),
        );
    }
    for volume in pod(&built)["volumes"].as_array().unwrap() {
        assert_eq!(volume["secret"]["defaultMode"], 420, "{volume}");
    }
    // The new spec itself took effect.
    assert_eq!(container(&built, "memcached")["image"], "memcached:1.6.38");
    assert_eq!(container(&built, "exporter")["image"], "e:2");
    assert_eq!(
        at(&built, "/spec/template/spec/volumes/1/secret/items/2"),
        &json!({ "key": "ca.crt", "path": "ca.crt" })
    );
    assert_eq!(deployment(after, Some(&built), &secrets), built, "fixed point");
}

/// Fields the server defaults are kept only while they hold the server's
/// default; the builder's own values still replace anything else.
#[test]
fn only_server_defaults_survive_where_the_operator_sets_nothing() {
    let current = merge(
        deployment(json!({}), None, &[]),
        json!({ "spec": { "template": { "spec": { "securityContext": { "runAsUser": 0 }, "terminationGracePeriodSeconds": 5 } } } }),
    );
    let got = deployment(json!({}), Some(&current), &[]);
    assert!(pod(&got).get("securityContext").is_none());
    assert!(pod(&got).get("terminationGracePeriodSeconds").is_none());
}
