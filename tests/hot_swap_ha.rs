//! Hot swaps with two replicas (issue 11, high availability): two operators
//! of the Greeting module in this process, leader election on, following one
//! LogicModule that names versions in a real OCI registry, against the real
//! API server. While the leader verifies and swaps in a new version, the
//! standby pulls, compiles and checks it too, and keeps the version the
//! leader serves ready; when the leader stops, the standby takes over on
//! that version: no compile, no swap, and no parent reconciled with the
//! older version it was started on. A takeover, or a restart, within a
//! swap's watch window keeps that window: the successor rolls the version
//! back when it fails, as the old leader would have.

#[path = "logic_module_support.rs"]
mod logic_module_support;
// Shared with tests/hot_swap.rs, which uses all of it.
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use logic_module_support::{GREETING_LOGIC_MODULE, LOGIC_MODULE_CRD, built, has, wait_logic_module};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::Options;
use wasm_operator::operator::leader::LeaderElectionOptions;
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::operator::swapping::swap_state::SwapPolicy;
use wasm_operator::runtime::logic_module::{LogicModule, ModuleSource, digest};
use wasm_operator::runtime::oci::{Registry, RegistryOptions};
use wasm_operator::runtime::slot::ModuleSlot;

const PARENTS: usize = 10;

/// One replica, as its metrics show it.
struct Replica(Running);

impl Replica {
    fn leads(&self) -> bool {
        self.0.metric("wasm_operator_leader", "") == 1
    }

    /// Module versions it compiled at run time.
    fn compiles(&self) -> u64 {
        self.0.metric("wasm_operator_module_compiles_total", "module=\"greeting\"")
    }

    fn swaps(&self, result: &str) -> u64 {
        self.0.swaps(result)
    }

    /// The digests of a metric whose series are 1 per version.
    fn digests(&self, metric: &str) -> Vec<String> {
        let prefix = format!("{metric}{{");
        let mut digests: Vec<String> = self
            .0
            .metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with(&prefix) && l.ends_with(" 1"))
            .filter_map(|l| l.split("digest=\"").nth(1)?.split('"').next().map(str::to_owned))
            .collect();
        digests.sort();
        digests
    }

    fn serving(&self) -> Vec<String> {
        self.digests("wasm_operator_module_info")
    }

    /// Versions held compiled.
    fn ready(&self) -> Vec<String> {
        self.digests("wasm_operator_module_ready")
    }
}

/// A replica of the Greeting operator starting on `module`, with leader
/// election (a short lease) and the LogicModule follower.
async fn start_replica(ns: &TestNamespace<'_>, registry: &str, identity: &str, module: LogicModule) -> Replica {
    let namespace = ns.namespace.clone();
    let mut leader_election = LeaderElectionOptions::new(namespace.clone(), "greeting-ha".into(), identity.to_owned());
    leader_election.lease_duration = Duration::from_secs(4);
    leader_election.renew_deadline = Duration::from_secs(3);
    leader_election.retry_period = Duration::from_millis(200);
    let replica_options = Options {
        leader_election: Some(leader_election),
        swap_policy: SwapPolicy {
            poll_interval: Duration::from_millis(100),
            rollout_per_second: 200,
            ..SwapPolicy::default()
        },
        logic_modules: Some(LogicModuleOptions {
            registry: Arc::new(Registry::new(RegistryOptions {
                insecure: vec![registry.to_owned()],
                ..RegistryOptions::default()
            })),
            poll_interval: Duration::from_millis(500),
        }),
        record_budget: 4 << 20,
        ..options(&namespace)
    };
    let client = ns.plane.client(control_plane::User::Operator).await.expect("an operator client");
    Replica(Running::start_slots(client, vec![ModuleSlot::new(module)], replica_options))
}

/// The Greeting CRD, `PARENTS` Greetings, the LogicModule CRD and a
/// LogicModule naming `image`.
async fn set_up(ns: &TestNamespace<'_>, module: &LogicModule, image: &str) -> Api<DynamicObject> {
    let plane = ns.plane;
    plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    for i in 0..PARENTS {
        let greeting: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
            "metadata": {"name": format!("g-{i:03}")}, "spec": {"message": format!("hi {i}")},
        }))
        .expect("a Greeting");
        greetings.create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
    }
    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
        "metadata": {"name": "greeting"}, "spec": {"image": image},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");
    logic_modules
}

async fn point_at(logic_modules: &Api<DynamicObject>, image: &str) {
    logic_modules
        .patch("greeting", &PatchParams::default(), &Patch::Merge(json!({"spec": {"image": image}})))
        .await
        .expect("pointing the LogicModule at another image");
}

async fn configmap_data(ns: &TestNamespace<'_>) -> Vec<(String, Value)> {
    let params = ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator");
    let list = ns.api(&gvk("", "v1", "ConfigMap", "configmaps")).list(&params).await.expect("listing ConfigMaps");
    list.items.into_iter().map(|c| (c.metadata.name.unwrap_or_default(), c.data["data"].clone())).collect()
}

/// Until there is one ConfigMap per Greeting and each satisfies `check`.
async fn wait_all(ns: &TestNamespace<'_>, what: &str, check: impl Fn(&str, &Value) -> bool) {
    eventually_within(Duration::from_secs(90), what, || async {
        let all = configmap_data(ns).await;
        (all.len() == PARENTS && all.iter().all(|(name, data)| check(name, data))).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_compiles_ahead_and_takes_over_on_the_swapped_version_without_compiling() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let _one_logic_module = GREETING_LOGIC_MODULE.lock().await;
    let (v1, v2) = (built("greeting.wasm"), built("greeting-v2.wasm"));
    let registry = OciRegistry::start("hot-swap-ha");
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let repository = format!("{}/modules/greeting", registry.address);
    let v1_pinned = oci.push(v1.clone(), &format!("{repository}:v1")).await.expect("pushing v1");
    let v2_pinned = oci.push(v2.clone(), &format!("{repository}:v2")).await.expect("pushing v2");

    let ns = TestNamespace::new("hot-swap-ha").await;
    let plane = ns.plane;
    let v1_module = || {
        LogicModule::from_bytes(memcached_tests::engine(), ModuleSource::Registry(v1_pinned.clone()), &v1, false)
            .expect("v1 loads")
    };
    let logic_modules = set_up(&ns, &v1_module(), &v1_pinned).await;
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));

    // Both replicas start on v1, the version the LogicModule names.
    let replica = |identity: &'static str| start_replica(&ns, &registry.address, identity, v1_module());
    let a = replica("replica-a").await;
    eventually("replica a to lead", || async { a.leads().then_some(()) }).await;
    wait_all(&ns, "every ConfigMap from v1", |_, d| d["revision"].is_null()).await;
    let b = replica("replica-b").await;
    wait_logic_module(&logic_modules, "v1 active", |s| has(s, "Active", "True", "Serving")).await;
    // Let b see the LogicModule (v1, which it holds: nothing to compile).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!b.leads(), "one leader");
    assert_eq!((a.compiles(), b.compiles()), (0, 0), "v1 was given compiled");
    assert_eq!(b.ready(), [digest(&v1)]);

    // v2 while a leads: a verifies and swaps; b compiles it ahead, checks
    // it, and keeps it ready.
    point_at(&logic_modules, &v2_pinned).await;
    let status = wait_logic_module(&logic_modules, "v2 active", |s| has(s, "Active", "True", "Serving")).await;
    assert_eq!(status["activeDigest"], digest(&v2));
    assert_eq!(a.swaps("succeeded"), 1);
    assert_eq!(a.serving(), [digest(&v2)]);
    let mut both = vec![digest(&v1), digest(&v2)];
    both.sort();
    eventually("the standby to hold v2 compiled", || async { (b.ready() == both).then_some(()) }).await;
    assert_eq!(b.compiles(), 1, "the standby compiled v2 once, ahead");
    assert!(!b.leads(), "still the standby");
    assert_eq!(b.0.reconciles("success") + b.0.reconciles("error"), 0, "a standby reconciles nothing");
    assert_eq!(b.swaps("succeeded") + b.swaps("refused"), 0, "a standby swaps nothing");
    wait_all(&ns, "every ConfigMap from v2", |_, d| d["revision"] == "2").await;

    // a stops cleanly; b takes over on v2, compiling nothing.
    let mark = plane.audit_mark().expect("the audit log");
    a.0.stop().await.expect("a clean stop");
    eventually("replica b to lead", || async { b.leads().then_some(()) }).await;
    assert_eq!(b.serving(), [digest(&v2)], "b took over on the version a served");
    edit(&greetings, "g-000", |greeting| greeting.data["spec"]["message"] = json!("after the takeover")).await;
    wait_all(&ns, "b serving v2", |name, d| {
        (name != "g-000" || d["message"] == "after the takeover") && d["revision"] == "2"
    })
    .await;
    eventually("b to reconcile every parent", || async { (b.0.reconciles("success") >= PARENTS as u64).then_some(()) })
        .await;
    assert_eq!(b.compiles(), 1, "no compile on failover");
    assert_eq!(b.swaps("succeeded") + b.swaps("refused"), 0, "b took over on v2 rather than swapping to it");
    let status = wait_logic_module(&logic_modules, "v2 active under b", |s| has(s, "Active", "True", "Serving")).await;
    assert_eq!(status["activeDigest"], digest(&v2));
    assert!(has(&status, "Verified", "True", "Verified"), "{status:#}");
    // Only the edited parent's ConfigMap was written: b never reconciled a
    // parent with v1, which would have dropped every `revision`.
    let writes: Vec<_> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() == Some("configmaps")).collect();
    assert!(writes.iter().all(|w| w.name.as_deref() == Some("g-000")), "writes after the takeover: {writes:?}");

    b.0.stop().await.expect("a clean stop");
    logic_modules.delete("greeting", &Default::default()).await.expect("deleting the LogicModule");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_keeps_the_rollback_window_of_a_recent_swap() {
    rollback_window_goes_on_after(Successor::Standby).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_rollback_window_of_a_recent_swap() {
    rollback_window_goes_on_after(Successor::Restart).await;
}

/// Who serves after the leader stops within a swap's watch window.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Successor {
    /// A standby that ran beside it.
    Standby,
    /// The same operator started again, started with the older version.
    Restart,
}

/// A version on probation goes live under replica a; a stops within the
/// window; the successor serves that version, and rolls it back when it
/// then fails on two parents, as a would have.
async fn rollback_window_goes_on_after(successor: Successor) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let _one_logic_module = GREETING_LOGIC_MODULE.lock().await;
    let (v2, fail_on_later) = (built("greeting-v2.wasm"), built("greeting-fail-on-later.wasm"));
    let registry = OciRegistry::start(&format!("hot-swap-window-{successor:?}"));
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let repository = format!("{}/modules/greeting", registry.address);
    let v2_pinned = oci.push(v2.clone(), &format!("{repository}:v2")).await.expect("pushing v2");
    let later_pinned =
        oci.push(fail_on_later.clone(), &format!("{repository}:fail-on-later")).await.expect("pushing fail-on-later");

    let ns = TestNamespace::new("hot-swap-window").await;
    let v2_module = || {
        LogicModule::from_bytes(memcached_tests::engine(), ModuleSource::Registry(v2_pinned.clone()), &v2, false)
            .expect("v2 loads")
    };
    let logic_modules = set_up(&ns, &v2_module(), &v2_pinned).await;
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    let a = start_replica(&ns, &registry.address, "replica-a", v2_module()).await;
    eventually("replica a to lead", || async { a.leads().then_some(()) }).await;
    wait_all(&ns, "every ConfigMap from v2", |_, d| d["revision"] == "2").await;
    let standby = match successor {
        Successor::Standby => Some(start_replica(&ns, &registry.address, "replica-b", v2_module()).await),
        Successor::Restart => None,
    };
    wait_logic_module(&logic_modules, "v2 active", |s| has(s, "Active", "True", "Serving")).await;

    // A version that behaves as v2 until a message starts with "later": it
    // passes its dry run and goes live under a, on probation.
    point_at(&logic_modules, &later_pinned).await;
    let status = wait_logic_module(&logic_modules, "fail-on-later active, on probation", |s| {
        has(s, "Active", "True", "Serving") && s["probation"].is_object()
    })
    .await;
    assert_eq!(status["activeDigest"], digest(&fail_on_later));
    assert_eq!(status["probation"]["previousDigest"], digest(&v2), "{status:#}");
    assert_eq!(status["probation"]["previousReference"], v2_pinned, "{status:#}");
    if let Some(b) = &standby {
        let mut both = vec![digest(&v2), digest(&fail_on_later)];
        both.sort();
        eventually("the standby to hold both versions", || async { (b.ready() == both).then_some(()) }).await;
    }

    // a goes away within the window; its successor serves the version a
    // served, and the window goes on under it.
    a.0.stop().await.expect("a clean stop");
    let next = match standby {
        Some(b) => b,
        None => start_replica(&ns, &registry.address, "replica-a", v2_module()).await,
    };
    eventually("the successor to lead", || async { next.leads().then_some(()) }).await;
    // The lease is held (the leader metric) a moment before the takeover
    // switches the version served.
    let served = [digest(&fail_on_later)];
    eventually("it serves the version a served", || async { (next.serving() == served).then_some(()) }).await;
    for (name, message) in [("g-004", "later, maybe"), ("g-005", "later, perhaps")] {
        edit(&greetings, name, |greeting| greeting.data["spec"]["message"] = json!(message)).await;
    }
    let status = wait_logic_module(&logic_modules, "rolled back by the successor", |s| {
        has(s, "RolledBack", "True", "RolledBack") && s["activeDigest"] == digest(&v2)
    })
    .await;
    assert!(status["probation"].is_null(), "no probation after the rollback: {status:#}");
    assert_eq!(next.swaps("rolled_back"), 1, "the successor rolled it back");
    assert_eq!(next.serving(), [digest(&v2)]);
    if successor == Successor::Standby {
        assert_eq!(next.compiles(), 1, "b compiled fail-on-later once, ahead, and rolled back to v2 without a compile");
    }
    wait_all(&ns, "v2 serving every parent, the edited ones too", |name, d| match name {
        "g-004" => d["message"] == "later, maybe" && d["revision"] == "2",
        "g-005" => d["message"] == "later, perhaps" && d["revision"] == "2",
        _ => d["revision"] == "2",
    })
    .await;
    next.0.stop().await.expect("a clean stop");
    logic_modules.delete("greeting", &Default::default()).await.expect("deleting the LogicModule");
}
