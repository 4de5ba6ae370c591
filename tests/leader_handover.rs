//! Leadership that hands over, against the real API server, with two
//! replicas of the Greeting operator in this process:
//! - a leader stopped cleanly releases its Lease, and the standby, which
//!   watches the Lease, takes it at once (client-go's defaults: a 15 s
//!   lease it would otherwise wait out) and reconciles a change made right
//!   after;
//! - a leader whose Lease requests hang for longer than its renew deadline
//!   starts no reconcile meanwhile, and leads on without a restart once
//!   they answer again, nobody having taken the Lease.

#[path = "greeting_support.rs"]
mod greeting_support;
#[path = "operator_support.rs"]
mod operator_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use control_plane::User;
use greeting_support::*;
use http::Request;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, DynamicObject};
use operator_support::*;
use serde_json::json;
use tower::{Layer, Service};
use wasm_operator::operator::Options;
use wasm_operator::operator::leader::LeaderElectionOptions;

const LEASE: &str = "greeting-handover";

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LEASE).await.expect("reading the Lease")?.spec?.holder_identity
}

fn replica_options(namespace: &str, identity: &str, election: impl FnOnce(&mut LeaderElectionOptions)) -> Options {
    let mut leader_election = LeaderElectionOptions::new(namespace.to_owned(), LEASE.into(), identity.to_owned());
    election(&mut leader_election);
    Options { leader_election: Some(leader_election), concurrency: 2, ..options(namespace) }
}

struct Greetings {
    greetings: Api<DynamicObject>,
    configmaps: Api<DynamicObject>,
    leases: Api<Lease>,
}

impl Greetings {
    async fn set_up(ns: &TestNamespace<'_>, count: usize) -> Self {
        let module = module_file("greeting.wasm");
        ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
        let greetings = ns.api(&greetings_resource());
        create_greetings(&greetings, count).await;
        let configmaps = ns.api(&configmaps_resource());
        let leases = Api::namespaced(ns.client.clone(), &ns.namespace);
        Greetings { greetings, configmaps, leases }
    }

    async fn change(&self, name: &str, message: &str) {
        edit(&self.greetings, name, |g| g.data["spec"]["message"] = json!(message)).await;
    }

    async fn wait_published(&self, name: &str, message: &str, within: Duration) {
        eventually_within(within, &format!("{name} to publish {message:?}"), || async {
            (published(&self.configmaps, name).await.as_deref() == Some(message)).then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_hands_the_lease_to_the_standby_at_once() {
    log_to_test_output();
    const PARENTS: usize = 300;
    let ns = TestNamespace::new("handover").await;
    let world = Greetings::set_up(&ns, PARENTS).await;
    // client-go's defaults: a standby waiting out the lease would take
    // 15 s, one polling every retry period up to 2 s.
    let start = |identity: &'static str| {
        let options = replica_options(&ns.namespace, identity, |_| {});
        Running::start(ns.plane, module_file("greeting.wasm"), options)
    };
    let a = start("replica-a").await;
    eventually_within(Duration::from_secs(60), "replica a to lead", || async {
        (holder(&world.leases).await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    eventually_within(Duration::from_secs(120), "a's start-up pass", || async {
        (a.reconciles("success") >= PARENTS as u64).then_some(())
    })
    .await;
    let b = start("replica-b").await;
    // b is a standby with its caches filled (in well under this).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(b.metric("wasm_operator_leader", ""), 0, "one leader");

    let stopping = Instant::now();
    a.stop().await.expect("a clean stop");
    let stopped_in = stopping.elapsed();
    let took_over = eventually_within(Duration::from_secs(20), "b to hold the Lease", || async {
        (holder(&world.leases).await.as_deref() == Some("replica-b")).then(|| stopping.elapsed())
    })
    .await;
    // A change right after, while b may still be in its start-up pass.
    world.change("g-150", "after the handover").await;
    let changed = Instant::now();
    world.wait_published("g-150", "after the handover", Duration::from_secs(30)).await;
    let converged_in = changed.elapsed();
    let reconciled_by_then = b.reconciles("success");
    eprintln!(
        "a stopped in {:.2} s; b held the Lease {:.2} s after the stop began; the change converged {:.2} s \
         after it was made, with {reconciled_by_then} of {PARENTS} parents reconciled by b",
        stopped_in.as_secs_f64(),
        took_over.as_secs_f64(),
        converged_in.as_secs_f64()
    );
    assert!(took_over < Duration::from_secs(2), "the handover took {took_over:?}");
    assert!(converged_in < Duration::from_secs(2), "the change made right after took {converged_in:?}");
    eventually("b to lead", || async { (b.metric("wasm_operator_leader", "") == 1).then_some(()) }).await;
    b.stop().await.expect("a clean stop");
}

/// While `hang` is set, every request for a Lease waits until it is unset:
/// a connection that does not answer, as a short partition is.
#[derive(Clone)]
struct HangingLeases {
    hang: Arc<AtomicBool>,
}

impl<S> Layer<S> for HangingLeases {
    type Service = HangingLeasesService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HangingLeasesService { inner: Arc::new(tokio::sync::Mutex::new(inner)), hang: self.hang.clone() }
    }
}

/// The client's stack is not `Clone`; a lock lets the call's future own it
/// (held only until response headers, so watches do not block others).
#[derive(Clone)]
struct HangingLeasesService<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    hang: Arc<AtomicBool>,
}

impl<S, B> Service<Request<B>> for HangingLeasesService<S>
where
    S: Service<Request<B>> + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let lease = request.uri().path().contains("/leases");
        let hang = self.hang.clone();
        Box::pin(async move {
            while lease && hang.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let response = {
                let mut inner = inner.lock().await;
                std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
                inner.call(request)
            };
            response.await
        })
    }
}

async fn client_with(ns: &TestNamespace<'_>, layer: &HangingLeases) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(ns.plane.kubeconfig(User::Operator)).expect("a kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client config");
    kube::client::ClientBuilder::try_from(config).expect("a client builder").with_layer(layer).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_hang_for_a_while_pauses_and_leads_on() {
    log_to_test_output();
    let ns = TestNamespace::new("renewal-fault").await;
    let world = Greetings::set_up(&ns, 5).await;
    let faults = HangingLeases { hang: Arc::new(AtomicBool::new(false)) };
    let client = client_with(&ns, &faults).await;
    let renew_deadline = Duration::from_secs(3);
    let options = replica_options(&ns.namespace, "replica-a", |election| {
        election.lease_duration = Duration::from_secs(4);
        election.renew_deadline = renew_deadline;
        election.retry_period = Duration::from_millis(200);
    });
    let a = Running::start_with_client(client, vec![module_file("greeting.wasm")], options);
    world.wait_published("g-000", "hi 0", Duration::from_secs(60)).await;
    let transitions = |lease: Lease| lease.spec.and_then(|s| s.lease_transitions);
    let before = transitions(world.leases.get(LEASE).await.expect("the Lease"));

    // Renewals hang for twice the renew deadline, longer than the lease.
    faults.hang.store(true, Ordering::SeqCst);
    let fault_began = Instant::now();
    tokio::time::sleep(renew_deadline + Duration::from_millis(600)).await;
    world.change("g-001", "during the fault").await;
    tokio::time::sleep((renew_deadline * 2).saturating_sub(fault_began.elapsed())).await;
    assert_eq!(
        published(&world.configmaps, "g-001").await.as_deref(),
        Some("hi 1"),
        "no reconcile starts past the renew deadline"
    );
    faults.hang.store(false, Ordering::SeqCst);
    let healed = Instant::now();

    world.wait_published("g-001", "during the fault", Duration::from_secs(10)).await;
    eprintln!("the change made during the fault converged {:.2} s after it healed", healed.elapsed().as_secs_f64());
    let lease = world.leases.get(LEASE).await.expect("the Lease");
    assert_eq!(lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()), Some("replica-a"));
    assert_eq!(transitions(lease), before, "the same leader throughout");
    world.change("g-002", "after the fault").await;
    world.wait_published("g-002", "after the fault", Duration::from_secs(10)).await;
    a.stop().await.expect("it led on and stopped cleanly: no lost lease");
}
