//! A new module version whose owned or read kinds differ from the serving
//! one's (issue 11: "a change in owned or read kinds starts and stops the
//! matching watches"), against the real API server. The versions are builds
//! of the Greeting module: v1, v2 (the same kinds) and `service-account`
//! (v2 that also owns a ServiceAccount per Greeting).
//!
//! - The swap to `service-account` starts the ServiceAccount watch before
//!   its dry run, and the new kind drives reconciles; the swap back to v2
//!   keeps that watch for the watch window (a rollback lists nothing) and
//!   then stops it, leaving the ServiceAccounts where they are.
//! - A version whose new kind the operator may not list (its role not
//!   updated yet) is refused (`WatchFailed`, naming the kind and the API
//!   server's answer) with the active version serving; once the role
//!   allows it, the next look lets it through.

#[path = "logic_module_support.rs"]
mod logic_module_support;
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use control_plane::User;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use logic_module_support::{LOGIC_MODULE_CRD, built, has, wait_logic_module};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::operator::swapping::swap_state::SwapPolicy;
use wasm_operator::runtime::logic_module::{LogicModule, digest};
use wasm_operator::runtime::oci::{Registry, RegistryOptions};
use wasm_operator::runtime::slot::ModuleSlot;

const PARENTS: usize = 10;

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hot-swap-kinds-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

/// Replaces the watched file as a deployment tool does: write beside it,
/// rename over it.
fn replace(live: &Path, bytes: &[u8]) {
    let beside = live.with_extension("wasm.new");
    std::fs::write(&beside, bytes).expect("writing the new version");
    std::fs::rename(&beside, live).expect("renaming it over the live file");
}

fn greetings_of(ns: &TestNamespace<'_>) -> Api<DynamicObject> {
    ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"))
}

async fn create_greetings(ns: &TestNamespace<'_>) {
    for i in 0..PARENTS {
        let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                              "metadata": {"name": format!("g-{i:03}")}, "spec": {"message": format!("hi {i}")}});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        greetings_of(ns).create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
    }
}

fn managed() -> ListParams {
    ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator")
}

async fn configmap_revisions(ns: &TestNamespace<'_>) -> Vec<Value> {
    let list = ns.api(&gvk("", "v1", "ConfigMap", "configmaps")).list(&managed()).await.expect("listing ConfigMaps");
    list.items.iter().map(|c| c.data["data"]["revision"].clone()).collect()
}

async fn service_accounts(ns: &TestNamespace<'_>) -> Vec<DynamicObject> {
    let api = ns.api(&gvk("", "v1", "ServiceAccount", "serviceaccounts"));
    api.list(&managed()).await.expect("listing ServiceAccounts").items
}

/// Until every Greeting's ConfigMap carries `revision` (null: none).
async fn wait_revisions(ns: &TestNamespace<'_>, what: &str, revision: Value) {
    eventually_within(Duration::from_secs(60), what, || async {
        let revisions = configmap_revisions(ns).await;
        (revisions.len() == PARENTS && revisions.iter().all(|r| *r == revision)).then_some(())
    })
    .await;
}

/// Until each Greeting has its ServiceAccount, controlled by it.
async fn wait_service_accounts(ns: &TestNamespace<'_>, what: &str) -> Vec<DynamicObject> {
    eventually_within(Duration::from_secs(60), what, || async {
        let accounts = service_accounts(ns).await;
        let controlled = accounts.iter().filter(|a| controller_uid(a).is_some()).count();
        (accounts.len() == PARENTS && controlled == PARENTS).then_some(accounts)
    })
    .await
}

/// The watches gauge of one kind (`v1/ServiceAccount`): 1 while watched.
fn watches(running: &Running, kind: &str) -> u64 {
    running.metric("wasm_operator_watches", &format!("kind=\"{kind}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_with_another_owned_kind_starts_its_watch_and_one_without_it_stops_it() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let (v1, v2, with_accounts) =
        (built("greeting.wasm"), built("greeting-v2.wasm"), built("greeting-service-account.wasm"));
    let dir = temp_dir("watches");
    let live = dir.join("greeting.wasm");
    std::fs::write(&live, &v1).expect("installing v1");
    let ns = TestNamespace::new("hot-swap-kinds").await;
    let module = LogicModule::from_file(memcached_tests::engine(), &live, false).expect("v1 loads");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    create_greetings(&ns).await;

    let mut options = options(&ns.namespace);
    options.swap_policy = SwapPolicy {
        poll_interval: Duration::from_millis(100),
        rollout_per_second: 200,
        watch_window: Duration::from_secs(3),
        ..SwapPolicy::default()
    };
    let client = ns.plane.client(User::Operator).await.expect("an operator client");
    let running = Running::start_slots(client, vec![ModuleSlot::watching(module, live.clone(), false)], options);
    wait_revisions(&ns, "every ConfigMap from v1", Value::Null).await;
    assert_eq!((watches(&running, "v1/ConfigMap"), watches(&running, "v1/Secret")), (1, 1));
    assert_eq!(watches(&running, "v1/ServiceAccount"), 0, "v1 owns no ServiceAccounts");

    // A version that also owns ServiceAccounts: their watch starts, and
    // every parent gets one.
    replace(&live, &with_accounts);
    eventually("the swap", || async { (running.swaps("succeeded") == 1).then_some(()) }).await;
    assert_eq!(running.serving_digests(), [digest(&with_accounts)]);
    assert_eq!(watches(&running, "v1/ServiceAccount"), 1, "its watch started");
    let accounts = wait_service_accounts(&ns, "a ServiceAccount per Greeting").await;
    wait_revisions(&ns, "every ConfigMap from the new version", json!("2")).await;

    // The new kind's changes drive reconciles: one deleted by hand comes back.
    let removed = accounts.iter().find(|a| a.metadata.name.as_deref() == Some("g-003")).expect("g-003's");
    let accounts_api = ns.api(&gvk("", "v1", "ServiceAccount", "serviceaccounts"));
    accounts_api.delete("g-003", &DeleteParams::default()).await.expect("deleting a ServiceAccount");
    eventually("g-003's ServiceAccount back", || async {
        let back = accounts_api.get_opt("g-003").await.ok()??;
        (back.metadata.uid != removed.metadata.uid).then_some(())
    })
    .await;

    // Back to a version without them: the swap changes no ConfigMap (v2
    // wants what the other wanted), the ServiceAccount watch stops once the
    // watch window is over, and the ServiceAccounts stay.
    let mark = ns.plane.audit_mark().expect("the audit log");
    replace(&live, &v2);
    eventually("the swap back", || async { (running.swaps("succeeded") == 2).then_some(()) }).await;
    assert_eq!(running.serving_digests(), [digest(&v2)]);
    eventually_within(Duration::from_secs(30), "the ServiceAccount watch to stop", || async {
        (watches(&running, "v1/ServiceAccount") == 0).then_some(())
    })
    .await;
    assert_eq!(watches(&running, "v1/ConfigMap"), 1, "v2's own watches go on");
    assert_eq!(service_accounts(&ns).await.len(), PARENTS, "nothing deleted");
    let writes: Vec<_> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() != Some("events")).collect();
    assert!(writes.is_empty(), "the swap back wrote: {writes:?}");
    assert_eq!((running.swaps("refused"), running.swaps("rolled_back")), (0, 0));
    running.stop().await.expect("a clean stop");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An operator client for `user`, whose only permissions are those a test
/// binds (the admin's credentials, impersonating it).
async fn client_as(ns: &TestNamespace<'_>, user: &str) -> Client {
    let kubeconfig = Kubeconfig::read_from(ns.plane.kubeconfig(User::Admin)).expect("the admin kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.expect("a config");
    config.auth_info.impersonate = Some(user.to_owned());
    Client::try_from(config).expect("a client")
}

/// What the Greeting operator needs in its namespace and cluster-wide,
/// plus `extra` rules in the namespace, for `user`.
async fn grant_greeting_operator(ns: &TestNamespace<'_>, user: &str, extra: &str) {
    let namespace = &ns.namespace;
    ns.plane
        .apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {user}, namespace: {namespace}}}\nrules:\n\
             - {{apiGroups: [example.c5c3.io], resources: [greetings], verbs: [get, list, watch]}}\n\
             - {{apiGroups: [example.c5c3.io], resources: [greetings/status], verbs: [patch, update]}}\n\
             - {{apiGroups: [example.c5c3.io], resources: [greetings/finalizers], verbs: [update]}}\n\
             - {{apiGroups: [''], resources: [configmaps], verbs: [get, list, watch, create, update, delete]}}\n\
             - {{apiGroups: [''], resources: [secrets], verbs: [get, list, watch]}}\n{extra}\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {user}, namespace: {namespace}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {user}}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {user}}}\nrules:\n\
             - {{apiGroups: [wasm-operator.c5c3.io], resources: [logicmodules], verbs: [get, list, watch]}}\n\
             - {{apiGroups: [wasm-operator.c5c3.io], resources: [logicmodules/status], verbs: [patch]}}\n\
             - {{apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}}\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {user}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {user}}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        ))
        .await
        .expect("the Greeting operator's role");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_whose_new_kind_cannot_be_listed_is_refused_until_the_role_allows_it() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let (v1, with_accounts) = (built("greeting.wasm"), built("greeting-service-account.wasm"));
    let registry = OciRegistry::start("hot-swap-kinds");
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let repository = format!("{}/modules/greeting", registry.address);
    let v1_pinned = oci.push(v1.clone(), &format!("{repository}:v1")).await.expect("pushing v1");
    let accounts_pinned =
        oci.push(with_accounts.clone(), &format!("{repository}:accounts")).await.expect("pushing the new version");

    let ns = TestNamespace::new("hot-swap-rbac").await;
    let plane = ns.plane;
    plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
    let module = LogicModule::from_bytes(
        memcached_tests::engine(),
        wasm_operator::runtime::logic_module::ModuleSource::Registry(v1_pinned.clone()),
        &v1,
        false,
    )
    .expect("v1 loads");
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    create_greetings(&ns).await;
    let user = format!("greeting-operator-{}", ns.namespace);
    grant_greeting_operator(&ns, &user, "").await;
    let client = client_as(&ns, &user).await;
    let configmaps: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns.namespace, &gvk("", "v1", "ConfigMap", "configmaps"));
    eventually("the role to reach the authorizer", || async { configmaps.list(&managed()).await.ok().map(drop) }).await;

    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
        "metadata": {"name": "greeting"}, "spec": {"image": v1_pinned},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");

    let mut options = options(&ns.namespace);
    options.swap_policy = SwapPolicy {
        poll_interval: Duration::from_millis(100),
        rollout_per_second: 200,
        cache_sync_timeout: Duration::from_secs(3),
        ..SwapPolicy::default()
    };
    options.logic_modules = Some(LogicModuleOptions {
        registry: Arc::new(Registry::new(RegistryOptions {
            insecure: vec![registry.address.clone()],
            ..RegistryOptions::default()
        })),
        // The refused version is verified again every poll interval (a
        // role may have caught up): long enough here to see its watch stop.
        poll_interval: Duration::from_secs(10),
    });
    let running = Running::start_slots(client, vec![ModuleSlot::new(module)], options);
    wait_revisions(&ns, "every ConfigMap from v1", Value::Null).await;
    wait_logic_module(&logic_modules, "v1 active", |s| has(s, "Active", "True", "Serving")).await;

    // The new version owns ServiceAccounts, which the role does not grant.
    logic_modules
        .patch(
            "greeting",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"image": accounts_pinned}})),
        )
        .await
        .expect("pointing the LogicModule at the new version");
    let status = wait_logic_module(&logic_modules, "the new version refused", |s| {
        has(s, "Verified", "False", "WatchFailed") && has(s, "Active", "False", "Refused")
    })
    .await;
    let message = condition(&status, "Verified")["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("ServiceAccount (v1)") && message.contains("forbidden"), "{message}");
    assert_eq!(status["activeDigest"], digest(&v1), "v1 keeps serving");
    assert_eq!(running.serving_digests(), [digest(&v1)]);
    eventually("the refused version's watch to stop", || async {
        (watches(&running, "v1/ServiceAccount") == 0).then_some(())
    })
    .await;
    assert_eq!(configmap_revisions(&ns).await, vec![Value::Null; PARENTS], "nothing changed");
    assert!(service_accounts(&ns).await.is_empty());

    // The role catches up: the next look verifies it again, and it goes live.
    grant_greeting_operator(
        &ns,
        &user,
        "- {apiGroups: [''], resources: [serviceaccounts], verbs: [get, list, watch, create, update, delete]}\n",
    )
    .await;
    let status = wait_logic_module(&logic_modules, "the new version live once allowed", |s| {
        has(s, "Verified", "True", "Verified") && has(s, "Active", "True", "Serving")
    })
    .await;
    assert_eq!(status["activeDigest"], digest(&with_accounts));
    wait_service_accounts(&ns, "a ServiceAccount per Greeting").await;
    wait_revisions(&ns, "every ConfigMap from the new version", json!("2")).await;
    assert_eq!(watches(&running, "v1/ServiceAccount"), 1);
    assert_eq!(running.swaps("succeeded"), 1);
    running.stop().await.expect("a clean stop");
    logic_modules.delete("greeting", &Default::default()).await.expect("deleting the LogicModule");
}
