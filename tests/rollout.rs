//! A LogicModule's rollout: the leader plans every verified version against
//! the serving one (`status.plan`, an event), `spec.rollout`'s gates hold a
//! version that changes or deletes too much, or every version under Manual
//! approval, writing nothing until `approvedDigest` names it, and a canary
//! serves the new version to the selected parents only for the watch
//! window, then to every parent, rolled back when it fails there; and a
//! shadow runs a candidate beside the serving version, counting where
//! their answers differ and writing nothing for it. Real API
//! server (audit log), real OCI registry, the Greeting module's builds:
//! v1, `no-audiences` (v1 without the audiences' ConfigMaps: a version
//! that deletes), v2 (stamps `revision: "2"`) and `fail-on-later` (v2 that
//! traps on messages starting with "later"), `v1-rebuilt` (v1's behaviour,
//! other bytes).

#[path = "logic_module_support.rs"]
mod logic_module_support;
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use logic_module_support::{
    GREETING_LOGIC_MODULE, LOGIC_MODULE_CRD, built, has, logic_module_events, wait_logic_module,
};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::operator::swapping::swap_state::SwapPolicy;
use wasm_operator::runtime::logic_module::{LogicModule, digest};
use wasm_operator::runtime::oci::{Registry, RegistryOptions};
use wasm_operator::runtime::slot::ModuleSlot;

/// The parents: g-0 .. g-5; the first three with an audience (a second
/// ConfigMap each), the last two labelled for the canary.
const PARENTS: usize = 6;

fn greeting(i: usize) -> Value {
    let audiences = if i < 3 { json!(["a"]) } else { json!([]) };
    let labels = if i >= 4 { json!({"canary": "yes"}) } else { json!({}) };
    json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
           "metadata": {"name": format!("g-{i}"), "labels": labels},
           "spec": {"message": format!("hi {i}"), "audiences": audiences}})
}

/// A registry with the versions pushed, the Greeting CRD and parents, and
/// the LogicModule naming v1 with `rollout`.
struct Setup {
    ns: TestNamespace<'static>,
    _registry: OciRegistry,
    registry_address: String,
    logic_modules: Api<DynamicObject>,
    pinned: std::collections::BTreeMap<&'static str, String>,
}

async fn setup(prefix: &str, rollout: Value) -> Setup {
    let registry = OciRegistry::start(prefix);
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let mut pinned = std::collections::BTreeMap::new();
    for (name, file) in [
        ("v1", "greeting.wasm"),
        ("no-audiences", "greeting-no-audiences.wasm"),
        ("v2", "greeting-v2.wasm"),
        ("fail-on-later", "greeting-fail-on-later.wasm"),
        ("v1-rebuilt", "greeting-v1-rebuilt.wasm"),
    ] {
        let reference = format!("{}/modules/greeting:{name}", registry.address);
        pinned.insert(name, oci.push(built(file), &reference).await.expect("pushing"));
    }
    let ns = TestNamespace::new(prefix).await;
    ns.plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
    ns.plane.apply_yaml(&v1().manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = greetings(&ns);
    for i in 0..PARENTS {
        let object: DynamicObject = serde_json::from_value(greeting(i)).expect("a Greeting");
        greetings.create(&PostParams::default(), &object).await.expect("creating a Greeting");
    }
    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
        "metadata": {"name": "greeting"},
        "spec": {"image": pinned["v1"], "rollout": rollout},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");
    let registry_address = registry.address.clone();
    Setup { ns, _registry: registry, registry_address, logic_modules, pinned }
}

fn v1() -> LogicModule {
    module_file("greeting.wasm")
}

fn greetings(ns: &TestNamespace<'_>) -> Api<DynamicObject> {
    ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"))
}

impl Setup {
    /// The operator on v1, following the LogicModule, with `watch_window`.
    async fn start(&self, watch_window: Duration) -> Running {
        let mut options = options(&self.ns.namespace);
        options.swap_policy = SwapPolicy {
            poll_interval: Duration::from_millis(100),
            rollout_per_second: 200,
            watch_window,
            ..SwapPolicy::default()
        };
        options.logic_modules = Some(LogicModuleOptions {
            registry: Arc::new(Registry::new(RegistryOptions {
                insecure: vec![self.registry_address.clone()],
                ..RegistryOptions::default()
            })),
            poll_interval: Duration::from_millis(500),
        });
        let client = self.ns.plane.client(control_plane::User::Operator).await.expect("an operator client");
        Running::start_slots(client, vec![ModuleSlot::new(v1())], options)
    }

    async fn patch_spec(&self, spec: Value) {
        let patch = Patch::Merge(json!({ "spec": spec }));
        self.logic_modules.patch("greeting", &PatchParams::default(), &patch).await.expect("patching the LogicModule");
    }

    /// ConfigMap name -> its data.
    async fn configmaps(&self) -> std::collections::BTreeMap<String, Value> {
        let params = ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator");
        let list = self.ns.api(&gvk("", "v1", "ConfigMap", "configmaps")).list(&params).await.expect("listing");
        list.items.into_iter().map(|c| (c.metadata.name.clone().unwrap_or_default(), c.data["data"].clone())).collect()
    }

    async fn wait_configmaps(&self, what: &str, check: impl Fn(&std::collections::BTreeMap<String, Value>) -> bool) {
        eventually_within(Duration::from_secs(60), what, || async { check(&self.configmaps().await).then_some(()) })
            .await;
    }

    /// Until every Greeting's status has a phase that `check` accepts.
    async fn wait_phases(&self, what: &str, check: impl Fn(&str) -> bool) {
        eventually_within(Duration::from_secs(60), what, || async {
            let list = greetings(&self.ns).list(&ListParams::default()).await.ok()?;
            let phases: Vec<String> =
                list.items.iter().map(|g| g.data["status"]["phase"].as_str().unwrap_or_default().to_owned()).collect();
            (phases.len() == PARENTS && phases.iter().all(|phase| !phase.is_empty() && check(phase))).then_some(())
        })
        .await;
    }

    async fn remove(self) {
        let _ = self.logic_modules.delete("greeting", &Default::default()).await;
    }
}

fn revision(data: &Value) -> &Value {
    &data["revision"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_hold_a_version_until_its_digest_is_approved_and_write_nothing_meanwhile() {
    let _turn = GREETING_LOGIC_MODULE.lock().await;
    let setup = setup("rollout-gates", json!({"maxDeletedObjects": 0})).await;
    let running = setup.start(Duration::from_secs(120)).await;
    setup.wait_configmaps("v1's nine ConfigMaps", |c| c.len() == 9).await;
    wait_logic_module(&setup.logic_modules, "v1 serving", |s| has(s, "Active", "True", "Serving")).await;

    // A version that deletes the audiences' ConfigMaps: held by maxDeletedObjects 0.
    let mark = setup.ns.plane.audit_mark().expect("the audit log");
    setup.patch_spec(json!({"image": setup.pinned["no-audiences"]})).await;
    let no_audiences = digest(&built("greeting-no-audiences.wasm"));
    let status = wait_logic_module(&setup.logic_modules, "no-audiences awaiting approval", |s| {
        has(s, "Verified", "True", "Verified") && has(s, "Active", "False", "AwaitingApproval")
    })
    .await;
    let plan = &status["plan"];
    assert_eq!(plan["digest"], no_audiences, "{status:#}");
    assert_eq!((plan["parents"].as_u64(), plan["changed"].as_u64()), (Some(6), Some(3)), "{plan:#}");
    assert_eq!(
        (plan["deleted"].as_u64(), plan["updated"].as_u64(), plan["created"].as_u64()),
        (Some(3), Some(0), Some(0))
    );
    let ns = &setup.ns.namespace;
    assert_eq!(plan["changedParents"], json!([format!("{ns}/g-0"), format!("{ns}/g-1"), format!("{ns}/g-2")]));
    let active = condition(&status, "Active");
    let message = active["message"].as_str().unwrap_or_default();
    assert!(message.contains("it deletes 3 objects, maxDeletedObjects is 0"), "{message}");
    assert!(message.contains(&no_audiences), "names the digest to approve: {message}");
    let events = logic_module_events(&setup.ns.client, "AwaitingApproval").await;
    assert!(
        events.iter().any(|e| e.contains("6 parents (Greeting): 3 changed: 0 to create, 0 to update, 3 to delete")),
        "the plan in an event: {events:?}"
    );
    // It waits, and nothing is written for it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(setup.configmaps().await.len(), 9, "nothing deleted while it waits");
    let writes = setup.ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "written while awaiting approval: {writes:?}");
    assert_eq!(running.swaps("succeeded"), 0);

    // Approved: it goes live and deletes them.
    setup.patch_spec(json!({"rollout": {"approvedDigest": no_audiences}})).await;
    wait_logic_module(&setup.logic_modules, "no-audiences serving", |s| has(s, "Active", "True", "Serving")).await;
    setup.wait_configmaps("the audiences' ConfigMaps deleted", |c| c.len() == 6 && !c.contains_key("g-0-a")).await;
    // And every status written after them: the writes this version makes
    // end before the next one is held.
    setup.wait_phases("each status naming its one ConfigMap", |phase| !phase.contains("-a")).await;

    // Manual: every version waits, even one within the gates.
    let mark = setup.ns.plane.audit_mark().expect("the audit log");
    setup.patch_spec(json!({"image": setup.pinned["v2"], "rollout": {"approval": "Manual"}})).await;
    let v2 = digest(&built("greeting-v2.wasm"));
    let status = wait_logic_module(&setup.logic_modules, "v2 awaiting manual approval", |s| {
        has(s, "Active", "False", "AwaitingApproval") && s["plan"]["digest"] == v2
    })
    .await;
    // v2 is v1 with a revision: it brings the audiences' ConfigMaps back.
    let counts = ["updated", "created", "deleted"].map(|n| status["plan"][n].as_u64());
    assert_eq!(counts, [Some(6), Some(3), Some(0)], "{status:#}");
    assert!(condition(&status, "Active")["message"].as_str().unwrap_or_default().contains("approval is Manual"));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = setup.ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "written while awaiting manual approval: {writes:?}");
    setup.patch_spec(json!({"rollout": {"approvedDigest": v2}})).await;
    wait_logic_module(&setup.logic_modules, "v2 serving", |s| has(s, "Active", "True", "Serving")).await;
    setup.wait_configmaps("v2 everywhere", |c| c.len() == 9 && c.values().all(|d| revision(d) == "2")).await;

    running.stop().await.expect("a clean stop");
    setup.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_serves_its_parents_for_the_window_then_every_parent_and_rolls_back_there() {
    let _turn = GREETING_LOGIC_MODULE.lock().await;
    let canary = json!({"canary": {"selector": {"matchLabels": {"canary": "yes"}}}});
    let setup = setup("rollout-canary", canary).await;
    let window = Duration::from_secs(12);
    let running = setup.start(window).await;
    setup.wait_configmaps("v1's nine ConfigMaps", |c| c.len() == 9).await;
    wait_logic_module(&setup.logic_modules, "v1 serving", |s| has(s, "Active", "True", "Serving")).await;

    let mark = setup.ns.plane.audit_mark().expect("the audit log");
    setup.patch_spec(json!({"image": setup.pinned["v2"]})).await;
    let v2 = digest(&built("greeting-v2.wasm"));
    let status = wait_logic_module(&setup.logic_modules, "v2 on a canary", |s| {
        has(s, "Active", "False", "Canary") && s["canary"]["digest"] == v2
    })
    .await;
    assert_eq!(status["canary"]["parents"], 2, "{status:#}");
    assert_eq!(status["plan"]["changed"], 6, "the plan is over every parent: {status:#}");
    let canary_parents = ["g-4", "g-5"];
    setup
        .wait_configmaps("v2 on the canary's parents", |c| canary_parents.iter().all(|p| revision(&c[*p]) == "2"))
        .await;
    // Within the window: the others are v1's, and only the canary's were written.
    let during = setup.configmaps().await;
    for (name, data) in &during {
        let on_canary = canary_parents.contains(&name.as_str());
        assert_eq!(revision(data) == "2", on_canary, "{name}: {data}");
    }
    let written: std::collections::BTreeSet<String> = setup
        .ns
        .operator_writes(mark)
        .await
        .into_iter()
        .filter(|e| e.resource.as_deref() == Some("configmaps"))
        .filter_map(|e| e.name)
        .collect();
    assert_eq!(written, canary_parents.iter().map(|p| p.to_string()).collect(), "the canary's writes");
    let still = wait_logic_module(&setup.logic_modules, "the canary still on", |s| s["canary"]["digest"] == v2).await;
    assert!(has(&still, "Active", "False", "Canary"), "{still:#}");
    let events = logic_module_events(&setup.ns.client, "Canary").await;
    assert!(events.iter().any(|e| e.contains("the parents labelled canary=yes (2 parents)")), "{events:?}");

    // After the window: every parent.
    wait_logic_module(&setup.logic_modules, "v2 serving every parent", |s| {
        has(s, "Active", "True", "Serving") && s["canary"].is_null()
    })
    .await;
    setup.wait_configmaps("v2 everywhere", |c| c.len() == 9 && c.values().all(|d| revision(d) == "2")).await;

    // A canary that fails on its parents rolls back: they go back to v2.
    setup.patch_spec(json!({"image": setup.pinned["fail-on-later"]})).await;
    let fail_on_later = digest(&built("greeting-fail-on-later.wasm"));
    wait_logic_module(&setup.logic_modules, "fail-on-later on a canary", |s| s["canary"]["digest"] == fail_on_later)
        .await;
    edit(&greetings(&setup.ns), "g-5", |g| g.data["spec"]["message"] = json!("later, maybe")).await;
    let status = wait_logic_module(&setup.logic_modules, "the canary rolled back", |s| {
        has(s, "RolledBack", "True", "RolledBack") && s["canary"].is_null()
    })
    .await;
    assert_eq!(status["activeDigest"], v2, "{status:#}");
    setup
        .wait_configmaps("v2 serving g-5 again", |c| {
            c["g-5"]["message"] == "later, maybe" && revision(&c["g-5"]) == "2"
        })
        .await;
    assert_eq!(running.swaps("rolled_back"), 1);

    running.stop().await.expect("a clean stop");
    setup.remove().await;
}

fn shadow_differences(running: &Running, change: &str) -> u64 {
    running.metric("wasm_operator_module_shadow_differences_total", &format!("change=\"{change}\""))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_counts_where_a_candidate_differs_and_writes_nothing_for_it() {
    let _turn = GREETING_LOGIC_MODULE.lock().await;
    let setup = setup("rollout-shadow", json!({})).await;
    let running = setup.start(Duration::from_secs(120)).await;
    setup.wait_configmaps("v1's nine ConfigMaps", |c| c.len() == 9).await;
    wait_logic_module(&setup.logic_modules, "v1 serving", |s| has(s, "Active", "True", "Serving")).await;

    // v2 in shadow: every parent differs (the revision in each ConfigMap).
    let mark = setup.ns.plane.audit_mark().expect("the audit log");
    setup.patch_spec(json!({"shadow": {"image": setup.pinned["v2"], "duration": "10s"}})).await;
    let v2 = digest(&built("greeting-v2.wasm"));
    let status = wait_logic_module(&setup.logic_modules, "v2 shadowed on every parent", |s| {
        s["shadow"]["digest"] == v2 && s["shadow"]["differingParents"] == 6
    })
    .await;
    let shadow = &status["shadow"];
    let ns = &setup.ns.namespace;
    let first = shadow["differences"].as_array().into_iter().flatten().find(|d| d["parent"] == format!("{ns}/g-0"));
    let first = first.unwrap_or_else(|| panic!("g-0 listed: {shadow:#}"));
    assert_eq!(
        (&first["change"], &first["kind"], &first["field"]),
        (&json!("update"), &json!("ConfigMap"), &json!("data.revision"))
    );
    assert!(shadow_differences(&running, "update") >= 9, "every ConfigMap counted as an update");
    assert_eq!(shadow_differences(&running, "delete") + shadow_differences(&running, "fails"), 0);
    // Nothing written for it: v1's objects as they were.
    let writes = setup.ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "written while shadowing: {writes:?}");
    assert!(setup.configmaps().await.values().all(|d| revision(d).is_null()), "v1 still serves");
    // The window ends: an event says what it found.
    wait_logic_module(&setup.logic_modules, "the shadow's window ended", |s| s["shadow"]["ended"] == true).await;
    let events = logic_module_events(&setup.ns.client, "ShadowEnded").await;
    assert!(events.iter().any(|e| e.contains("6 parents differ")), "{events:?}");

    // A candidate that behaves as v1: compared on every parent, no difference.
    let counted =
        ["create", "update", "delete", "unmanaged", "status", "fails"].map(|c| shadow_differences(&running, c));
    setup.patch_spec(json!({"shadow": {"image": setup.pinned["v1-rebuilt"], "duration": "1m"}})).await;
    let rebuilt = digest(&built("greeting-v1-rebuilt.wasm"));
    let status = wait_logic_module(&setup.logic_modules, "v1-rebuilt shadowed on every parent", |s| {
        s["shadow"]["digest"] == rebuilt && s["shadow"]["reconciles"].as_u64() >= Some(6)
    })
    .await;
    assert_eq!(status["shadow"]["differingParents"], 0, "{status:#}");
    let now = ["create", "update", "delete", "unmanaged", "status", "fails"].map(|c| shadow_differences(&running, c));
    assert_eq!(now, counted, "no difference counted");
    // Removed: it stops, and the status says nothing of it.
    setup.patch_spec(json!({"shadow": null})).await;
    wait_logic_module(&setup.logic_modules, "no shadow", |s| s["shadow"].is_null()).await;

    running.stop().await.expect("a clean stop");
    setup.remove().await;
}
