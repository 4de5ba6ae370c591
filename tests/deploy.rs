//! deploy/ against a real kube-apiserver (tests/control-plane):
//! `kubectl apply -k deploy/` installs what it should; the operator's RBAC is
//! exactly what it uses (run in-process with only deploy/'s rules, every
//! feature created, changed and deleted, then checked in the audit log: no
//! request refused, every granted rule used; the grants only admission
//! checks are each shown needed); the Deployment is hardened and agrees with
//! the binary's flags, the Dockerfile and the README.

#[path = "operator_support.rs"]
mod operator_support;

#[path = "metrics_support.rs"]
mod metrics_support;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use control_plane::{AuditEvent, ControlPlane, User};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use memcached_logic::exports;
use memcached_logic::kinds::KindInfo;
use serde_json::{Value, json};
use wasm_operator::operator::endpoints::http::SecureMetrics;
use wasm_operator::operator::endpoints::metrics::Metrics;
use wasm_operator::operator::identity::{ModuleIdentity, needed_permissions};
use wasm_operator::operator::leader::LeaderElectionOptions;
use wasm_operator::operator::{self, Options};
use wasm_operator::runtime::slot::ModuleSlot;

const OPERATOR_USER: &str = "memcached-operator";
/// The operator's own ClusterRole and ClusterRoleBinding; deploy/ also has
/// `memcached-operator-metrics-auth` and `memcached-operator-metrics-reader`.
const OPERATOR_ROLE: &str = "memcached-operator";
/// The Memcached module's own identity: a ServiceAccount named after the
/// module, its ClusterRole and binding (deploy/rbac/module_role.yaml), and
/// the operator's Role to impersonate it.
const MODULE_ACCOUNT: &str = "memcached";
const MODULE_ROLE: &str = "memcached-operator-module-memcached";
const IMPERSONATION_ROLE: &str = "memcached-operator-impersonate-modules";
const LEASE_ROLE: &str = "memcached-operator-leader-election";
const METRICS_AUTH_ROLE: &str = "memcached-operator-metrics-auth";
const METRICS_READER_ROLE: &str = "memcached-operator-metrics-reader";
const WAIT: Duration = Duration::from_secs(60);
const IMAGE_REPOSITORY: &str = "ghcr.io/c5c3/memcached-operator";

fn deploy_dir() -> PathBuf {
    control_plane::repo_root().join("deploy")
}

/// Every object `kubectl apply -k deploy/` installs, read from the files the
/// kustomization lists.
fn kustomized_objects() -> Vec<Value> {
    let kustomization = memcached_tests::yaml_file(&deploy_dir().join("kustomization.yaml")).remove(0);
    let resources = kustomization["resources"].as_array().expect("kustomization.yaml lists resources");
    resources
        .iter()
        .flat_map(|r| memcached_tests::yaml_file(&deploy_dir().join(r.as_str().expect("a resource path"))))
        .collect()
}

fn the_object(kind: &str) -> Value {
    let mut found: Vec<Value> = kustomized_objects().into_iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "deploy/ installs exactly one {kind}");
    found.remove(0)
}

fn the_named(kind: &str, name: &str) -> Value {
    let mut found: Vec<Value> =
        kustomized_objects().into_iter().filter(|o| o["kind"] == kind && o["metadata"]["name"] == name).collect();
    assert_eq!(found.len(), 1, "deploy/ installs exactly one {kind} {name}");
    found.remove(0)
}

fn resource_for(object: &Value, plural: &str) -> ApiResource {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().expect("kind");
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Polls `check` until it answers `Some`, or fails the test after `WAIT`.
async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    operator_support::eventually_within(WAIT, what, check).await
}

/// The operator's requests since `mark` that the API server refused.
fn refused_since(plane: &ControlPlane, mark: control_plane::AuditMark) -> Vec<String> {
    let events = plane.audit_events_since(mark).expect("the audit log");
    events
        .iter()
        .filter(|e| e.user == OPERATOR_USER && matches!(e.code, Some(401 | 403)))
        .map(|e| format!("{} {} ({:?})", e.verb, e.request_uri, e.code))
        .collect()
}

/// [`eventually`], failing at once when the operator is refused a request
/// (it would only retry it): a missing permission names itself.
async fn eventually_allowed<T, F, Fut>(
    plane: &ControlPlane,
    mark: control_plane::AuditMark,
    what: &str,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually(what, || {
        let refused = refused_since(plane, mark);
        assert!(
            refused.is_empty(),
            "waiting for {what}, requests refused with deploy/'s RBAC:\n{}",
            refused.join("\n")
        );
        check()
    })
    .await
}

// ---------------------------------------------------------------------------
// kubectl apply -k deploy/

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_k_installs_the_crd_rbac_and_operator() {
    let plane = ControlPlane::shared();
    let apply = || {
        let output = plane.kubectl().args(["apply", "-k"]).arg(deploy_dir()).output().expect("running kubectl");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "kubectl apply -k deploy/ failed:\n{stdout}\n{stderr}");
        // PodSecurity's `warn: restricted` on the namespace would print a
        // warning for a Deployment that breaks the restricted standard. (The
        // RBAC test may have applied the CRD and ClusterRole server-side
        // first: kubectl then notes their missing last-applied annotation.)
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("Warning") && !l.contains("last-applied-configuration annotation"))
            .collect();
        assert!(warnings.is_empty(), "kubectl apply -k deploy/ warned:\n{stderr}");
        stdout
    };
    let first = apply();

    let expected = kustomized_objects();
    let kinds: BTreeSet<&str> = expected.iter().filter_map(|o| o["kind"].as_str()).collect();
    let want: BTreeSet<&str> = [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    ]
    .into();
    assert_eq!(kinds, want, "what deploy/ installs");
    // kubectl names every object it applied.
    for object in &expected {
        let name = object["metadata"]["name"].as_str().expect("a name");
        assert!(first.contains(&format!("/{name} ")), "kubectl did not apply {} {name}:\n{first}", object["kind"]);
    }

    // Each object is on the server, as written in deploy/.
    let client = plane.client(User::Admin).await.expect("an admin client");
    let plural = |kind: &str| match kind {
        "Namespace" => "namespaces",
        "CustomResourceDefinition" => "customresourcedefinitions",
        "ServiceAccount" => "serviceaccounts",
        "ClusterRole" => "clusterroles",
        "ClusterRoleBinding" => "clusterrolebindings",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "Deployment" => "deployments",
        "Service" => "services",
        other => panic!("no plural known for {other}"),
    };
    for object in &expected {
        let kind = object["kind"].as_str().expect("a kind");
        let resource = resource_for(object, plural(kind));
        let name = object["metadata"]["name"].as_str().expect("a name");
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let live = api.get(name).await.unwrap_or_else(|e| panic!("{kind} {name} was not created: {e}"));
        let live = serde_json::to_value(&live).expect("an object serializes");
        for field in ["rules", "roleRef", "subjects"] {
            if !object[field].is_null() {
                assert_eq!(live[field], object[field], "{kind} {name}: {field}");
            }
        }
        if kind == "Deployment" {
            let template = &live["spec"]["template"]["spec"];
            assert_eq!(
                template["containers"][0]["image"],
                object["spec"]["template"]["spec"]["containers"][0]["image"]
            );
            assert_eq!(template["containers"][0]["args"], object["spec"]["template"]["spec"]["containers"][0]["args"]);
            assert_eq!(template["securityContext"]["runAsNonRoot"], json!(true));
        }
    }
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    eventually("the CRD to be Established", || async {
        let crd = crds.get("memcacheds.memcached.c5c3.io").await.ok()?;
        let conditions = crd.data["status"]["conditions"].as_array()?.clone();
        conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "True").then_some(())
    })
    .await;

    // Applying again changes nothing.
    let second = apply();
    for line in second.lines() {
        assert!(line.ends_with(" unchanged"), "a second apply changed something: {line}\n{second}");
    }

    // The pod template passes the namespace's enforced "restricted" Pod
    // Security Standard (as a Pod, since only Pods are enforced) ...
    let pods: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "memcached-system",
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods"),
    );
    let deployment = the_object("Deployment");
    let pod = |spec: &Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "pod-security-check", "namespace": "memcached-system"},
            "spec": spec,
        }))
        .expect("a Pod")
    };
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };
    let spec = deployment["spec"]["template"]["spec"].clone();
    pods.create(&dry_run, &pod(&spec)).await.expect("the operator's pod meets the restricted Pod Security Standard");
    // ... which does refuse a pod that may run as root (the check can fail).
    let mut weakened = spec.clone();
    weakened["securityContext"]["runAsNonRoot"] = json!(false);
    weakened["containers"][0]["securityContext"]["runAsNonRoot"] = json!(false);
    let refused = pods.create(&dry_run, &pod(&weakened)).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403 && status.message.contains("PodSecurity")),
        "a root pod must be refused in memcached-system: {refused:?}"
    );
}

// ---------------------------------------------------------------------------
// RBAC: sufficient and least-privilege

/// One rule of a (Cluster)Role, expanded: a verb on a group's resource, and
/// the object names it is limited to (none: any).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    verb: String,
    group: String,
    /// `resource` or `resource/subresource`
    resource: String,
    names: Option<BTreeSet<String>>,
}

impl Grant {
    fn allows(&self, event: &AuditEvent) -> bool {
        event.verb == self.verb
            && event.api_group.as_deref().unwrap_or("") == self.group
            && resource_of(event).as_deref() == Some(self.resource.as_str())
            && self.names.as_ref().is_none_or(|names| event.name.as_ref().is_some_and(|n| names.contains(n)))
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        write!(f, "{} {}/{}", self.verb, group, self.resource)?;
        if let Some(names) = &self.names {
            write!(f, " {names:?}")?;
        }
        Ok(())
    }
}

fn resource_of(event: &AuditEvent) -> Option<String> {
    let resource = event.resource.clone()?;
    Some(match &event.subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource,
    })
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

fn grants(role: &Value) -> Vec<Grant> {
    let mut grants = Vec::new();
    for rule in role["rules"].as_array().expect("a role has rules") {
        assert!(rule["nonResourceURLs"].is_null(), "no non-resource URLs are needed");
        let names = rule.get("resourceNames").map(|n| strings(n).into_iter().collect());
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        !verb.contains('*') && !resource.contains('*') && !group.contains('*'),
                        "no wildcards: {rule}"
                    );
                    grants.push(Grant { verb, group: group.clone(), resource: resource.clone(), names: names.clone() });
                }
            }
        }
    }
    grants
}

/// Granted, but no request can show them: the OwnerReferencesPermissionEnforcement
/// admission plugin checks them inside the API server (nothing in the audit
/// log). Setting `blockOwnerDeletion` needs update on the owner's finalizers
/// (every child is written with it); changing an object's owner references
/// needs delete on the object (adopting a Deployment or Service the operator
/// never deletes). `admission_needs_the_grants_no_request_shows` proves each
/// one needed.
const ADMISSION_ONLY: [(&str, &str, &str); 3] = [
    ("update", "memcached.c5c3.io", "memcacheds/finalizers"),
    ("delete", "apps", "deployments"),
    ("delete", "", "services"),
];

/// Granted for a standby only, which this test does not run (it leads at
/// once): it watches its Lease to take over the moment the leader releases
/// it (`tests/leader_handover.rs`).
const STANDBY_ONLY: [(&str, &str, &str); 2] =
    [("list", "coordination.k8s.io", "leases"), ("watch", "coordination.k8s.io", "leases")];

fn admin_api(client: &Client, namespace: &str, info: &KindInfo) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(info.group, info.version, info.kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk_with_plural(&gvk, info.plural))
}

fn arg_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let prefix = format!("{flag}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

fn container_args(deployment: &Value) -> Vec<String> {
    strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_grants_exactly_what_the_operator_uses() {
    let plane = ControlPlane::shared();
    plane.install_crds().await.expect("installing the CRDs");
    let admin = plane.client(User::Admin).await.expect("an admin client");

    // deploy/'s roles, bound (for this test only) to the harness's operator
    // user; the leader-election Role goes into a namespace of ours. The
    // metrics-auth ClusterRole's reviews are used by a scrape below.
    let cluster_role = the_named("ClusterRole", OPERATOR_ROLE);
    let metrics_auth_role = the_named("ClusterRole", METRICS_AUTH_ROLE);
    let module_role = the_named("ClusterRole", MODULE_ROLE);
    let mut role = the_named("Role", LEASE_ROLE);
    let lease_namespace = plane.create_namespace("deploy-lease").await.expect("a namespace");
    role["metadata"]["namespace"] = json!(lease_namespace);
    // The module's ServiceAccount and the Role to impersonate it, in a
    // namespace of ours (--module-identity-namespace).
    let mut impersonation_role = the_named("Role", IMPERSONATION_ROLE);
    let accounts_namespace = plane.create_namespace("deploy-modules").await.expect("a namespace");
    impersonation_role["metadata"]["namespace"] = json!(accounts_namespace);
    let cluster_role_name = cluster_role["metadata"]["name"].as_str().expect("a name").to_owned();
    let role_name = role["metadata"]["name"].as_str().expect("a name").to_owned();
    plane.apply_yaml(&cluster_role.to_string()).await.expect("applying the ClusterRole");
    plane.apply_yaml(&metrics_auth_role.to_string()).await.expect("applying the metrics-auth ClusterRole");
    plane.apply_yaml(&module_role.to_string()).await.expect("applying the module's ClusterRole");
    plane.apply_yaml(&role.to_string()).await.expect("applying the Role");
    plane.apply_yaml(&impersonation_role.to_string()).await.expect("applying the impersonation Role");
    let operator = json!([{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR_USER }]);
    let module = json!([{ "kind": "ServiceAccount", "name": MODULE_ACCOUNT, "namespace": accounts_namespace }]);
    // A ClusterRoleBinding (no namespace) or a RoleBinding of `role` to `subjects`.
    let binding = |name: &str, namespace: Option<&str>, role_kind: &str, role: &str, subjects: &Value| {
        let mut metadata = json!({ "name": name });
        if let Some(namespace) = namespace {
            metadata["namespace"] = json!(namespace);
        }
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": if namespace.is_some() { "RoleBinding" } else { "ClusterRoleBinding" },
            "metadata": metadata,
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role },
            "subjects": subjects,
        })
    };
    let bindings = [
        binding("test-deploy-memcached-operator-user", None, "ClusterRole", &cluster_role_name, &operator),
        binding("test-deploy-memcached-operator-user-metrics-auth", None, "ClusterRole", METRICS_AUTH_ROLE, &operator),
        binding("test-deploy-memcached-operator-user", Some(&lease_namespace), "Role", &role_name, &operator),
        binding(
            "test-deploy-memcached-operator-user",
            Some(&accounts_namespace),
            "Role",
            IMPERSONATION_ROLE,
            &operator,
        ),
        binding("test-deploy-memcached-module", None, "ClusterRole", MODULE_ROLE, &module),
    ];
    for binding in &bindings {
        plane.apply_yaml(&binding.to_string()).await.expect("binding the operator user");
    }
    let cluster_grants = [grants(&cluster_role), grants(&metrics_auth_role)].concat();
    let role_grants = grants(&role);
    let impersonation_grants = grants(&impersonation_role);
    let module_grants = grants(&module_role);
    let module_user = format!("system:serviceaccount:{accounts_namespace}:{MODULE_ACCOUNT}");
    // The module's ClusterRole is exactly what the operator checks the
    // module's identity for at load (so each rule is needed: without one
    // the module is refused, tests/module_identity.rs), and nothing more.
    let memcached = operator_support::memcached_module();
    let checked: BTreeSet<Grant> =
        needed_permissions(memcached.manifest(), memcached.write_model(), memcached.finalizes())
            .into_iter()
            .map(|p| Grant {
                verb: p.verb.to_owned(),
                group: p.group.clone(),
                resource: p.subresource.map_or(p.resource.clone(), |sub| format!("{}/{sub}", p.resource)),
                names: None,
            })
            .collect();
    assert_eq!(
        module_grants.iter().cloned().collect::<BTreeSet<Grant>>(),
        checked,
        "deploy/'s module ClusterRole is what the operator checks the module's identity for"
    );
    for grant in module_grants.iter().filter(|g| !g.resource.contains('/')) {
        plane
            .wait_until_service_account_allowed(
                (&accounts_namespace, MODULE_ACCOUNT),
                &grant.verb,
                &grant.group,
                &grant.resource,
                None,
            )
            .await
            .unwrap_or_else(|e| panic!("{grant} never became allowed to the module: {e}"));
    }
    plane
        .wait_until_allowed_on(
            User::Operator,
            ("impersonate", "", "serviceaccounts", MODULE_ACCOUNT),
            Some(&accounts_namespace),
        )
        .await
        .expect("the operator may impersonate the module's ServiceAccount");
    for (grant, namespace) in
        cluster_grants.iter().map(|g| (g, None)).chain(role_grants.iter().map(|g| (g, Some(&lease_namespace))))
    {
        if grant.names.is_none() && !grant.resource.contains('/') {
            plane
                .wait_until_allowed(
                    User::Operator,
                    &grant.verb,
                    &grant.group,
                    &grant.resource,
                    namespace.map(String::as_str),
                )
                .await
                .unwrap_or_else(|e| panic!("{grant} never became allowed: {e}"));
        }
    }

    // The Deployment's own flags decide the Lease.
    let deployment = the_object("Deployment");
    let args = container_args(&deployment);
    let lease_name =
        arg_value(&args, "--leader-election-id").expect("the Deployment sets --leader-election-id").to_owned();

    // Workloads: the "everything" sample with its Secrets, in a namespace of ours.
    let namespace = plane.create_namespace("deploy-rbac").await.expect("a namespace");
    let sample = memcached_tests::yaml_file(&deploy_dir().join("samples/everything.yaml")).remove(0);
    let full_name = sample["metadata"]["name"].as_str().expect("a name").to_owned();
    let full_spec = sample["spec"].clone();
    let secret_api = admin_api(&admin, &namespace, &exports::manifest().reads[0]);
    let mut secrets = Vec::new();
    for reference in exports::references(&sample.to_string()).expect("the sample's references") {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": reference.name, "namespace": namespace },
            "stringData": { "password-file": "user:secret", "tls.crt": "crt", "tls.key": "key", "ca.crt": "ca" },
        });
        let object: DynamicObject = serde_json::from_value(secret).expect("a Secret");
        let created = secret_api.create(&PostParams::default(), &object).await.expect("creating a Secret");
        let mut value = serde_json::to_value(&created).expect("serializes");
        value["apiVersion"] = json!("v1");
        value["kind"] = json!("Secret");
        secrets.push(value.to_string());
    }
    assert_eq!(secrets.len(), 2, "the everything sample references the SASL and TLS Secrets");

    // Orphans (no owner) with the names the operator will want: its create
    // answers 409, it re-reads them (get) and adopts them (update).
    let mut parent = sample.clone();
    parent["metadata"]["namespace"] = json!(namespace);
    let desired = exports::desired(&parent.to_string(), &[], &secrets).expect("the sample renders");
    let owned = exports::manifest().owned;
    assert_eq!(desired.len(), owned.len(), "every kind is on in the sample");
    for (info, object) in owned.iter().zip(&desired) {
        let mut object: Value = serde_json::from_str(object).expect("JSON");
        assert_eq!(object["kind"], info.kind, "in manifest order");
        object["metadata"].as_object_mut().expect("metadata").remove("ownerReferences");
        let object: DynamicObject = serde_json::from_value(object).expect("an object");
        admin_api(&admin, &namespace, info).create(&PostParams::default(), &object).await.expect("creating an orphan");
    }

    // A Deployment someone else controls, with the name a CR wants: the
    // operator must not take it over, and fails the same way on every retry,
    // so the event recorder repeats its Warning (a patch of the event).
    let config_maps = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        &namespace,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps"),
    );
    let other_owner: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "someone-else"}}))
            .expect("a ConfigMap");
    let other_owner = config_maps.create(&PostParams::default(), &other_owner).await.expect("creating the other owner");
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "taken",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else",
                "uid": other_owner.uid().expect("a uid"), "controller": true,
            }],
        },
        "spec": {
            "selector": {"matchLabels": {"app": "taken"}},
            "template": {"metadata": {"labels": {"app": "taken"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }))
    .expect("a Deployment");
    admin_api(&admin, &namespace, &owned[0])
        .create(&PostParams::default(), &foreign)
        .await
        .expect("creating a foreign Deployment");

    let memcacheds = admin_api(&admin, &namespace, &exports::manifest().parent);
    let cr = |name: &str, spec: &Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": exports::manifest().parent.api_version(), "kind": "Memcached",
            "metadata": {"name": name}, "spec": spec,
        }))
        .expect("a Memcached")
    };

    // The operator, as the bound user, watching every namespace as deployed,
    // serving /metrics as deployed (HTTPS, reviewed) on a free port.
    let metrics_address =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a free port");
    let mark = plane.audit_mark().expect("the audit log");
    let client = plane.client(User::Operator).await.expect("an operator client");
    let options = Options {
        namespace: None,
        metrics_address,
        metrics_secure: Some(SecureMetrics::default()),
        health_address: "127.0.0.1:0".parse().expect("an address"),
        leader_election: Some(LeaderElectionOptions::new(
            lease_namespace.clone(),
            lease_name.clone(),
            "deploy-test".into(),
        )),
        concurrency: 2,
        module_call_concurrency: 2,
        max_reconcile_steps: 10,
        resync_period: Duration::from_secs(3600),
        swap_policy: Default::default(),
        logic_modules: None,
        record_budget: 4 << 20,
        module_identity: ModuleIdentity::ServiceAccounts {
            namespace: accounts_namespace.clone(),
            prefix: String::new(),
        },
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let module = ModuleSlot::new(operator_support::memcached_module());
    let running =
        tokio::spawn(operator::run::run(client, vec![module], Arc::new(Metrics::default()), options, async move {
            let _ = stopped.await;
        }));

    // Prometheus's scrape: a ServiceAccount bound to deploy/'s metrics-reader.
    metrics_support::bind_metrics_reader(plane, "test-deploy-metrics-reader", &namespace, "prometheus").await;
    let token = metrics_support::service_account_token(&admin, &namespace, "prometheus").await;
    eventually("the metrics-reader binding to reach the authorizer", || async {
        metrics_support::may_read_metrics(&admin, &namespace, "prometheus").await.then_some(())
    })
    .await;
    let address = metrics_address.to_string();
    eventually_allowed(plane, mark, "a scrape of /metrics with deploy/'s RBAC", || async {
        let reply = metrics_support::https_get(&address, "/metrics", Some(&token)).await.ok()?;
        (reply.status == 200).then_some(())
    })
    .await;

    memcacheds.create(&PostParams::default(), &cr(&full_name, &full_spec)).await.expect("creating the everything CR");
    memcacheds.create(&PostParams::default(), &cr("plain", &json!({}))).await.expect("creating a minimal CR");
    memcacheds
        .create(&PostParams::default(), &cr("taken", &json!({})))
        .await
        .expect("creating a CR whose Deployment is taken");

    // Some(()) once every kind's object `name` exists (controlled by `owner`
    // when given), or with `present` false, once none does.
    let children_are = |infos: Vec<&KindInfo>, name: &str, owner: Option<String>, present: bool| {
        let apis: Vec<Api<DynamicObject>> = infos.into_iter().map(|info| admin_api(&admin, &namespace, info)).collect();
        let name = name.to_owned();
        async move {
            for api in &apis {
                let found = api.get_opt(&name).await.expect("reading a child").is_some_and(|object| {
                    owner.as_ref().is_none_or(|uid| {
                        object.owner_references().iter().any(|r| r.controller == Some(true) && &r.uid == uid)
                    })
                });
                if found != present {
                    return None;
                }
            }
            Some(())
        }
    };
    let full_uid = memcacheds.get(&full_name).await.expect("the CR").uid();
    eventually_allowed(plane, mark, "every orphan adopted by the everything CR", || {
        children_are(owned.iter().collect(), &full_name, full_uid.clone(), true)
    })
    .await;
    eventually_allowed(plane, mark, "the minimal CR's Deployment and Service", || {
        children_are(owned[..2].iter().collect(), "plain", None, true)
    })
    .await;

    // Turn every optional feature off (deletes), then on again (creates).
    let optional: Vec<&KindInfo> =
        owned.iter().filter(|info| !["Deployment", "Service"].contains(&info.kind)).collect();
    assert_eq!(optional.len(), 4);
    let toggle = |on: bool| {
        json!({"spec": {
            "replicas": if on { Value::Null } else { json!(3) },
            "autoscaling": {"enabled": on},
            "monitoring": {"enabled": on},
            "highAvailability": {"podDisruptionBudget": {"enabled": on}},
            "security": {"networkPolicy": {"enabled": on}},
        }})
    };
    memcacheds
        .patch(&full_name, &PatchParams::default(), &Patch::Merge(&toggle(false)))
        .await
        .expect("disabling features");
    eventually_allowed(plane, mark, "the optional children to be deleted", || {
        children_are(optional.clone(), &full_name, None, false)
    })
    .await;
    memcacheds
        .patch(&full_name, &PatchParams::default(), &Patch::Merge(&toggle(true)))
        .await
        .expect("enabling features");
    eventually_allowed(plane, mark, "the optional children to be created again", || {
        children_are(optional.clone(), &full_name, full_uid.clone(), true)
    })
    .await;
    eventually_allowed(plane, mark, "the everything CR's status to see its last generation", || async {
        let cr = memcacheds.get(&full_name).await.ok()?;
        (cr.data["status"]["observedGeneration"] == json!(cr.metadata.generation?)).then_some(())
    })
    .await;

    // The repeated Warning for the taken Deployment (retries back off 1 s,
    // 2 s, ...), and a lease renewal (every 2 s).
    eventually_allowed(plane, mark, "a repeated event (a patch) and a lease renewal", || async {
        let events = plane.audit_events_since(mark).ok()?;
        let by_operator = || events.iter().filter(|e| e.user == OPERATOR_USER && e.code.is_some_and(|c| c < 300));
        let patched = by_operator().any(|e| e.verb == "patch" && e.resource.as_deref() == Some("events"));
        let renewed = by_operator().any(|e| e.verb == "update" && e.resource.as_deref() == Some("leases"));
        (patched && renewed).then_some(())
    })
    .await;
    let taken = admin_api(&admin, &namespace, &owned[0]).get("taken").await.expect("the foreign Deployment");
    assert_eq!(taken.owner_references().len(), 1, "the operator took over a Deployment it does not control");

    stop.send(()).expect("the operator is running");
    let result = tokio::time::timeout(WAIT, running).await.expect("the operator stops in time").expect("no panic");
    result.expect("the operator ran and stopped cleanly");
    plane.audit_sync().await.expect("the audit log catches up");

    // Its own requests: cluster-wide ones (watches) and those in its
    // namespaces; other tests in this binary act as the same user elsewhere.
    let ours = |e: &AuditEvent| e.namespace.as_deref().is_none_or(|ns| ns == namespace || ns == lease_namespace);
    let requests: Vec<AuditEvent> = plane
        .audit_events_since(mark)
        .expect("the audit log")
        .into_iter()
        .filter(|e| e.user == OPERATOR_USER && ours(e))
        .collect();
    assert!(!requests.is_empty(), "no requests by {OPERATOR_USER} in the audit log");

    // Sufficient: nothing refused.
    let refused = refused_since(plane, mark);
    assert!(refused.is_empty(), "requests refused with deploy/'s RBAC:\n{}", refused.join("\n"));

    // Every resource request it made is covered by deploy/'s rules: its own
    // by the operator's (the lease only in its namespace), those made as
    // the module by the module's; so neither needs anything else. The
    // module's load check (SelfSubjectAccessReviews as the module) needs no
    // grant: every authenticated user may ask what it may do.
    let as_module = |e: &AuditEvent| e.impersonated_user.as_deref() == Some(module_user.as_str());
    assert!(
        requests.iter().all(|e| e.impersonated_user.is_none() || as_module(e)),
        "the operator acted as someone else than the module's ServiceAccount"
    );
    let own_grants: Vec<(&Grant, Option<&str>)> = cluster_grants
        .iter()
        .map(|g| (g, None))
        .chain(role_grants.iter().map(|g| (g, Some(lease_namespace.as_str()))))
        .collect();
    let module_grants: Vec<(&Grant, Option<&str>)> = module_grants.iter().map(|g| (g, None)).collect();
    let covered = |event: &AuditEvent| {
        let grants = if as_module(event) { &module_grants } else { &own_grants };
        let self_review = event.resource.as_deref() == Some("selfsubjectaccessreviews") && as_module(event);
        self_review
            || grants.iter().any(|(grant, namespace)| {
                grant.allows(event) && namespace.is_none_or(|ns| event.namespace.as_deref() == Some(ns))
            })
    };
    let uncovered: Vec<String> = requests
        .iter()
        .filter(|e| e.resource.is_some() && !covered(e))
        .map(|e| format!("{} {} as {:?}", e.verb, e.request_uri, e.impersonated_user))
        .collect();
    assert!(uncovered.is_empty(), "requests outside deploy/'s rules:\n{}", uncovered.join("\n"));
    let writes_as_module = requests.iter().filter(|e| e.is_write() && as_module(e)).count();
    let own_writes: Vec<String> = requests
        .iter()
        .filter(|e| e.is_write() && !as_module(e))
        .filter(|e| {
            !matches!(e.resource.as_deref(), Some("events" | "leases" | "tokenreviews" | "subjectaccessreviews"))
        })
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(writes_as_module > 0 && own_writes.is_empty(), "writes not made as the module: {own_writes:#?}");
    // The impersonation grant is used by every request made as the module.
    assert_eq!(impersonation_grants.len(), 1, "one rule: impersonate the module's ServiceAccount");
    assert_eq!(impersonation_grants[0].names, Some([MODULE_ACCOUNT.to_owned()].into()));

    // Least privilege: every granted rule was used by a successful request,
    // its own or as the module, but the module's list and watch: the
    // operator's caches read for it, and its load check asks for them.
    let all_grants: Vec<(&Grant, bool)> =
        own_grants.iter().map(|(g, _)| (*g, false)).chain(module_grants.iter().map(|(g, _)| (*g, true))).collect();
    let mut unused = Vec::new();
    for (grant, of_module) in &all_grants {
        if *of_module && (grant.verb == "list" || grant.verb == "watch") {
            continue;
        }
        let key = (grant.verb.as_str(), grant.group.as_str(), grant.resource.as_str());
        if STANDBY_ONLY.contains(&key) {
            continue;
        }
        let hidden = ADMISSION_ONLY.contains(&key);
        let used = requests
            .iter()
            .any(|e| as_module(e) == *of_module && grant.allows(e) && e.code.is_some_and(|c| (200..300).contains(&c)));
        match (used, hidden) {
            (false, false) => unused.push(grant.to_string()),
            (true, true) => {
                let shown: Vec<&str> =
                    requests.iter().filter(|e| grant.allows(e)).map(|e| e.request_uri.as_str()).collect();
                panic!("{grant} shows in the audit log now ({shown:?}): take it off ADMISSION_ONLY")
            }
            _ => {}
        }
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for e in &requests {
        *seen
            .entry(format!(
                "{} {}/{} {:?}",
                e.verb,
                e.api_group.as_deref().unwrap_or(""),
                resource_of(e).unwrap_or_default(),
                e.code
            ))
            .or_default() += 1;
    }
    assert!(unused.is_empty(), "granted but never used:\n{}\nrequests seen: {seen:#?}", unused.join("\n"));
}

/// deploy/'s ClusterRole without `verb` on `group`'s `resource`.
fn role_without(role: &Value, verb: &str, group: &str, resource: &str) -> Value {
    let mut smaller = role.clone();
    let rules: Vec<Value> = role["rules"]
        .as_array()
        .expect("a role has rules")
        .iter()
        .cloned()
        .filter_map(|mut rule| {
            if strings(&rule["apiGroups"]) == [group] && strings(&rule["resources"]) == [resource] {
                let verbs: Vec<String> = strings(&rule["verbs"]).into_iter().filter(|v| v != verb).collect();
                if verbs.is_empty() {
                    return None;
                }
                rule["verbs"] = json!(verbs);
            }
            Some(rule)
        })
        .collect();
    smaller["rules"] = json!(rules);
    assert_ne!(&smaller, role, "deploy/'s ClusterRole grants {verb} on {group}/{resource}");
    smaller
}

/// Admin, impersonating `user` (who is in no group).
async fn impersonating(plane: &ControlPlane, user: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(plane.kubeconfig(User::Admin)).expect("the admin kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("a client config");
    config.auth_info.impersonate = Some(user.to_owned());
    Client::try_from(config).expect("a client")
}

/// `role` under `name`, bound to `user`.
async fn bind_cluster_role(plane: &ControlPlane, role: &Value, name: &str, user: &str) {
    let mut role = role.clone();
    role["metadata"] = json!({ "name": name });
    plane.apply_yaml(&role.to_string()).await.expect("applying a ClusterRole");
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    });
    plane.apply_yaml(&binding.to_string()).await.expect("applying a ClusterRoleBinding");
}

/// The smallest valid object of an owned kind, without a name.
fn bare_child(kind: &str) -> Value {
    match kind {
        "Deployment" => json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "spec": {
                "selector": {"matchLabels": {"app": "probe"}},
                "template": {"metadata": {"labels": {"app": "probe"}}, "spec": {"containers": [{"name": "c", "image": "memcached"}]}},
            },
        }),
        "Service" => json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 11211}]}}),
        other => panic!("no bare {other}"),
    }
}

/// What the operator does that admission checks for `grant`
/// (an ADMISSION_ONLY entry), as `client`: create a child with the
/// controller reference (blockOwnerDeletion), or adopt an orphan child.
async fn what_needs(
    grant: (&str, &str, &str),
    client: &Client,
    admin: &Client,
    namespace: &str,
    owner_reference: &Value,
) -> Result<(), kube::Error> {
    let owned = exports::manifest().owned;
    let kind_of = |group: &str, plural: &str| {
        *owned.iter().find(|i| i.group == group && i.plural == plural).expect("an owned kind")
    };
    let with_owner = |mut object: Value| {
        object["metadata"]["ownerReferences"] = json!([owner_reference]);
        serde_json::from_value::<DynamicObject>(object).expect("an object")
    };
    match grant {
        ("update", "memcached.c5c3.io", "memcacheds/finalizers") => {
            let info = kind_of("", "services");
            let mut service = bare_child(info.kind);
            service["metadata"] = json!({"generateName": "probe-"});
            admin_api(client, namespace, &info).create(&PostParams::default(), &with_owner(service)).await.map(drop)
        }
        ("delete", group, plural) => {
            let info = kind_of(group, plural);
            let mut orphan = bare_child(info.kind);
            orphan["metadata"] = json!({"generateName": "orphan-"});
            let orphan: DynamicObject = serde_json::from_value(orphan).expect("an object");
            let orphan =
                admin_api(admin, namespace, &info).create(&PostParams::default(), &orphan).await.expect("an orphan");
            let name = orphan.name_any();
            let adopted = with_owner(serde_json::to_value(&orphan).expect("serializes"));
            admin_api(client, namespace, &info).replace(&name, &PostParams::default(), &adopted).await.map(drop)
        }
        other => panic!("no probe for {other:?}: add one to what_needs"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_needs_the_grants_no_request_shows() {
    let plane = ControlPlane::shared();
    plane.install_crds().await.expect("installing the CRDs");
    let admin = plane.client(User::Admin).await.expect("an admin client");
    let namespace = plane.create_namespace("deploy-admission").await.expect("a namespace");
    let memcacheds = admin_api(&admin, &namespace, &exports::manifest().parent);
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": exports::manifest().parent.api_version(), "kind": "Memcached", "metadata": {"name": "owner"}, "spec": {},
    }))
    .expect("a Memcached");
    let owner = memcacheds.create(&PostParams::default(), &owner).await.expect("creating a CR");
    // The reference the module writes on every child.
    let owner_reference = json!({
        "apiVersion": exports::manifest().parent.api_version(), "kind": "Memcached", "name": "owner",
        "uid": owner.uid().expect("a uid"), "controller": true, "blockOwnerDeletion": true,
    });
    // The module's writes are made as its ServiceAccount: admission checks its role.
    let cluster_role = the_named("ClusterRole", MODULE_ROLE);

    // With deploy/'s ClusterRole, the module may do each of these ...
    bind_cluster_role(plane, &cluster_role, "test-deploy-probe-full", "deploy-probe-full").await;
    let full = impersonating(plane, "deploy-probe-full").await;
    for grant in ADMISSION_ONLY {
        eventually(&format!("{grant:?} allowed with deploy/'s ClusterRole"), || async {
            what_needs(grant, &full, &admin, &namespace, &owner_reference).await.ok()
        })
        .await;
    }

    // ... and without the one grant, admission refuses it (naming the
    // reason, so this is not RBAC still catching up with the binding).
    for (index, grant) in ADMISSION_ONLY.into_iter().enumerate() {
        let (verb, group, resource) = grant;
        let user = format!("deploy-probe-without-{index}");
        let smaller = role_without(&cluster_role, verb, group, resource);
        bind_cluster_role(plane, &smaller, &format!("test-{user}"), &user).await;
        let client = impersonating(plane, &user).await;
        let reason = if verb == "delete" { "can't delete" } else { "blockOwnerDeletion" };
        eventually(&format!("admission to refuse the operator without {grant:?}"), || async {
            match what_needs(grant, &client, &admin, &namespace, &owner_reference).await {
                Err(kube::Error::Api(status)) if status.code == 403 && status.message.contains(reason) => Some(()),
                Ok(()) => panic!("{grant:?} is not needed: the request passed without it"),
                Err(_) => None,
            }
        })
        .await;
    }
}

// ---------------------------------------------------------------------------
// The Deployment, Dockerfile and README agree

fn port_of(address: &str) -> u16 {
    address.rsplit_once(':').and_then(|(_, port)| port.parse().ok()).unwrap_or_else(|| panic!("{address} has no port"))
}

#[test]
fn the_deployment_is_hardened_and_matches_the_flags_dockerfile_and_readme() {
    let deployment = the_object("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];

    // Security posture.
    let pod_security = &pod["securityContext"];
    assert_eq!(pod_security["runAsNonRoot"], json!(true));
    let uid = pod_security["runAsUser"].as_u64().expect("runAsUser");
    assert_ne!(uid, 0);
    assert_eq!(pod_security["seccompProfile"]["type"], json!("RuntimeDefault"));
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], json!(false));
    assert_eq!(security["readOnlyRootFilesystem"], json!(true));
    assert_eq!(security["runAsNonRoot"], json!(true));
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert!(security["capabilities"]["add"].is_null());
    assert!(security["privileged"].is_null() || security["privileged"] == json!(false));
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(container["resources"][kind][resource].is_string(), "resources.{kind}.{resource} is set");
        }
    }

    // Probes and ports agree with the flags.
    let args = container_args(&deployment);
    assert_eq!(args.first().map(String::as_str), Some("run"));
    let port_named = |name: &str| -> u16 {
        let ports = container["ports"].as_array().expect("ports");
        let port = ports.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("a port named {name}"));
        u16::try_from(port["containerPort"].as_u64().expect("containerPort")).expect("a port number")
    };
    let health = port_of(arg_value(&args, "--health-probe-bind-address").expect("--health-probe-bind-address"));
    let metrics = port_of(arg_value(&args, "--metrics-bind-address").expect("--metrics-bind-address"));
    for (probe, path) in [("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], json!(path), "{probe}");
        let port = match &get["port"] {
            Value::String(name) => port_named(name),
            number => u16::try_from(number.as_u64().expect("a port")).expect("a port number"),
        };
        assert_eq!(port, health, "{probe} probes the --health-probe-bind-address port");
    }
    // Metrics as the Go operator serves them: HTTPS on 8443, port https.
    assert_eq!(arg_value(&args, "--metrics-secure"), Some("true"), "--metrics-secure=true");
    assert_eq!(metrics, 8443);
    assert_eq!(port_named("https"), metrics, "the port named https is --metrics-bind-address's");
    let service = the_object("Service");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 8443, "targetPort": "https", "protocol": "TCP"}]),
        "the metrics Service"
    );
    let reader = the_named("ClusterRole", METRICS_READER_ROLE);
    assert_eq!(reader["rules"], json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
    let auth = grants(&the_named("ClusterRole", METRICS_AUTH_ROLE));
    assert_eq!(
        auth.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["create authentication.k8s.io/tokenreviews", "create authorization.k8s.io/subjectaccessreviews"],
        "the operator may review a scrape's token, nothing more"
    );
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_object().expect("a selector") {
        assert_eq!(&labels[key], value, "the metrics Service selects the operator's pods");
    }

    // A compile's bound and the operator at 10,000 CRs (~210 MiB, make
    // bench-e2e) fit the pod's memory limit together.
    let mebibytes = |quantity: &str| -> u64 {
        quantity.strip_suffix("Mi").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{quantity} is not in Mi"))
    };
    let compile_bound = mebibytes(arg_value(&args, "--compile-memory-limit").expect("--compile-memory-limit"));
    let limit = mebibytes(container["resources"]["limits"]["memory"].as_str().expect("a memory limit"));
    assert!(compile_bound + 210 <= limit, "a {compile_bound} MiB compile beside the operator fits {limit} MiB");

    // Leader election: on (two replicas), the lease named in the Role.
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
    let leader_elect = arg_value(&args, "--leader-elect").unwrap_or("true");
    assert!(replicas == 1 || leader_elect == "true", "{replicas} replicas need --leader-elect=true");
    let lease = arg_value(&args, "--leader-election-id").expect("--leader-election-id");
    let role = the_named("Role", LEASE_ROLE);
    assert!(
        role["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .any(|r| strings(&r["resourceNames"]).iter().any(|n| n == lease)),
        "the Role grants the Lease {lease}"
    );
    assert_eq!(
        role["metadata"]["namespace"], deployment["metadata"]["namespace"],
        "the Lease is in the operator's namespace"
    );
    let env = container["env"].as_array().expect("env");
    let field_ref = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .map(|e| e["valueFrom"]["fieldRef"]["fieldPath"].clone())
            .unwrap_or_default()
    };
    assert_eq!(field_ref("POD_NAME"), json!("metadata.name"));
    assert_eq!(field_ref("POD_NAMESPACE"), json!("metadata.namespace"));

    // The ServiceAccounts (the operator's, the module's), and the bindings
    // to each; the module's is in the operator's namespace
    // (--module-identity-namespace defaults to POD_NAMESPACE) and named
    // after the module.
    assert_eq!(arg_value(&args, "--module-identity"), Some("service-account"));
    let account = the_named("ServiceAccount", "memcached-operator");
    assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);
    let module_account = the_named("ServiceAccount", MODULE_ACCOUNT);
    assert_eq!(module_account["metadata"]["namespace"], deployment["metadata"]["namespace"]);
    assert_eq!(exports::manifest().name, MODULE_ACCOUNT, "named after the module");
    assert_eq!(module_account["automountServiceAccountToken"], json!(false), "no pod runs as the module");
    let bindings: Vec<Value> = kustomized_objects()
        .into_iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        .collect();
    let bound: BTreeSet<&str> = bindings.iter().filter_map(|b| b["roleRef"]["name"].as_str()).collect();
    assert_eq!(bound, [OPERATOR_ROLE, METRICS_AUTH_ROLE, LEASE_ROLE, IMPERSONATION_ROLE, MODULE_ROLE].into());
    for binding in &bindings {
        let name = &binding["metadata"]["name"];
        let subject = if binding["roleRef"]["name"] == MODULE_ROLE { &module_account } else { &account };
        assert_eq!(binding["subjects"][0]["name"], subject["metadata"]["name"], "{name}");
        assert_eq!(binding["subjects"][0]["namespace"], subject["metadata"]["namespace"], "{name}");
    }
    let impersonation = the_named("Role", IMPERSONATION_ROLE);
    assert_eq!(impersonation["metadata"]["namespace"], deployment["metadata"]["namespace"]);

    // One image, tagged with the workspace version, everywhere.
    let image = format!("{IMAGE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(container["image"], json!(image));
    let kustomization = memcached_tests::yaml_file(&deploy_dir().join("kustomization.yaml")).remove(0);
    assert_eq!(kustomization["images"], json!([{"name": IMAGE_REPOSITORY, "newTag": env!("CARGO_PKG_VERSION")}]));
    let root = control_plane::repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    assert!(readme.contains(&image), "README names the image {image}");
    assert!(readme.contains("kubectl apply -k deploy/"), "README says how to install");
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains(&image), "the Dockerfile names the image it builds");
    let last_from = dockerfile.lines().rfind(|l| l.starts_with("FROM ")).expect("a FROM");
    assert!(last_from.contains(":nonroot"), "the final stage is a nonroot base: {last_from}");
    assert!(dockerfile.lines().any(|l| l.trim() == format!("USER {uid}:{uid}")), "the image's USER is runAsUser {uid}");
    // The image's binary is the one the benchmarks measure: built as `make`
    // builds target/ship/ (with --workspace; -p resolves the dependencies'
    // features anew, renaming their symbols, and the code-order list then
    // matched under half of them), with the list's check after it.
    let ship_build = dockerfile.lines().find(|l| l.contains("cargo build --profile ship")).expect("a ship build");
    assert!(ship_build.contains("--workspace") && !ship_build.contains(" -p "), "{ship_build}");
    let makefile = std::fs::read_to_string(root.join("Makefile")).expect("Makefile");
    assert!(
        makefile.contains("$(CARGO) build --profile ship --workspace --bin memcached-operator"),
        "make's ship build"
    );
    assert!(
        dockerfile.contains("scripts/code-order.py --check target/ship/memcached-operator"),
        "the image build checks the list"
    );
    // With an exact Rust release of the workspace's rust-version (any other
    // release, a patch one too, renames every symbol).
    let cargo_toml = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let rust_version = cargo_toml
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the workspace's rust-version");
    let builder = dockerfile.lines().find(|l| l.starts_with("FROM ") && l.contains("/rust:")).expect("a Rust stage");
    let tag = builder.split_once("/rust:").and_then(|(_, t)| t.split_once('-')).map(|(v, _)| v).expect("a tag");
    assert!(
        tag.starts_with(&format!("{rust_version}.")) && tag.split('.').count() == 3,
        "{builder}: an exact release of rust-version {rust_version}"
    );

    // The kustomization lists every manifest under deploy/ but the samples.
    let listed: BTreeSet<String> = strings(&kustomization["resources"]).into_iter().collect();
    let mut on_disk = BTreeSet::new();
    let mut folders = vec![deploy_dir()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("reading deploy/").flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(deploy_dir()).expect("under deploy/").to_string_lossy().into_owned();
            if path.is_dir() {
                // Opt-in components have a kustomization of their own
                // (`a_component_turns_on_logic_modules` checks it).
                if relative != "samples" && !path.join("kustomization.yaml").exists() {
                    folders.push(path);
                }
            } else if relative != "kustomization.yaml" {
                on_disk.insert(relative);
            }
        }
    }
    assert_eq!(listed, on_disk, "kustomization.yaml lists every manifest in deploy/");
}

/// deploy/'s module identity is what `memcached-operator rbac` prints for
/// the built-in module: the command a module author runs for their own.
#[test]
fn the_module_identity_in_deploy_is_what_the_rbac_command_prints() {
    let operator = control_plane::repo_root().join("target/release/memcached-operator");
    let namespace = the_named("Deployment", "memcached-operator")["metadata"]["namespace"].as_str().map(str::to_owned);
    let namespace = namespace.expect("the Deployment's namespace");
    let output = std::process::Command::new(operator)
        .args(["rbac", "--namespace", &namespace])
        .output()
        .expect("running memcached-operator rbac");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = memcached_operator::render::parse_documents(&String::from_utf8_lossy(&output.stdout))
        .expect("rbac prints YAML");
    let in_deploy: Vec<Value> = ["rbac/module_role.yaml", "rbac/impersonation_role.yaml"]
        .iter()
        .flat_map(|file| memcached_tests::yaml_file(&deploy_dir().join(file)))
        .collect();
    assert_eq!(printed, in_deploy);
}

/// deploy/logic-modules, a kustomize Component: with it, the real kustomize
/// renders the LogicModule CRD, the operator's rules to follow one (granted
/// nothing more), and the flag that turns the follower on; and the operator
/// binary accepts that flag.
#[test]
fn a_component_turns_on_logic_modules() {
    let plane_assets = control_plane::find_assets().expect("the envtest binaries");
    // Kustomize takes only relative paths: an overlay two levels below the repo.
    let overlay = control_plane::repo_root().join(format!("target/logic-modules-overlay-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).expect("an overlay dir");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources: [../../deploy]\ncomponents: [../../deploy/logic-modules]\n",
    )
    .expect("writing the overlay");
    let output = std::process::Command::new(plane_assets.join("kubectl"))
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .expect("running kubectl kustomize");
    let _ = std::fs::remove_dir_all(&overlay);
    assert!(output.status.success(), "kustomize: {}", String::from_utf8_lossy(&output.stderr));
    let rendered = memcached_operator::render::parse_documents(&String::from_utf8_lossy(&output.stdout))
        .expect("kustomize prints YAML");
    let find = |kind: &str| rendered.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("a {kind}"));

    let crds: Vec<&str> = rendered
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert!(crds.contains(&"logicmodules.wasm-operator.c5c3.io"), "{crds:?}");

    let base = grants(&the_named("ClusterRole", OPERATOR_ROLE));
    let operator_role = rendered
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == OPERATOR_ROLE)
        .expect("the operator's ClusterRole");
    let with_component = grants(operator_role);
    let added: Vec<String> = with_component.iter().filter(|g| !base.contains(g)).map(ToString::to_string).collect();
    assert_eq!(
        added,
        [
            "get wasm-operator.c5c3.io/logicmodules",
            "list wasm-operator.c5c3.io/logicmodules",
            "watch wasm-operator.c5c3.io/logicmodules",
            "patch wasm-operator.c5c3.io/logicmodules/status"
        ],
        "exactly what following a LogicModule needs"
    );

    let args = container_args(find("Deployment"));
    assert_eq!(args.last().map(String::as_str), Some("--logic-modules=true"));
    let operator = control_plane::repo_root().join("target/release/memcached-operator");
    let help = std::process::Command::new(operator).args(["run", "--help"]).output().expect("memcached-operator");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--logic-modules"), "the binary takes the flag");
}
