//! The CRD on a real kube-apiserver (tests/control-plane), with
//! deploy/admission/'s MutatingAdmissionPolicy: both served versions; every
//! fixture and sample accepted; every OpenAPI bound, enum and CEL rule of the
//! CRD rejecting what it should, naming the field the problem is at; every
//! rule of the Go operator's validating webhook rejected at admission; and the
//! spec the API server stores equal to the module's `default`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, User};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use memcached_logic::api::SERVED_VERSIONS;
use serde_json::{Value, json};

fn memcached_resource(version: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("memcached.c5c3.io", version, "Memcached");
    ApiResource::from_gvk_with_plural(&gvk, "memcacheds")
}

/// The shared control plane with our CRDs and the defaulting policy, and a
/// fresh namespace; the API at the storage version.
async fn memcacheds(prefix: &str) -> Api<DynamicObject> {
    memcacheds_at(prefix, "v1beta1").await
}

/// As `memcacheds`, the API at `version`.
async fn memcacheds_at(prefix: &str, version: &str) -> Api<DynamicObject> {
    let plane = ControlPlane::shared();
    plane.install_crds().await.expect("installing the CRDs");
    let policy = control_plane::repo_root().join("deploy/admission/memcached-defaults.yaml");
    let policy = std::fs::read_to_string(&policy).expect("deploy/admission/memcached-defaults.yaml");
    plane.apply_yaml(&policy).await.expect("applying the MutatingAdmissionPolicy");
    let namespace = plane.create_namespace(prefix).await.expect("creating a namespace");
    let client = plane.client(User::Admin).await.expect("an admin client");
    let api = Api::namespaced_with(client, &namespace, &memcached_resource(version));
    policy_in_force(&api, version).await;
    api
}

/// The Memcacheds of `api`'s namespace through `version`.
async fn same_namespace_at(api: &Api<DynamicObject>, version: &str) -> Api<DynamicObject> {
    let client = ControlPlane::shared().client(User::Admin).await.expect("an admin client");
    Api::namespaced_with(client, api.namespace().expect("a namespace"), &memcached_resource(version))
}

/// A new policy takes a moment to reach the API server's admission chain:
/// waits until a dry run of an empty spec comes back with `replicas: 1`.
async fn policy_in_force(api: &Api<DynamicObject>, version: &str) {
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let probe = object(&format!("memcached.c5c3.io/{version}"), "Memcached", "probe", &json!({}));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = api.create(&dry_run, &probe).await.expect("a dry run of an empty spec");
        if stored.data["spec"]["replicas"] == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the MutatingAdmissionPolicy never applied: {:?}", stored.data);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An object of `kind` (`apiVersion` given) named `name` with `spec`.
fn object(api_version: &str, kind: &str, name: &str, spec: &Value) -> DynamicObject {
    let value = json!({ "apiVersion": api_version, "kind": kind, "metadata": { "name": name }, "spec": spec });
    serde_json::from_value(value).expect("a DynamicObject")
}

fn memcached(name: &str, spec: &Value) -> DynamicObject {
    memcached_at("v1beta1", name, spec)
}

fn memcached_at(version: &str, name: &str, spec: &Value) -> DynamicObject {
    object(&format!("memcached.c5c3.io/{version}"), "Memcached", name, spec)
}

fn cr_files() -> Vec<PathBuf> {
    let root = control_plane::repo_root();
    let mut files = Vec::new();
    for (folder, nested) in [(root.join("tests/fixtures"), true), (root.join("deploy/samples"), false)] {
        let entries = std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("listing {}: {e}", folder.display()));
        for entry in entries.flatten() {
            let path = if nested { entry.path().join("memcached.yaml") } else { entry.path() };
            if path.is_file() && path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_and_sample_is_accepted() {
    // Each through the version it is written in (the API server refuses a
    // body whose apiVersion is not the URL's).
    let beta = memcacheds_at("crd-accepts", "v1beta1").await;
    let alpha = same_namespace_at(&beta, "v1alpha1").await;
    let files = cr_files();
    assert!(files.len() >= 20, "expected the fixtures and samples, found {files:?}");
    let mut rejected = Vec::new();
    let mut created = 0;
    for (index, path) in files.iter().enumerate() {
        for document in memcached_tests::yaml_file(path).into_iter().filter(|d| d["kind"] == "Memcached") {
            let mut object: DynamicObject = serde_json::from_value(document).expect("a Memcached object");
            // Fixtures reuse names and pick namespaces; here each gets its own name in ours.
            let name = format!("cr-{index}");
            object.metadata.name = Some(name.clone());
            object.metadata.namespace = None;
            let api = if object.types.as_ref().is_some_and(|t| t.api_version.ends_with("/v1alpha1")) {
                &alpha
            } else {
                &beta
            };
            match api.create(&PostParams::default(), &object).await {
                Ok(stored) => {
                    created += 1;
                    assert_eq!(stored.metadata.name.as_deref(), Some(name.as_str()));
                    // The schema's defaults were applied on the way in.
                    assert!(stored.data["spec"]["image"].is_string(), "{}: no defaulted image", path.display());
                }
                Err(e) => rejected.push(format!("{}: {e}", path.display())),
            }
        }
    }
    assert!(rejected.is_empty(), "the API server rejected:\n{}", rejected.join("\n"));
    assert!(created >= files.len(), "every file holds a Memcached ({created} for {} files)", files.len());
}

/// One invalid spec, the field the API server must name, and a piece of its message.
struct Case {
    what: &'static str,
    spec: Value,
    field: &'static str,
    message: &'static str,
}

fn case(what: &'static str, spec: Value, field: &'static str, message: &'static str) -> Case {
    Case { what, spec, field, message }
}

fn items(count: usize, item: Value) -> Value {
    Value::Array(vec![item; count])
}

fn invalid_cases() -> Vec<Case> {
    let cpu_request = json!({ "requests": { "cpu": "100m" } });
    let long = |n: usize| "x".repeat(n);
    vec![
        // CEL rules (x-kubernetes-validations), one case each.
        case(
            "replicas with autoscaling",
            json!({ "replicas": 2, "resources": cpu_request, "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
            "spec.replicas",
            "must be absent when autoscaling is enabled",
        ),
        // A CEL fieldPath into a map comes back as `limits[memory]` (the
        // OpenAPI errors below say `limits.memory`).
        case(
            "memory limit below the cache",
            json!({ "resources": { "limits": { "memory": "64Mi" } } }),
            "spec.resources.limits[memory]",
            "must be at least memcached.maxMemoryMB + 32 MiB",
        ),
        case(
            "memory limit below a larger cache",
            json!({ "memcached": { "maxMemoryMB": 256 }, "resources": { "limits": { "memory": "256Mi" } } }),
            "spec.resources.limits[memory]",
            "must be at least memcached.maxMemoryMB + 32 MiB",
        ),
        case(
            "PDB minAvailable not below replicas",
            json!({ "replicas": 2, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 2 } } }),
            "spec.highAvailability.podDisruptionBudget.minAvailable",
            "an integer minAvailable must be below replicas",
        ),
        case(
            "PDB minAvailable not below autoscaling minReplicas",
            json!({ "resources": cpu_request, "autoscaling": { "enabled": true, "minReplicas": 2, "maxReplicas": 4 }, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 2 } } }),
            "spec.highAvailability.podDisruptionBudget.minAvailable",
            "an integer minAvailable must be below replicas",
        ),
        case(
            "CPU metric without a CPU request",
            json!({ "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
            "spec.resources.requests",
            "a CPU Utilization metric needs resources.requests.cpu",
        ),
        case(
            "autoscaling without maxReplicas",
            json!({ "resources": cpu_request, "autoscaling": { "enabled": true } }),
            "spec.autoscaling.maxReplicas",
            "maxReplicas is required when autoscaling is enabled",
        ),
        case(
            "minReplicas above maxReplicas",
            json!({ "resources": cpu_request, "autoscaling": { "enabled": true, "minReplicas": 5, "maxReplicas": 3 } }),
            "spec.autoscaling.minReplicas",
            "minReplicas must not exceed maxReplicas",
        ),
        case(
            "preset and type disagree",
            json!({ "highAvailability": { "antiAffinityPreset": "soft", "antiAffinity": { "type": "required" } } }),
            "spec.highAvailability.antiAffinity.type",
            "antiAffinityPreset and antiAffinity.type disagree",
        ),
        case(
            "grace period not above the preStop delay",
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 30 } } }),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            "must be greater than preStopDelaySeconds",
        ),
        case(
            "default grace period not above a longer delay",
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 45 } } }),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            "must be greater than preStopDelaySeconds",
        ),
        case(
            "PDB minAvailable and maxUnavailable",
            json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1, "maxUnavailable": 1 } } }),
            "spec.highAvailability.podDisruptionBudget.maxUnavailable",
            "mutually exclusive",
        ),
        case(
            "SASL without a Secret",
            json!({ "security": { "sasl": { "enabled": true } } }),
            "spec.security.sasl.credentialsSecretRef.name",
            "SASL needs credentialsSecretRef.name",
        ),
        case(
            "TLS with an empty Secret name",
            json!({ "security": { "tls": { "enabled": true, "certificateSecretRef": { "name": "" } } } }),
            "spec.security.tls.certificateSecretRef.name",
            "TLS needs certificateSecretRef.name",
        ),
        // OpenAPI ranges, lengths, patterns, enums and types.
        case("replicas above 64", json!({ "replicas": 65 }), "spec.replicas", "less than or equal to 64"),
        case("negative replicas", json!({ "replicas": -1 }), "spec.replicas", "greater than or equal to 0"),
        case("replicas as text", json!({ "replicas": "three" }), "spec.replicas", "must be of type integer"),
        case("empty image", json!({ "image": "" }), "spec.image", "at least 1 chars long"),
        case("image too long", json!({ "image": long(1025) }), "spec.image", "1024"),
        case(
            "maxMemoryMB below 16",
            json!({ "memcached": { "maxMemoryMB": 15 } }),
            "spec.memcached.maxMemoryMB",
            "greater than or equal to 16",
        ),
        case(
            "maxMemoryMB above 65536",
            json!({ "memcached": { "maxMemoryMB": 65537 } }),
            "spec.memcached.maxMemoryMB",
            "less than or equal to 65536",
        ),
        case(
            "maxConnections 0",
            json!({ "memcached": { "maxConnections": 0 } }),
            "spec.memcached.maxConnections",
            "greater than or equal to 1",
        ),
        case(
            "maxConnections above 65536",
            json!({ "memcached": { "maxConnections": 65537 } }),
            "spec.memcached.maxConnections",
            "less than or equal to 65536",
        ),
        case(
            "threads 0",
            json!({ "memcached": { "threads": 0 } }),
            "spec.memcached.threads",
            "greater than or equal to 1",
        ),
        case(
            "threads above 128",
            json!({ "memcached": { "threads": 129 } }),
            "spec.memcached.threads",
            "less than or equal to 128",
        ),
        case(
            "verbosity above 2",
            json!({ "memcached": { "verbosity": 3 } }),
            "spec.memcached.verbosity",
            "less than or equal to 2",
        ),
        case(
            "negative verbosity",
            json!({ "memcached": { "verbosity": -1 } }),
            "spec.memcached.verbosity",
            "greater than or equal to 0",
        ),
        case(
            "maxItemSize in gigabytes",
            json!({ "memcached": { "maxItemSize": "1g" } }),
            "spec.memcached.maxItemSize",
            "should match",
        ),
        case(
            "maxItemSize too long",
            json!({ "memcached": { "maxItemSize": format!("{}k", "1".repeat(16)) } }),
            "spec.memcached.maxItemSize",
            "16",
        ),
        case(
            "65 extraArgs",
            json!({ "memcached": { "extraArgs": items(65, json!("-v")) } }),
            "spec.memcached.extraArgs",
            "must have at most 64 items",
        ),
        case(
            "an extraArg too long",
            json!({ "memcached": { "extraArgs": [long(1025)] } }),
            "spec.memcached.extraArgs[0]",
            "1024",
        ),
        case(
            "antiAffinityPreset outside its enum",
            json!({ "highAvailability": { "antiAffinityPreset": "medium" } }),
            "spec.highAvailability.antiAffinityPreset",
            "Unsupported value",
        ),
        case(
            "antiAffinity.type outside its enum",
            json!({ "highAvailability": { "antiAffinity": { "type": "sometimes" } } }),
            "spec.highAvailability.antiAffinity.type",
            "Unsupported value",
        ),
        case(
            "17 topologySpreadConstraints",
            json!({ "highAvailability": { "topologySpreadConstraints": items(17, json!({ "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway" })) } }),
            "spec.highAvailability.topologySpreadConstraints",
            "must have at most 16 items",
        ),
        case(
            "preStopDelaySeconds 0",
            json!({ "highAvailability": { "gracefulShutdown": { "preStopDelaySeconds": 0 } } }),
            "spec.highAvailability.gracefulShutdown.preStopDelaySeconds",
            "greater than or equal to 1",
        ),
        case(
            "preStopDelaySeconds above 300",
            json!({ "highAvailability": { "gracefulShutdown": { "preStopDelaySeconds": 301 } } }),
            "spec.highAvailability.gracefulShutdown.preStopDelaySeconds",
            "less than or equal to 300",
        ),
        case(
            "terminationGracePeriodSeconds above 600",
            json!({ "highAvailability": { "gracefulShutdown": { "terminationGracePeriodSeconds": 601 } } }),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            "less than or equal to 600",
        ),
        case(
            "autoscaling maxReplicas above 1024",
            json!({ "autoscaling": { "maxReplicas": 1025 } }),
            "spec.autoscaling.maxReplicas",
            "less than or equal to 1024",
        ),
        case(
            "autoscaling minReplicas 0",
            json!({ "autoscaling": { "minReplicas": 0 } }),
            "spec.autoscaling.minReplicas",
            "greater than or equal to 1",
        ),
        case(
            "17 autoscaling metrics",
            json!({ "autoscaling": { "metrics": items(17, json!({ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 70 } } })) } }),
            "spec.autoscaling.metrics",
            "must have at most 16 items",
        ),
        case(
            "a memory limit that is no quantity",
            json!({ "resources": { "limits": { "memory": "lots" } } }),
            "spec.resources.limits.memory",
            "should match",
        ),
        case(
            "a CPU request that is no quantity",
            json!({ "resources": { "requests": { "cpu": "1 core" } } }),
            "spec.resources.requests.cpu",
            "should match",
        ),
        case(
            "17 resource claims",
            json!({ "resources": { "claims": items(17, json!({ "name": "gpu" })) } }),
            "spec.resources.claims",
            "must have at most 16 items",
        ),
        case(
            "empty exporterImage",
            json!({ "monitoring": { "exporterImage": "" } }),
            "spec.monitoring.exporterImage",
            "at least 1 chars long",
        ),
        case(
            "an exporter limit that is no quantity",
            json!({ "monitoring": { "exporterResources": { "limits": { "cpu": "lots" } } } }),
            "spec.monitoring.exporterResources.limits.cpu",
            "should match",
        ),
        case(
            "a scrape interval in words",
            json!({ "monitoring": { "serviceMonitor": { "interval": "30 seconds" } } }),
            "spec.monitoring.serviceMonitor.interval",
            "should match",
        ),
        case(
            "an empty scrapeTimeout",
            json!({ "monitoring": { "serviceMonitor": { "scrapeTimeout": "" } } }),
            "spec.monitoring.serviceMonitor.scrapeTimeout",
            "at least 1 chars long",
        ),
        case(
            "65 allowed sources",
            json!({ "security": { "networkPolicy": { "allowedSources": items(65, json!({ "podSelector": {} })) } } }),
            "spec.security.networkPolicy.allowedSources",
            "must have at most 64 items",
        ),
        case(
            "a SASL Secret name too long",
            json!({ "security": { "sasl": { "credentialsSecretRef": { "name": long(254) } } } }),
            "spec.security.sasl.credentialsSecretRef.name",
            "253",
        ),
        case(
            "a TLS Secret name too long",
            json!({ "security": { "tls": { "certificateSecretRef": { "name": long(254) } } } }),
            "spec.security.tls.certificateSecretRef.name",
            "253",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_specs_are_rejected_at_their_field() {
    assert_rejected(&invalid_cases(), "crd-rejects").await;
}

/// Sends each case (a dry run) through every served version; each must be
/// rejected with a 422 at the case's field with its message.
async fn assert_rejected(cases: &[Case], prefix: &str) {
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let mut failures = Vec::new();
    for version in SERVED_VERSIONS {
        let api = memcacheds_at(prefix, version).await;
        for case in cases {
            let what = format!("{version} {}", case.what);
            match api.create(&dry_run, &memcached_at(version, "invalid", &case.spec)).await {
                Ok(_) => failures.push(format!("{what}: accepted")),
                Err(kube::Error::Api(status)) => {
                    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
                    let at_field = causes.iter().find(|c| c.field == case.field);
                    let problem = match at_field {
                        _ if status.code != 422 => Some(format!("status {} ({})", status.code, status.message)),
                        None => Some(format!("no cause at {}; causes: {causes:?}", case.field)),
                        Some(cause) if !cause.message.contains(case.message) => {
                            Some(format!("message {:?} lacks {:?}", cause.message, case.message))
                        }
                        Some(_) => None,
                    };
                    if let Some(problem) = problem {
                        failures.push(format!("{what}: {problem}"));
                    }
                }
                Err(e) => failures.push(format!("{what}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// One case per rule of the Go operator v0.4.0's validating webhook
/// (api/v1beta1/memcached_validation_webhook.go), which runs after its
/// mutating webhook: each CR it rejects is rejected here, with no webhook.
/// Where our field path differs from the Go operator's, the Go path is in the
/// comment (docs/src/operator/migrating.md lists them).
fn go_webhook_cases() -> Vec<Case> {
    let cpu_request = json!({ "requests": { "cpu": "100m" } });
    vec![
        // validateMemoryLimit. Go: spec.resources.limits.memory.
        case(
            "memory limit below maxMemoryMB + 32Mi",
            json!({ "memcached": { "maxMemoryMB": 128 }, "resources": { "limits": { "memory": "159Mi" } } }),
            "spec.resources.limits[memory]",
            "must be at least memcached.maxMemoryMB + 32 MiB",
        ),
        case(
            "memory limit below the defaulted 64 MB + 32Mi",
            json!({ "resources": { "limits": { "memory": "95Mi" } } }),
            "spec.resources.limits[memory]",
            "must be at least memcached.maxMemoryMB + 32 MiB",
        ),
        // validatePDB. Go: spec.highAvailability.podDisruptionBudget.
        case(
            "PDB with minAvailable and maxUnavailable",
            json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1, "maxUnavailable": 1 } } }),
            "spec.highAvailability.podDisruptionBudget.maxUnavailable",
            "mutually exclusive",
        ),
        case(
            "PDB integer minAvailable not below replicas",
            json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 3 } } }),
            "spec.highAvailability.podDisruptionBudget.minAvailable",
            "an integer minAvailable must be below replicas",
        ),
        case(
            "PDB integer minAvailable not below the defaulted 1 replica",
            json!({ "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 1 } } }),
            "spec.highAvailability.podDisruptionBudget.minAvailable",
            "an integer minAvailable must be below replicas",
        ),
        // validateGracefulShutdown.
        case(
            "terminationGracePeriodSeconds equal to preStopDelaySeconds",
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 20, "terminationGracePeriodSeconds": 20 } } }),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            "must be greater than preStopDelaySeconds",
        ),
        case(
            "a preStopDelaySeconds above the defaulted 30 s grace period",
            json!({ "highAvailability": { "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 40 } } }),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            "must be greater than preStopDelaySeconds",
        ),
        // validateSecuritySecretRefs.
        case(
            "SASL enabled without credentialsSecretRef",
            json!({ "security": { "sasl": { "enabled": true } } }),
            "spec.security.sasl.credentialsSecretRef.name",
            "SASL needs credentialsSecretRef.name",
        ),
        case(
            "TLS enabled without certificateSecretRef.name",
            json!({ "security": { "tls": { "enabled": true, "certificateSecretRef": {} } } }),
            "spec.security.tls.certificateSecretRef.name",
            "TLS needs certificateSecretRef.name",
        ),
        // validateAutoscaling.
        case(
            "replicas with autoscaling enabled",
            json!({ "replicas": 3, "resources": cpu_request, "autoscaling": { "enabled": true, "maxReplicas": 5 } }),
            "spec.replicas",
            "must be absent when autoscaling is enabled",
        ),
        case(
            "minReplicas above maxReplicas",
            json!({ "resources": cpu_request, "autoscaling": { "enabled": true, "minReplicas": 6, "maxReplicas": 5 } }),
            "spec.autoscaling.minReplicas",
            "minReplicas must not exceed maxReplicas",
        ),
        // Go compares minReplicas with an absent maxReplicas (0) and names
        // spec.autoscaling.minReplicas; we require maxReplicas.
        case(
            "minReplicas without maxReplicas",
            json!({ "resources": cpu_request, "autoscaling": { "enabled": true, "minReplicas": 2 } }),
            "spec.autoscaling.maxReplicas",
            "maxReplicas is required when autoscaling is enabled",
        ),
        // Go: spec.resources.requests.cpu.
        case(
            "a CPU Utilization metric without resources.requests.cpu",
            json!({ "resources": { "requests": { "memory": "128Mi" } }, "autoscaling": { "enabled": true, "maxReplicas": 5, "metrics": [{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 60 } } }] } }),
            "spec.resources.requests",
            "a CPU Utilization metric needs resources.requests.cpu",
        ),
        case(
            "the defaulted CPU metric without resources.requests.cpu",
            json!({ "autoscaling": { "enabled": true, "maxReplicas": 5 } }),
            "spec.resources.requests",
            "a CPU Utilization metric needs resources.requests.cpu",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_go_webhook_rule_is_rejected_at_admission() {
    assert_rejected(&go_webhook_cases(), "crd-go-rules").await;
}

/// Where we differ from the Go operator on purpose (SPEC): a PDB enabled with
/// neither bound is accepted and gets minAvailable 1 (Go refuses it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_with_neither_bound_is_accepted_on_purpose() {
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let spec = json!({ "replicas": 2, "highAvailability": { "podDisruptionBudget": { "enabled": true } } });
    for version in SERVED_VERSIONS {
        let api = memcacheds_at("crd-pdb-neither", version).await;
        let stored = api.create(&dry_run, &memcached_at(version, "pdb", &spec)).await.expect("accepted");
        // Stored as given: minAvailable 1 is the PDB builder's, not the CR's.
        assert_eq!(stored.data["spec"]["highAvailability"]["podDisruptionBudget"], json!({ "enabled": true }));
    }
}

/// The baseline the invalid cases differ from is itself valid, so each
/// rejection above comes from the one field the case changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boundary_values_are_accepted() {
    let api = memcacheds("crd-bounds").await;
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let specs = [
        json!({}),
        json!({ "replicas": 0 }),
        json!({ "replicas": 64 }),
        json!({ "memcached": { "maxMemoryMB": 16, "maxConnections": 65536, "threads": 128, "verbosity": 2, "maxItemSize": "512k", "extraArgs": items(64, json!("-v")) } }),
        json!({ "memcached": { "maxMemoryMB": 64 }, "resources": { "limits": { "memory": "96Mi" } } }),
        json!({ "replicas": 3, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": 2 } } }),
        json!({ "replicas": 1, "highAvailability": { "podDisruptionBudget": { "enabled": true, "minAvailable": "50%" } } }),
        json!({ "highAvailability": { "antiAffinityPreset": "hard", "antiAffinity": { "type": "required" }, "gracefulShutdown": { "enabled": true, "preStopDelaySeconds": 300, "terminationGracePeriodSeconds": 600 } } }),
        json!({ "resources": { "requests": { "cpu": "100m" } }, "autoscaling": { "enabled": true, "minReplicas": 1024, "maxReplicas": 1024 } }),
        json!({ "autoscaling": { "enabled": true, "maxReplicas": 3, "metrics": [{ "type": "Resource", "resource": { "name": "memory", "target": { "type": "AverageValue", "averageValue": "300Mi" } } }] } }),
        json!({ "security": { "sasl": { "enabled": false }, "tls": { "enabled": true, "certificateSecretRef": { "name": "x".repeat(253) } } } }),
        json!({ "monitoring": { "enabled": true, "serviceMonitor": { "interval": "1m30s", "scrapeTimeout": "0" } } }),
    ];
    let mut failures = Vec::new();
    for spec in specs {
        if let Err(e) = api.create(&dry_run, &memcached("valid", &spec)).await {
            failures.push(format!("{spec}: {e}"));
        }
    }
    assert!(failures.is_empty(), "rejected:\n{}", failures.join("\n"));
}

/// The module's `default` over what was sent: the spec the API server must store.
fn module_default(document: &Value) -> Value {
    let defaulted = memcached_logic::exports::default(&document.to_string())
        .unwrap_or_else(|e| panic!("the module's default of {document}: {e}"));
    serde_json::from_str::<Value>(&defaulted).expect("default answers JSON")["spec"].clone()
}

/// One source of truth for defaults: every fixture and sample, and a CR per
/// defaulting branch, created through each served version, reads back with
/// exactly the spec the module's `default` gives the CR as sent (the CRD's
/// schema defaults plus deploy/admission/'s policy on the server's side).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_spec_is_the_modules_default() {
    let mut documents: Vec<Value> = cr_files()
        .iter()
        .flat_map(|path| memcached_tests::yaml_file(path))
        .filter(|document| document["kind"] == "Memcached")
        .collect();
    let branches = [
        json!({}),
        json!({ "replicas": 0 }),
        json!({ "highAvailability": {} }),
        json!({ "highAvailability": { "antiAffinity": { "type": "required" } } }),
        json!({ "highAvailability": { "antiAffinity": { "type": "preferred" }, "gracefulShutdown": { "enabled": true } } }),
        json!({ "highAvailability": { "podDisruptionBudget": { "enabled": true } } }),
        json!({ "monitoring": { "enabled": false } }),
        json!({ "monitoring": { "enabled": true, "serviceMonitor": {} } }),
        json!({ "memcached": { "threads": 8 } }),
        json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4 } }),
        json!({ "resources": { "requests": { "cpu": "1" } }, "autoscaling": { "enabled": true, "maxReplicas": 4, "metrics": [] } }),
        json!({ "autoscaling": { "enabled": true, "maxReplicas": 4, "metrics": [{ "type": "Resource", "resource": { "name": "memory", "target": { "type": "AverageValue", "averageValue": "100Mi" } } }], "behavior": { "scaleUp": { "stabilizationWindowSeconds": 5 } } } }),
        json!({ "autoscaling": { "enabled": false, "maxReplicas": 4 } }),
    ];
    documents.extend(branches.into_iter().map(|spec| json!({ "kind": "Memcached", "spec": spec })));
    documents.push(json!({ "kind": "Memcached" })); // no spec at all
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let mut failures = Vec::new();
    for version in SERVED_VERSIONS {
        let api = memcacheds_at("crd-defaults", version).await;
        for (index, original) in documents.iter().enumerate() {
            let mut document = original.clone();
            document["apiVersion"] = json!(format!("memcached.c5c3.io/{version}"));
            document["metadata"] = json!({ "name": format!("cr-{index}") });
            let sent: DynamicObject = serde_json::from_value(document.clone()).expect("a Memcached");
            let stored = match api.create(&dry_run, &sent).await {
                Ok(stored) => stored,
                Err(e) => {
                    failures.push(format!("{version} {}: {e}", original["spec"]));
                    continue;
                }
            };
            let want = module_default(&document);
            if stored.data["spec"] != want {
                failures.push(format!(
                    "{version} {}:\n  stored {}\n  module {want}",
                    original["spec"], stored.data["spec"]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} stored specs differ:\n{}", failures.len(), failures.join("\n"));
}

/// What the Go operator's webhook stored, literally, for an empty spec and for
/// an autoscaled one; and an update that drops `replicas` gets it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_spec_is_what_the_go_webhook_stored() {
    let api = memcacheds_at("crd-go-defaults", "v1alpha1").await;
    let memcached_block =
        json!({ "maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0 });
    let created = api.create(&PostParams::default(), &memcached_at("v1alpha1", "empty", &json!({}))).await;
    let created = created.expect("an empty spec is accepted");
    assert_eq!(created.data["spec"], json!({ "replicas": 1, "image": "memcached:1.6", "memcached": memcached_block }));

    let autoscaled =
        json!({ "resources": { "requests": { "cpu": "250m" } }, "autoscaling": { "enabled": true, "maxReplicas": 6 } });
    let stored = api.create(&PostParams::default(), &memcached_at("v1alpha1", "autoscaled", &autoscaled)).await;
    assert_eq!(
        stored.expect("an autoscaled spec is accepted").data["spec"],
        json!({
            "image": "memcached:1.6",
            "memcached": memcached_block,
            "resources": { "requests": { "cpu": "250m" } },
            "autoscaling": {
                "enabled": true, "maxReplicas": 6,
                "metrics": [{ "type": "Resource", "resource": { "name": "cpu", "target": { "type": "Utilization", "averageUtilization": 80 } } }],
                "behavior": { "scaleDown": { "stabilizationWindowSeconds": 300 } },
            },
        }),
        "no replicas and no minReplicas under autoscaling"
    );

    // A replace without replicas (and with autoscaling off) stores 1 again.
    let mut replaced = created.clone();
    replaced.data["spec"] = json!({ "image": "memcached:1.6.38" });
    let replaced = api.replace("empty", &PostParams::default(), &replaced).await.expect("a replace");
    assert_eq!(replaced.data["spec"]["replicas"], 1);
    assert_eq!(replaced.data["spec"]["image"], "memcached:1.6.38");
    // Read through the other version: the same object, the same spec.
    let beta = same_namespace_at(&api, "v1beta1").await;
    let read = beta.get("empty").await.expect("read as v1beta1");
    assert_eq!(read.types.expect("types").api_version, "memcached.c5c3.io/v1beta1");
    assert_eq!(read.data["spec"], replaced.data["spec"]);
}

/// Our ServiceMonitor CRD takes what the guest builds and types what it sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_monitor_crd_types_the_fields_we_set() {
    let plane = ControlPlane::shared();
    plane.install_crds().await.expect("installing the CRDs");
    let namespace = plane.create_namespace("crd-servicemonitor").await.expect("a namespace");
    let client = plane.client(User::Admin).await.expect("an admin client");
    let gvk = GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client, &namespace, &ApiResource::from_gvk_with_plural(&gvk, "servicemonitors"));

    // The golden ServiceMonitor, as the operator would write it.
    let fixture = control_plane::repo_root().join("tests/fixtures/monitoring-full/objects.yaml");
    let mut monitor = memcached_tests::yaml_file(&fixture)
        .into_iter()
        .flat_map(|doc| match doc.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ => vec![doc],
        })
        .find(|doc| doc["kind"] == "ServiceMonitor")
        .expect("a ServiceMonitor in the fixture");
    let metadata = monitor["metadata"].as_object_mut().expect("metadata");
    metadata.remove("ownerReferences"); // its owner does not exist here
    metadata.insert("namespace".into(), json!(namespace));
    let sent: DynamicObject = serde_json::from_value(monitor.clone()).expect("a ServiceMonitor");
    let stored = api.create(&PostParams::default(), &sent).await.expect("the fixture's ServiceMonitor is accepted");
    assert_eq!(stored.data["spec"], monitor["spec"], "stored as sent, nothing pruned");
    assert_eq!(stored.metadata.labels, sent.metadata.labels);

    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let invalid = [
        (json!({ "endpoints": [{ "port": "metrics" }] }), "spec.selector", "Required value"),
        (
            json!({ "selector": {}, "endpoints": [{ "port": "metrics", "interval": "soon" }] }),
            "spec.endpoints[0].interval",
            "should match",
        ),
        (
            json!({ "selector": {}, "endpoints": [{ "port": "metrics", "scheme": "ftp" }] }),
            "spec.endpoints[0].scheme",
            "Unsupported value",
        ),
        (
            json!({ "selector": {}, "endpoints": [{ "port": 9150 }] }),
            "spec.endpoints[0].port",
            "must be of type string",
        ),
        (
            json!({ "selector": {}, "namespaceSelector": { "matchNames": "default" } }),
            "spec.namespaceSelector.matchNames",
            "must be of type array",
        ),
    ];
    for (spec, field, message) in invalid {
        let monitor = object("monitoring.coreos.com/v1", "ServiceMonitor", "invalid", &spec);
        match api.create(&dry_run, &monitor).await {
            Err(kube::Error::Api(status)) => {
                let causes = status.details.map(|d| d.causes).unwrap_or_default();
                assert!(
                    causes.iter().any(|c| c.field == field && c.message.contains(message)),
                    "{spec}: expected {field} ({message}), got {causes:?}"
                );
            }
            other => panic!("{spec}: expected a rejection at {field}, got {other:?}"),
        }
    }
}
