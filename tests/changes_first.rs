//! Changes first: a parent changed while the operator's start-up pass
//! (every parent of its first list reconciled once) is under way is
//! reconciled before the parents still waiting in that pass, against the
//! real API server, with 1000 Greetings.

#[path = "greeting_support.rs"]
mod greeting_support;
#[path = "operator_support.rs"]
mod operator_support;

use std::time::{Duration, Instant};

use greeting_support::*;
use kube::api::{Api, DynamicObject, ListParams};
use operator_support::*;
use serde_json::json;
use wasm_operator::operator::Options;

const PARENTS: usize = 1000;

async fn configmap_names(configmaps: &Api<DynamicObject>) -> Vec<String> {
    let params = ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator");
    let list = configmaps.list(&params).await.expect("listing ConfigMaps");
    list.items.into_iter().filter_map(|c| c.metadata.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_during_the_start_up_pass_converges_before_the_pass_ends() {
    log_to_test_output();
    let ns = TestNamespace::new("changes-first").await;
    let module = module_file("greeting.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&greetings_resource());
    let configmaps = ns.api(&configmaps_resource());
    create_greetings(&greetings, PARENTS).await;

    let started = Instant::now();
    let operator = Running::start(ns.plane, module, Options { concurrency: 2, ..options(&ns.namespace) }).await;
    eventually_within(Duration::from_secs(120), "the start-up pass to be under way", || async {
        (operator.reconciles("success") >= 50).then_some(())
    })
    .await;

    // Two changes: one to a parent the pass reconciled already (its change
    // would queue behind every parent still waiting), one to a parent it
    // has not reached yet (its change would wait for its place in the pass).
    let done = configmap_names(&configmaps).await;
    assert!(done.len() < PARENTS / 2, "the pass is not half done: {} of {PARENTS}", done.len());
    let reconciled = done.first().expect("a parent reconciled").clone();
    let waiting =
        (0..PARENTS).rev().map(|i| format!("g-{i:03}")).find(|n| !done.contains(n)).expect("a parent not reconciled");
    let changed_at = Instant::now();
    for name in [&reconciled, &waiting] {
        edit(&greetings, name, |g| g.data["spec"]["message"] = json!("changed during the pass")).await;
    }
    let converged = eventually_within(Duration::from_secs(120), "both changes to converge", || async {
        for name in [&reconciled, &waiting] {
            if published(&configmaps, name).await.as_deref() != Some("changed during the pass") {
                return None;
            }
        }
        Some(operator.reconciles("success"))
    })
    .await;
    let change_took = changed_at.elapsed();

    eventually_within(Duration::from_secs(300), "the start-up pass to end", || async {
        (operator.reconciles("success") > PARENTS as u64).then_some(())
    })
    .await;
    let pass_took = started.elapsed();
    eprintln!(
        "changes converged {:.2} s after they were made, with {converged} of {PARENTS} parents reconciled; \
         the start-up pass took {:.1} s",
        change_took.as_secs_f64(),
        pass_took.as_secs_f64()
    );
    // Both changes' reconciles count: the pass had at least PARENTS - 2
    // parents still to go, less those reconciled meanwhile.
    assert!(
        converged < PARENTS as u64 - 100,
        "the changes converged only after {converged} reconciles: they waited behind the start-up pass"
    );
    assert_eq!(operator.reconciles("error"), 0);
    operator.stop().await.expect("a clean stop");
}
