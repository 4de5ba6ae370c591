//! Migrating from the C5C3 Go operator v0.4.0 to ours and back (issue 14,
//! item 4), against a real kube-apiserver, both operators as processes:
//!
//! 1. the Go operator's CRDs, every `deploy/samples/*.yaml` CR (named after
//!    its file, in one namespace with the Secrets they reference) and the Go
//!    operator (`scripts/go-operator.sh`, webhooks off) until it has created
//!    every child and written every status; then it stops;
//! 2. our CRD (`deploy/crd/`) over it, and `target/release/memcached-operator
//!    run` until every CR was reconciled and it is quiet; then it stops;
//! 3. the Go operator's CRD again, and the Go operator.
//!
//! After steps 2 and 3: no object was created or deleted (same UIDs), and
//! the objects the operator wrote, with the fields it changed, are exactly
//! the expected list (from the audit log and a before/after snapshot). The
//! book's "Migrating from the Go operator" (docs/src/operator/migrating.md) explains each difference.

mod operator_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use control_plane::{AuditMark, ControlPlane, Options, User};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use memcached_e2e::operators::{self, Flavor, OperatorProcess};
use operator_support::OPERATOR_USER;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(180);

/// What ours changes in the Go operator's objects, as `Kind name: field`
/// (an array is one field), besides owner references (see
/// [`owner_reference_changes`]), and what the Go operator changes back
/// when a user returns. Why, in docs/src/operator/migrating.md.
const BOTH_WAYS: &[&str] = &[
    "HorizontalPodAutoscaler autoscaling: spec.behavior",
    "HorizontalPodAutoscaler everything: spec.behavior",
    "Memcached autoscaling: status.conditions",
    "Memcached everything: status.conditions",
    "Memcached high-availability: status.conditions",
    "Memcached minimal: status.conditions",
    "Memcached monitoring: status.conditions",
    "Memcached network-policy: status.conditions",
    "Memcached sasl: status.conditions",
    "Memcached tls: status.conditions",
];

/// Only going back: the Go operator drops `status.readyReplicas: 0` (its
/// type omits a zero).
const BACK_ONLY: &[&str] = &[
    "Memcached autoscaling: status.readyReplicas",
    "Memcached everything: status.readyReplicas",
    "Memcached high-availability: status.readyReplicas",
    "Memcached minimal: status.readyReplicas",
    "Memcached monitoring: status.readyReplicas",
    "Memcached network-policy: status.readyReplicas",
    "Memcached sasl: status.readyReplicas",
    "Memcached tls: status.readyReplicas",
];

/// The Go operator's children point at the storage version, v1beta1. Ours
/// point at the version its module renders: while that is another one,
/// each operator rewrites every child's owner reference to its own.
const GO_OWNER_API_VERSION: &str = "memcached.c5c3.io/v1beta1";

/// `Kind name: metadata.ownerReferences` for every child, when ours renders
/// owner references to another version than the Go operator's.
fn owner_reference_changes(ours_owner_api_version: &str, objects: &BTreeMap<String, Seen>) -> Vec<String> {
    if ours_owner_api_version == GO_OWNER_API_VERSION {
        return Vec::new();
    }
    objects
        .keys()
        .filter(|key| !key.starts_with("Memcached "))
        .map(|key| format!("{key}: metadata.ownerReferences"))
        .collect()
}

fn gvr(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The CR (served by both CRDs as v1alpha1 and v1beta1) and every kind it may own.
fn kinds() -> Vec<ApiResource> {
    vec![
        gvr("memcached.c5c3.io", "v1beta1", "Memcached", "memcacheds"),
        gvr("apps", "v1", "Deployment", "deployments"),
        gvr("", "v1", "Service", "services"),
        gvr("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
        gvr("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers"),
        gvr("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors"),
        gvr("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies"),
    ]
}

fn yaml_files(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|e| panic!("reading {}: {e}", folder.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

async fn apply_folder(plane: &ControlPlane, folder: &Path) {
    for file in yaml_files(folder) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        plane.apply_yaml(&text).await.unwrap_or_else(|e| panic!("applying {}: {e}", file.display()));
    }
}

/// Every sample as a CR named after its file, in `namespace`, how many
/// objects ours renders for it, and those objects (a v1 List).
fn samples(root: &Path, operator: &Path, namespace: &str) -> Vec<(Value, usize, Value)> {
    yaml_files(&root.join("deploy/samples"))
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a sample");
            let mut object: Value = serde_norway::from_str(&text).expect("a YAML sample");
            let name = path.file_stem().expect("a file name").to_string_lossy().into_owned();
            object["metadata"] = serde_json::json!({ "name": name, "namespace": namespace });
            let rendered = std::process::Command::new(operator)
                .args(["render", "-o", "json", "-f"])
                .arg(&path)
                .output()
                .expect("memcached-operator render");
            let list: Value = serde_json::from_slice(&rendered.stdout).expect("render prints a JSON list");
            let children = list["items"].as_array().map_or(0, Vec::len);
            assert!(rendered.status.success() && children > 0, "render {}", path.display());
            (object, children, list)
        })
        .collect()
}

async fn create_secrets(client: &Client, namespace: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let meta = |name: &str| ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() };
    let strings = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    for secret in [
        Secret {
            metadata: meta("memcached-sasl"),
            string_data: Some(strings(&[("password-file", "memcached:migration")])),
            ..Secret::default()
        },
        Secret {
            metadata: meta("memcached-tls"),
            string_data: Some(strings(&[("tls.crt", "x"), ("tls.key", "y"), ("ca.crt", "z")])),
            ..Secret::default()
        },
    ] {
        secrets.create(&PostParams::default(), &secret).await.expect("creating a Secret");
    }
}

/// One object as a snapshot holds it.
#[derive(Debug, Clone)]
struct Seen {
    uid: String,
    resource_version: String,
    /// Without resourceVersion and managedFields.
    content: Value,
}

/// `Kind name` -> object, for every kind of [`kinds`] in `namespace`.
async fn snapshot(client: &Client, namespace: &str) -> BTreeMap<String, Seen> {
    let mut all = BTreeMap::new();
    for kind in kinds() {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &kind);
        for object in api.list(&ListParams::default()).await.expect("listing").items {
            let key = format!("{} {}", kind.kind, object.name_any());
            let uid = object.uid().unwrap_or_default();
            let resource_version = object.resource_version().unwrap_or_default();
            let mut content = serde_json::to_value(&object).expect("an object as JSON");
            if let Some(meta) = content.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
                meta.remove("managedFields");
            }
            all.insert(key, Seen { uid, resource_version, content });
        }
    }
    all
}

/// The fields that differ, as paths (`spec.replicas`); an array is one field.
fn changed_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                changed_fields(a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null), &child, out);
            }
        }
        (a, b) if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

/// Asserts that nothing was created, recreated or deleted and that every
/// changed object was written by the operator (with `only_real_writes`, also
/// that every write of the operator changed its object: ours never sends an
/// update that changes nothing), and returns the changes as `Kind name: field`.
fn changes(
    plane: &ControlPlane,
    mark: AuditMark,
    before: &BTreeMap<String, Seen>,
    after: &BTreeMap<String, Seen>,
    step: &str,
    only_real_writes: bool,
) -> Vec<String> {
    let before_keys: Vec<&String> = before.keys().collect();
    let after_keys: Vec<&String> = after.keys().collect();
    assert_eq!(before_keys, after_keys, "{step}: the set of objects changed");
    for (key, seen) in before {
        assert_eq!(seen.uid, after[key].uid, "{step}: {key} was recreated");
    }
    let writes = plane.writes_by(OPERATOR_USER, mark).expect("the audit log");
    let kind_of: BTreeMap<String, String> = kinds().into_iter().map(|k| (k.plural, k.kind)).collect();
    let mut written: BTreeSet<String> = BTreeSet::new();
    for write in writes.iter().filter(|w| w.resource.as_deref().is_some_and(|r| kind_of.contains_key(r))) {
        let what = format!("{} {:?} {:?} {:?}", write.verb, write.resource, write.name, write.code);
        assert_ne!(write.verb, "create", "{step}: created an object: {what}");
        if write.verb == "delete" || write.verb == "deletecollection" {
            // The Go operator deletes the optional children a CR does not
            // have on every reconcile: a 404, nothing deleted.
            assert_eq!(write.code, Some(404), "{step}: deleted an object: {what}");
            continue;
        }
        let kind = write.resource.as_deref().and_then(|r| kind_of.get(r)).cloned().unwrap_or_default();
        written.insert(format!("{kind} {}", write.name.as_deref().unwrap_or_default()));
    }
    if only_real_writes {
        for key in &written {
            let unchanged =
                before.get(key).zip(after.get(key)).is_some_and(|(b, a)| b.resource_version == a.resource_version);
            assert!(!unchanged, "{step}: wrote {key} without changing it");
        }
    }
    let mut fields = Vec::new();
    for (key, seen) in before {
        let now = &after[key];
        if seen.resource_version == now.resource_version {
            continue;
        }
        assert!(written.contains(key), "{step}: {key} changed, but not by the operator");
        let mut paths = Vec::new();
        changed_fields(&seen.content, &now.content, "", &mut paths);
        for path in &paths {
            let pointer = format!("/{}", path.replace('.', "/"));
            eprintln!(
                "{step}: {key}: {path}:\n  before {}\n  after  {}",
                seen.content.pointer(&pointer).unwrap_or(&Value::Null),
                now.content.pointer(&pointer).unwrap_or(&Value::Null)
            );
        }
        fields.extend(paths.into_iter().map(|p| format!("{key}: {p}")));
    }
    fields
}

/// Until every CR has its status for its generation and every child its
/// sample renders to.
async fn wait_converged(client: &Client, namespace: &str, expected: &BTreeMap<String, usize>, who: &str) {
    let started = Instant::now();
    loop {
        let all = snapshot(client, namespace).await;
        let mut children: BTreeMap<String, usize> = BTreeMap::new();
        let mut converged = 0;
        for (key, seen) in &all {
            if key.starts_with("Memcached ") {
                let generation = seen.content.pointer("/metadata/generation").and_then(Value::as_i64);
                let observed = seen.content.pointer("/status/observedGeneration").and_then(Value::as_i64);
                converged += usize::from(generation.is_some() && generation == observed);
            } else if let Some(owners) = seen.content.pointer("/metadata/ownerReferences").and_then(Value::as_array) {
                for owner in owners.iter().filter(|o| o["controller"] == Value::Bool(true)) {
                    *children.entry(owner["name"].as_str().unwrap_or_default().to_owned()).or_default() += 1;
                }
            }
        }
        let complete = expected.iter().all(|(name, n)| children.get(name) == Some(n));
        if converged == expected.len() && complete {
            return;
        }
        assert!(
            started.elapsed() < WAIT,
            "{who}: {converged}/{} CRs with a current status, children {children:?}, expected {expected:?}",
            expected.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Until the operator (started for this) has reconciled `count` times and
/// its counter has stood still for 3 s.
async fn wait_quiet(operator: &mut OperatorProcess, count: usize, who: &str) {
    let started = Instant::now();
    let mut last = u64::MAX;
    let mut still = 0;
    loop {
        let now = operator.scrape().await.unwrap_or_else(|e| panic!("{who}: {e}")).reconciles;
        if now == last {
            still += 1;
        } else {
            still = 0;
            last = now;
        }
        if now >= count as u64 && still >= 6 {
            return;
        }
        assert!(started.elapsed() < WAIT, "{who}: {now} reconciles of {count} CRs");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

struct Run {
    plane: ControlPlane,
    client: Client,
    namespace: String,
    root: PathBuf,
    ours: PathBuf,
    go: PathBuf,
    go_crds: PathBuf,
    logs: PathBuf,
}

impl Run {
    fn spawn(&self, flavor: Flavor, log: &str) -> OperatorProcess {
        let (binary, extra) = match flavor {
            Flavor::Ours => (&self.ours, vec!["--namespace".to_owned(), self.namespace.clone()]),
            Flavor::Go => (&self.go, vec![format!("--watch-namespaces={}", self.namespace)]),
        };
        let log = self.logs.join(log);
        OperatorProcess::spawn(flavor, binary, &extra, &self.plane.kubeconfig(User::Operator), &log)
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()))
    }

    /// Installs `flavor`'s CRD over the other's, runs that operator until it
    /// is quiet, and returns the fields it changed.
    async fn switch_to(&self, flavor: Flavor, count: usize, step: &str) -> Vec<String> {
        match flavor {
            Flavor::Ours => apply_folder(&self.plane, &self.root.join("deploy/crd")).await,
            Flavor::Go => apply_folder(&self.plane, &self.go_crds).await,
        }
        // Read after the CRD changed: its schema defaults apply on read.
        let before = snapshot(&self.client, &self.namespace).await;
        let mark = self.plane.audit_mark().expect("the audit log");
        let mut operator = self.spawn(flavor, &format!("{step}.log"));
        operator.wait_ready().await.unwrap_or_else(|e| panic!("{step}: {e}"));
        wait_quiet(&mut operator, count, step).await;
        operator.stop();
        self.plane.audit_sync().await.expect("the audit log catching up");
        let after = snapshot(&self.client, &self.namespace).await;
        changes(&self.plane, mark, &before, &after, step, flavor == Flavor::Ours)
    }
}

fn assert_fields(step: &str, actual: &[String], expected: &[&[&str]], owner_references: Vec<String>) {
    let mut expected: Vec<String> =
        expected.iter().flat_map(|list| list.iter()).map(|s| (*s).to_owned()).chain(owner_references).collect();
    expected.sort();
    assert_eq!(
        actual,
        expected.as_slice(),
        "{step}: the fields written differ from the expected list; as a constant:\n{:#?}",
        actual
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_the_go_operator_and_back() {
    let root = control_plane::repo_root();
    let ours = root.join("target/release/memcached-operator");
    assert!(ours.is_file(), "{} is missing: `make test` builds it", ours.display());
    let (go, go_crds) = operators::go_operator(&root).expect("scripts/go-operator.sh");
    let logs = root.join("target/migration");
    std::fs::create_dir_all(&logs).expect("creating target/migration");

    // Garbage collection on, as in a real cluster: a child whose owner
    // reference stopped resolving would be collected.
    let plane = ControlPlane::start_with(Options { audit_log: true, ..Options::default() }).expect("a control plane");
    let client = plane.client(User::Admin).await.expect("an admin client");
    operator_support::grant_operator_everything(&plane).await;
    let namespace = plane.create_namespace("migration").await.expect("a namespace");
    create_secrets(&client, &namespace).await;
    let run = Run { plane, client, namespace, root, ours, go, go_crds, logs };

    // 1. The Go operator, as users run it today.
    apply_folder(&run.plane, &run.go_crds).await;
    let samples = samples(&run.root, &run.ours, &run.namespace);
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(
        run.client.clone(),
        &run.namespace,
        &gvr("memcached.c5c3.io", "v1alpha1", "Memcached", "memcacheds"),
    );
    let mut expected = BTreeMap::new();
    for (object, children, _) in &samples {
        let object: DynamicObject = serde_json::from_value(object.clone()).expect("a CR");
        expected.insert(object.name_any(), *children);
        memcacheds.create(&PostParams::default(), &object).await.expect("creating a sample CR");
    }
    let mut go_operator = run.spawn(Flavor::Go, "1-go.log");
    go_operator.wait_ready().await.expect("the Go operator ready");
    wait_converged(&run.client, &run.namespace, &expected, "the Go operator").await;
    wait_quiet(&mut go_operator, samples.len(), "the Go operator").await;
    go_operator.stop();

    let ours_owner_api_version = samples[0]
        .2
        .pointer("/items/0/metadata/ownerReferences/0/apiVersion")
        .and_then(Value::as_str)
        .expect("render gives owner references")
        .to_owned();
    let owner_references =
        owner_reference_changes(&ours_owner_api_version, &snapshot(&run.client, &run.namespace).await);

    // 2. Ours takes over.
    let to_ours = run.switch_to(Flavor::Ours, samples.len(), "2-ours").await;
    assert_fields("Go -> ours", &to_ours, &[BOTH_WAYS], owner_references.clone());

    // 3. And back.
    let to_go = run.switch_to(Flavor::Go, samples.len(), "3-go-again").await;
    assert_fields("ours -> Go", &to_go, &[BOTH_WAYS, BACK_ONLY], owner_references);
}
