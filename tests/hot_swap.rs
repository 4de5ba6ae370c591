//! Changing the logic of a running operator: the module file is watched;
//! a replaced file is verified (it loads, honours the contract, keeps its
//! kinds, and a dry run over every parent fails none the active version
//! reconciles) before it is swapped in and rolled out, and a version that
//! then fails on parents is rolled back by the host itself. The versions
//! are builds of the real Greeting module by cargo feature (`make test`
//! builds them): v1 (the default), v2 (stamps `revision: "2"`),
//! `fail-on-later` (v2, but traps on messages starting with "later"),
//! `trap-always`, `loop-always`, `allocate-always`, and the
//! contract-breaking `wrong-world`. The same pipeline runs for a LogicModule
//! resource naming a module in a real OCI registry.

#[path = "logic_module_support.rs"]
mod logic_module_support;
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use logic_module_support::{LOGIC_MODULE_CRD, built, has, logic_module_events, wait_logic_module};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::leader::LeaderElectionOptions;
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::operator::swapping::swap_state::SwapPolicy;
use wasm_operator::runtime::logic_module::digest;
use wasm_operator::runtime::oci::{Registry, RegistryOptions};
use wasm_operator::runtime::slot::ModuleSlot;

const PARENTS: usize = 100;

/// Replaces the watched file the way a deployment tool does: write beside
/// it, rename over it.
fn replace(live: &Path, bytes: &[u8]) {
    let beside = live.with_extension("wasm.new");
    std::fs::write(&beside, bytes).expect("writing the new version");
    std::fs::rename(&beside, live).expect("renaming it over the live file");
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hot-swap-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

struct Operator<'a> {
    running: &'a Running,
}

impl Operator<'_> {
    fn swaps(&self, result: &str) -> u64 {
        self.running.swaps(result)
    }

    async fn wait_swaps(&self, result: &str, count: u64) {
        eventually_within(Duration::from_secs(60), &format!("{count} swaps {result}"), || async {
            (self.swaps(result) >= count).then_some(())
        })
        .await;
        assert_eq!(self.swaps(result), count, "{result}");
    }

    /// The digest the module_info metric reports as active.
    fn active_digest(&self) -> Vec<String> {
        self.running.serving_digests()
    }
}

async fn configmaps(ns: &TestNamespace<'_>) -> Vec<DynamicObject> {
    let params = ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator");
    ns.api(&gvk("", "v1", "ConfigMap", "configmaps")).list(&params).await.expect("listing ConfigMaps").items
}

/// Until every Greeting's ConfigMap satisfies `check` (given the parent's index).
async fn wait_all(ns: &TestNamespace<'_>, what: &str, check: impl Fn(usize, &Value) -> bool) {
    wait_all_of(ns, PARENTS, what, check).await
}

async fn wait_all_of(ns: &TestNamespace<'_>, parents: usize, what: &str, check: impl Fn(usize, &Value) -> bool) {
    eventually_within(Duration::from_secs(90), what, || async {
        let all = configmaps(ns).await;
        let good = all
            .iter()
            .filter(|c| {
                let name = c.metadata.name.as_deref().unwrap_or_default();
                let index: Option<usize> = name.strip_prefix("g-").and_then(|i| i.parse().ok());
                index.is_some_and(|i| check(i, &c.data["data"]))
            })
            .count();
        (good == parents).then_some(())
    })
    .await;
}

async fn set_message(greetings: &Api<DynamicObject>, name: &str, message: &str) {
    edit(greetings, name, |greeting| greeting.data["spec"]["message"] = json!(message)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_module_file_is_verified_swapped_rolled_out_and_rolled_back() {
    let v1 = built("greeting.wasm");
    let v2 = built("greeting-v2.wasm");
    let fail_on_later = built("greeting-fail-on-later.wasm");
    let dir = temp_dir("pipeline");
    let live = dir.join("greeting.wasm");
    std::fs::write(&live, &v1).expect("installing v1");

    let ns = TestNamespace::new("hot-swap").await;
    let plane = ns.plane;
    let module = wasm_operator::runtime::logic_module::LogicModule::from_file(memcached_tests::engine(), &live, false)
        .expect("v1 loads");
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    create_greetings(&greetings, PARENTS).await;

    let mut options = options(&ns.namespace);
    options.concurrency = 4;
    options.swap_policy = SwapPolicy {
        poll_interval: Duration::from_millis(100),
        rollout_per_second: 200,
        watch_window: Duration::from_secs(120),
        ..SwapPolicy::default()
    };
    let client = plane.client(control_plane::User::Operator).await.expect("an operator client");
    let running = Running::start_slots(client, vec![ModuleSlot::watching(module, live.clone(), false)], options);
    let operator = Operator { running: &running };
    wait_all(&ns, "every ConfigMap from v1", |i, d| d["message"] == format!("hi {i}") && d["revision"].is_null()).await;
    assert_eq!(operator.active_digest(), [digest(&v1)]);

    // Refused, each for its reason; v1 keeps serving and nothing changes.
    let refusals: [(&str, Vec<u8>); 3] = [
        ("a module that traps on every parent", built("greeting-trap-always.wasm")),
        ("corrupt bytes", v2[..v2.len() / 2].to_vec()),
        ("a module for another contract", built("greeting-wrong-world.wasm")),
    ];
    for (count, (what, bytes)) in (1..).zip(refusals) {
        replace(&live, &bytes);
        operator.wait_swaps("refused", count).await;
        assert_eq!(operator.active_digest(), [digest(&v1)], "after {what}");
    }
    let before = configmaps(&ns).await;
    assert_eq!(before.len(), PARENTS, "nothing deleted");
    assert!(before.iter().all(|c| c.data["data"]["revision"].is_null()), "nothing changed");
    assert_eq!(operator.swaps("succeeded"), 0);

    // v2 under load: a writer edits parents while the swap happens.
    let errors_before = running.reconciles("error");
    let writer = {
        let greetings = greetings.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                set_message(&greetings, &format!("g-{i:03}"), &format!("edited {i}")).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    replace(&live, &v2);
    operator.wait_swaps("succeeded", 1).await;
    writer.await.expect("the writer finished");
    wait_all(&ns, "every ConfigMap from v2", |i, d| {
        let message = if i < 20 { format!("edited {i}") } else { format!("hi {i}") };
        d["message"] == message && d["revision"] == "2"
    })
    .await;
    assert_eq!(operator.active_digest(), [digest(&v2)]);
    assert_eq!(running.reconciles("error"), errors_before, "no reconcile failed during the swap");

    // The same bytes again: nothing happens.
    replace(&live, &v2);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!((operator.swaps("succeeded"), operator.swaps("refused")), (1, 3));

    // A version that behaves as v2 for every parent: swapped in, rolled out,
    // and not one write.
    let mark = plane.audit_mark().expect("the audit log");
    let reconciled = running.reconciles("success");
    replace(&live, &fail_on_later);
    operator.wait_swaps("succeeded", 2).await;
    eventually("the rollout to reconcile every parent", || async {
        (running.reconciles("success") >= reconciled + PARENTS as u64).then_some(())
    })
    .await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "a swap to identical behaviour wrote: {writes:?}");

    // It fails on some parents after the swap: the host goes back to v2.
    set_message(&greetings, "g-050", "later, maybe").await;
    set_message(&greetings, "g-051", "later, perhaps").await;
    operator.wait_swaps("rolled_back", 1).await;
    assert_eq!(operator.active_digest(), [digest(&v2)]);
    // v2 reconciles them again, as it would have.
    wait_all(&ns, "v2 serving every parent again", |i, d| match i {
        50 => d["message"] == "later, maybe" && d["revision"] == "2",
        51 => d["message"] == "later, perhaps" && d["revision"] == "2",
        _ => d["revision"] == "2",
    })
    .await;
    assert_eq!(configmaps(&ns).await.len(), PARENTS, "nothing deleted");

    running.stop().await.expect("a clean stop");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn create_greetings(greetings: &Api<DynamicObject>, count: usize) {
    for i in 0..count {
        let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                              "metadata": {"name": format!("g-{i:03}")}, "spec": {"message": format!("hi {i}")}});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        greetings.create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
    }
}

fn quick_swaps(namespace: &str) -> wasm_operator::operator::Options {
    let mut options = options(namespace);
    options.swap_policy =
        SwapPolicy { poll_interval: Duration::from_millis(100), rollout_per_second: 200, ..SwapPolicy::default() };
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_restarted_mid_swap_comes_up_on_the_declared_module() {
    const COUNT: usize = 5;
    let v2 = built("greeting-v2.wasm");
    let dir = temp_dir("restart");
    let live = dir.join("greeting.wasm");
    std::fs::write(&live, built("greeting.wasm")).expect("installing v1");
    let ns = TestNamespace::new("hot-swap-restart").await;
    let plane = ns.plane;
    let load = || {
        wasm_operator::runtime::logic_module::LogicModule::from_file(memcached_tests::engine(), &live, false)
            .expect("loads")
    };
    let module = load();
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    create_greetings(&ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings")), COUNT).await;
    let client = || plane.client(control_plane::User::Operator);
    let first = Running::start_slots(
        client().await.expect("a client"),
        vec![ModuleSlot::watching(module, live.clone(), false)],
        quick_swaps(&ns.namespace),
    );
    wait_all_of(&ns, COUNT, "every ConfigMap from v1", |_, d| d["revision"].is_null()).await;

    // The file now declares v2; the operator stops before, during or just
    // after the swap.
    replace(&live, &v2);
    first.stop().await.expect("a clean stop");

    let second = Running::start_slots(
        client().await.expect("a client"),
        vec![ModuleSlot::watching(load(), live.clone(), false)],
        quick_swaps(&ns.namespace),
    );
    let active = Operator { running: &second };
    let wanted = vec![digest(&v2)];
    eventually("the file's version serving", || async { (active.active_digest() == wanted).then_some(()) }).await;
    wait_all_of(&ns, COUNT, "every ConfigMap from v2", |_, d| d["revision"] == "2").await;
    assert_eq!(active.swaps("succeeded") + active.swaps("refused"), 0, "nothing left to swap");
    second.stop().await.expect("a clean stop");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A standby that takes over serves the version the watched file holds,
/// which the leader swapped in while it waited. `make soak` found the new
/// leader on the version it had started with, until the file changed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_taking_over_serves_the_version_the_file_holds() {
    const COUNT: usize = 5;
    let v2 = built("greeting-v2.wasm");
    let dir = temp_dir("takeover");
    let live = dir.join("greeting.wasm");
    std::fs::write(&live, built("greeting.wasm")).expect("installing v1");
    let ns = TestNamespace::new("hot-swap-takeover").await;
    let plane = ns.plane;
    let load = || {
        wasm_operator::runtime::logic_module::LogicModule::from_file(memcached_tests::engine(), &live, false)
            .expect("loads")
    };
    plane.apply_yaml(&load().manifest().crd).await.expect("installing the Greeting CRD");
    create_greetings(&ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings")), COUNT).await;
    let replica_options = |identity: &str| {
        let mut election =
            LeaderElectionOptions::new(ns.namespace.clone(), "greeting-takeover".into(), identity.to_owned());
        election.lease_duration = Duration::from_secs(4);
        election.renew_deadline = Duration::from_secs(3);
        election.retry_period = Duration::from_millis(200);
        wasm_operator::operator::Options { leader_election: Some(election), ..quick_swaps(&ns.namespace) }
    };
    let start = |identity: &'static str| {
        let slot = ModuleSlot::watching(load(), live.clone(), false);
        async move {
            let client = plane.client(control_plane::User::Operator).await.expect("a client");
            Running::start_slots(client, vec![slot], replica_options(identity))
        }
    };
    let leads = |running: &Running| metric_value(&running.metrics.encode(), "wasm_operator_leader", "") == 1;
    let first = start("first").await;
    eventually("the first replica to lead", || async { leads(&first).then_some(()) }).await;
    let second = start("second").await;
    wait_all_of(&ns, COUNT, "every ConfigMap from v1", |_, d| d["revision"].is_null()).await;

    replace(&live, &v2);
    let wanted = vec![digest(&v2)];
    let leader = Operator { running: &first };
    eventually("v2 serving on the leader", || async { (leader.active_digest() == wanted).then_some(()) }).await;
    wait_all_of(&ns, COUNT, "every ConfigMap from v2", |_, d| d["revision"] == "2").await;
    first.stop().await.expect("a clean stop");

    let successor = Operator { running: &second };
    eventually("the second replica to lead on v2", || async {
        (leads(&second) && successor.active_digest() == wanted).then_some(())
    })
    .await;
    second.stop().await.expect("a clean stop");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn set_image(api: &Api<DynamicObject>, spec: Value) -> Result<DynamicObject, kube::Error> {
    api.patch("greeting", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec }))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logic_module_from_a_registry_is_verified_swapped_rolled_back_and_kept_across_a_restart() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let v1 = built("greeting.wasm");
    let v2 = built("greeting-v2.wasm");
    let registry = OciRegistry::start("logic-module");
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let repository = format!("{}/modules/greeting", registry.address);

    // `wasm-operator push` publishes a module and prints it pinned by digest;
    // it will not publish what is not a logic module.
    let host = control_plane::repo_root().join("target/release/wasm-operator");
    let push = |file: &str, tag: &str| {
        std::process::Command::new(&host)
            .arg("push")
            .arg(control_plane::repo_root().join("target").join(file))
            .arg(format!("{repository}:{tag}"))
            .args(["--insecure-registry", &registry.address])
            .output()
            .expect("running wasm-operator push")
    };
    let pushed = push("greeting.wasm", "v1");
    assert!(pushed.status.success(), "push: {}", String::from_utf8_lossy(&pushed.stderr));
    let v1_pinned = String::from_utf8(pushed.stdout).expect("utf-8").trim().to_owned();
    assert!(v1_pinned.starts_with(&format!("{repository}@sha256:")), "{v1_pinned}");
    let refused = push("memcached.wasm.missing", "nothing");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("memcached.wasm.missing"), "names the file");

    let publish = |bytes: Vec<u8>, tag: &'static str| {
        let oci = &oci;
        let reference = format!("{repository}:{tag}");
        async move { oci.push(bytes, &reference).await.expect("pushing") }
    };
    let v2_pinned = publish(v2.clone(), "v2").await;
    let fail_on_later = built("greeting-fail-on-later.wasm");
    let fail_on_later_pinned = publish(fail_on_later.clone(), "fail-on-later").await;
    // Bytes changed behind the registry's back: a version whose stored
    // layer is then overwritten with other bytes of the same length.
    let rebuilt = built("greeting-v1-rebuilt.wasm");
    let tampered_pinned = publish(rebuilt.clone(), "tampered").await;
    let mut other = rebuilt.clone();
    let last = other.len() - 1;
    other[last] ^= 0xff;
    std::fs::write(registry.blob_file(&digest(&rebuilt)), &other).expect("tampering with the stored layer");

    let ns = TestNamespace::new("logic-module").await;
    let plane = ns.plane;
    plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
    let module_file = temp_dir("logic-module").join("greeting.wasm");
    std::fs::write(&module_file, &v1).expect("installing v1");
    let load = || {
        wasm_operator::runtime::logic_module::LogicModule::from_file(memcached_tests::engine(), &module_file, false)
            .expect("loads")
    };
    plane.apply_yaml(&load().manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    create_greetings(&greetings, PARENTS).await;
    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
        "metadata": {"name": "greeting"},
        "spec": {"image": v1_pinned},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");

    let options = || {
        let mut options = quick_swaps(&ns.namespace);
        options.logic_modules = Some(LogicModuleOptions {
            registry: Arc::new(Registry::new(RegistryOptions {
                insecure: vec![registry.address.clone()],
                ..RegistryOptions::default()
            })),
            poll_interval: Duration::from_millis(500),
        });
        options
    };
    let client = || plane.client(control_plane::User::Operator);
    // The module starts from its file (not watched here): the LogicModule
    // names the same bytes, so it is active as it is.
    let running = Running::start_slots(client().await.expect("a client"), vec![ModuleSlot::new(load())], options());
    let operator = Operator { running: &running };
    wait_all(&ns, "every ConfigMap from v1", |i, d| d["message"] == format!("hi {i}") && d["revision"].is_null()).await;
    let status = wait_logic_module(&logic_modules, "v1 active, every parent counted", |s| {
        has(s, "Fetched", "True", "Pulled")
            && has(s, "Verified", "True", "Verified")
            && has(s, "Active", "True", "Serving")
            && s["reconciledParents"] == PARENTS
    })
    .await;
    assert_eq!(status["activeDigest"], digest(&v1));
    assert_eq!(status["reference"], v1_pinned);

    // A tag without a digest is refused at admission unless allowed.
    let tag_only = set_image(&logic_modules, json!({"image": format!("{repository}:v2")})).await;
    assert!(tag_only.is_err_and(|e| e.to_string().contains("pinned by digest")), "a bare tag is refused");

    // Refused, each for its reason; v1 keeps serving and nothing changes.
    let refusals = [
        (
            "a digest the registry lacks",
            format!("{repository}@sha256:{}", "0".repeat(64)),
            ("Fetched", "PullFailed", "@sha256:0000000000"),
        ),
        ("bytes changed behind the registry's back", tampered_pinned, ("Fetched", "DigestMismatch", "hash to")),
        (
            "corrupt bytes",
            publish(v2[..v2.len() / 2].to_vec(), "corrupt").await,
            ("Verified", "LoadFailed", "compiling"),
        ),
        (
            "a module for another contract",
            publish(built("greeting-wrong-world.wasm"), "wrong-world").await,
            ("Verified", "LoadFailed", "is not a logic module"),
        ),
        (
            "a module that traps on every parent",
            publish(built("greeting-trap-always.wasm"), "trap").await,
            // The panic's message and place, through the SDK's panic hook.
            ("Verified", "DryRunFailed", "panicked at tests/modules/greeting/src/lib.rs"),
        ),
        (
            "a module that loops",
            publish(built("greeting-loop-always.wasm"), "loop").await,
            ("Verified", "DryRunFailed", "deadline"),
        ),
        (
            "a module that allocates without bound",
            publish(built("greeting-allocate-always.wasm"), "allocate").await,
            ("Verified", "DryRunFailed", "out of memory"),
        ),
    ];
    for (what, reference, (type_, reason, says)) in refusals {
        set_image(&logic_modules, json!({"image": reference})).await.expect("setting the image");
        let status = wait_logic_module(&logic_modules, what, |s| has(s, type_, "False", reason)).await;
        let message = condition(&status, type_)["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(says), "{what}: {message}");
        assert!(has(&status, "Active", "False", if type_ == "Fetched" { "NotFetched" } else { "Refused" }), "{what}");
        assert_eq!(status["activeDigest"], digest(&v1), "{what}: v1 keeps serving");
        assert_eq!(operator.active_digest(), [digest(&v1)], "after {what}");
    }
    assert_eq!(operator.swaps("refused"), 5, "every refused verification counted");
    assert!(!logic_module_events(&ns.client, "DryRunFailed").await.is_empty(), "a Warning event says why");
    let before = configmaps(&ns).await;
    assert_eq!(before.len(), PARENTS, "nothing deleted");
    assert!(before.iter().all(|c| c.data["data"]["revision"].is_null()), "nothing changed");

    // v2 by a tag the resource allows, while a writer edits parents.
    let errors_before = running.reconciles("error");
    let writer = {
        let greetings = greetings.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                set_message(&greetings, &format!("g-{i:03}"), &format!("edited {i}")).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    set_image(&logic_modules, json!({"image": format!("{repository}:v2"), "allowTag": true})).await.expect("v2");
    let status = wait_logic_module(&logic_modules, "v2 active", |s| has(s, "Active", "True", "Serving")).await;
    assert_eq!(status["reference"], v2_pinned, "the tag resolved to the pushed digest");
    assert_eq!(status["activeDigest"], digest(&v2));
    writer.await.expect("the writer finished");
    wait_all(&ns, "every ConfigMap from v2", |i, d| {
        let message = if i < 20 { format!("edited {i}") } else { format!("hi {i}") };
        d["message"] == message && d["revision"] == "2"
    })
    .await;
    assert_eq!(running.reconciles("error"), errors_before, "no reconcile failed during the swap");
    assert!(!logic_module_events(&ns.client, "Swapped").await.is_empty());

    // Identical behaviour for every parent: swapped in, and no ConfigMap written.
    let mark = plane.audit_mark().expect("the audit log");
    let reconciled = running.reconciles("success");
    set_image(&logic_modules, json!({"image": fail_on_later_pinned, "allowTag": false})).await.expect("fail-on-later");
    wait_logic_module(&logic_modules, "fail-on-later active", |s| has(s, "Active", "True", "Serving")).await;
    eventually("the rollout to reconcile every parent", || async {
        (running.reconciles("success") >= reconciled + PARENTS as u64).then_some(())
    })
    .await;
    let writes: Vec<_> =
        ns.operator_writes(mark).await.into_iter().filter(|w| w.resource.as_deref() == Some("configmaps")).collect();
    assert!(writes.is_empty(), "a swap to identical behaviour wrote: {writes:?}");

    // It fails on some parents: rolled back to v2 by the host, and said so.
    set_message(&greetings, "g-050", "later, maybe").await;
    set_message(&greetings, "g-051", "later, perhaps").await;
    let status = wait_logic_module(&logic_modules, "rolled back", |s| {
        has(s, "RolledBack", "True", "RolledBack") && has(s, "Active", "False", "RolledBack")
    })
    .await;
    assert_eq!(status["activeDigest"], digest(&v2));
    assert_eq!(status["activeReference"], v2_pinned, "where a restart finds the serving version: {status:#}");
    assert!(condition(&status, "RolledBack")["message"].as_str().is_some_and(|m| m.contains("g-05")), "{status}");
    assert_eq!(operator.active_digest(), [digest(&v2)]);
    eventually("a RolledBack event", || async {
        (!logic_module_events(&ns.client, "RolledBack").await.is_empty()).then_some(())
    })
    .await;
    wait_all(&ns, "v2 serving every parent again", |_, d| d["revision"] == "2").await;
    running.stop().await.expect("a clean stop");

    // Restarted from the v1 file: it comes up on v2, the version that was
    // serving, and does not offer the rolled-back one again.
    let restarted = Running::start_slots(client().await.expect("a client"), vec![ModuleSlot::new(load())], options());
    let operator = Operator { running: &restarted };
    let wanted = vec![digest(&v2)];
    eventually("v2 serving after the restart", || async { (operator.active_digest() == wanted).then_some(()) }).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(operator.swaps("succeeded"), 0, "the rolled-back version is not offered again");
    let status =
        wait_logic_module(&logic_modules, "still rolled back", |s| has(s, "RolledBack", "True", "RolledBack")).await;
    assert_eq!(status["activeDigest"], digest(&v2));
    assert_eq!(configmaps(&ns).await.len(), PARENTS, "nothing deleted");
    restarted.stop().await.expect("a clean stop");
    logic_modules.delete("greeting", &Default::default()).await.expect("deleting the LogicModule");
    let _ = std::fs::remove_dir_all(module_file.parent().expect("its dir"));
}
