//! What the operator survives: 409 conflicts from a concurrent writer, an
//! API server restart mid-run, and an owned kind (ServiceMonitor) whose CRD
//! is missing at start and installed later.

#[path = "operator_support.rs"]
mod operator_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use control_plane::{ControlPlane, User};
use http::{Method, Request};
use kube::Client;
use kube::api::{Patch, PatchParams};
use operator_support::*;
use serde_json::json;
use tower::{Layer, Service};

/// Before each of the operator's first `times` updates of a Deployment,
/// another writer changes that Deployment, so the API server answers the
/// operator's update with a real 409 Conflict (a stale resourceVersion).
#[derive(Clone)]
struct ConcurrentWriter {
    admin: Client,
    times: Arc<AtomicU32>,
}

impl<S> Layer<S> for ConcurrentWriter {
    type Service = ConcurrentWriterService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrentWriterService { inner: Arc::new(tokio::sync::Mutex::new(inner)), writer: self.clone() }
    }
}

/// The client's stack is not `Clone`; a lock lets the call's future own it
/// (held only until response headers, so watches do not block others).
#[derive(Clone)]
struct ConcurrentWriterService<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    writer: ConcurrentWriter,
}

impl<S, B> Service<Request<B>> for ConcurrentWriterService<S>
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
        // Readiness is awaited under the lock in `call`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let path = request.uri().path().to_owned();
        let interfere = request.method() == Method::PUT
            && path.contains("/deployments/")
            && self.writer.times.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let admin = self.writer.admin.clone();
        Box::pin(async move {
            if interfere {
                let (namespace, name) = namespace_and_name(&path);
                let api = kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(admin, &namespace);
                let touch = json!({"metadata": {"labels": {"touched-by": format!("writer-{}", rand_suffix())}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&touch)).await.expect("the concurrent write");
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

fn namespace_and_name(path: &str) -> (String, String) {
    let parts: Vec<&str> = path.split('/').collect();
    let at = |key: &str| parts.iter().position(|p| *p == key).and_then(|i| parts.get(i + 1)).map(|s| (*s).to_owned());
    (at("namespaces").expect("a namespace"), at("deployments").expect("a name"))
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

async fn operator_with_conflicts(ns: &TestNamespace<'_>, times: u32) -> (Running, Arc<AtomicU32>) {
    let remaining = Arc::new(AtomicU32::new(0));
    let writer = ConcurrentWriter { admin: ns.client.clone(), times: remaining.clone() };
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(ns.plane.kubeconfig(User::Operator)).expect("a kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client config");
    let client = kube::client::ClientBuilder::try_from(config).expect("a client builder").with_layer(&writer).build();
    let running = Running::start_with_client(client, vec![memcached_module()], options(&ns.namespace));
    converged(ns, "cache").await;
    remaining.store(times, Ordering::SeqCst);
    (running, remaining)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_from_a_concurrent_writer_are_retried_and_converge() {
    let ns = TestNamespace::new("conflict").await;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let (operator, remaining) = operator_with_conflicts(&ns, 2).await;

    ns.set_spec("cache", json!({"replicas": 3})).await;
    let live = converged(&ns, "cache").await;
    assert_eq!(live["Deployment"].data["spec"]["replicas"], 3);
    assert_eq!(remaining.load(Ordering::SeqCst), 0, "both conflicts were injected");
    assert_eq!(operator.metric("wasm_operator_conflicts_retried_total", "kind=\"Deployment\""), 2);
    assert_eq!(operator.reconciles("error"), 0, "two conflicts stay within one reconcile's five attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_conflicts_in_a_row_fail_the_reconcile_which_is_retried_later() {
    let ns = TestNamespace::new("conflict5").await;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let (operator, remaining) = operator_with_conflicts(&ns, 5).await;

    ns.set_spec("cache", json!({"replicas": 2})).await;
    let live = converged(&ns, "cache").await;
    assert_eq!(live["Deployment"].data["spec"]["replicas"], 2);
    assert_eq!(remaining.load(Ordering::SeqCst), 0);
    assert_eq!(operator.metric("wasm_operator_conflicts_retried_total", "kind=\"Deployment\""), 5);
    assert!(operator.reconciles("error") >= 1, "the fifth conflict fails the reconcile");
    let warnings = ns.event_notes("ReconcileFailed").await;
    assert!(warnings.iter().any(|n| n.contains("still conflicting after 5 attempts")), "{warnings:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restart_mid_run_is_survived() {
    let plane = ControlPlane::start().expect("a control plane of our own");
    plane.install_crds().await.expect("the CRDs");
    grant_operator_everything(&plane).await;
    let ns = TestNamespace::on(&plane, "restart").await;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let operator = ns.start_operator().await;
    converged(&ns, "cache").await;

    plane.restart_apiserver().expect("restarting the API server");
    // The test's own client reconnects too.
    let ns = TestNamespace { client: plane.client(User::Admin).await.expect("a client"), ..ns };
    ns.set_spec("cache", json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true}}})).await;
    let live = eventually_within(Duration::from_secs(90), "convergence after the restart", || async {
        let live = converged(&ns, "cache").await;
        live.contains_key("PodDisruptionBudget").then_some(live)
    })
    .await;
    assert_eq!(live["Deployment"].data["spec"]["replicas"], 2);
    operator.stop().await.expect("the operator ran on and stops cleanly");
}

/// After an API server restart the caches list every kind again; what did
/// not change meanwhile must not be reconciled again (at a thousand parents
/// that burst was the soak's step in memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_an_api_server_restart_reconciles_only_what_changed() {
    const UNCHANGED: usize = 6;
    let plane = ControlPlane::start().expect("a control plane of our own");
    plane.install_crds().await.expect("the CRDs");
    grant_operator_everything(&plane).await;
    let ns = TestNamespace::on(&plane, "relist").await;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    for n in 0..UNCHANGED {
        ns.create_memcached(&format!("still-{n}"), json!({"replicas": 1})).await;
    }
    let operator = ns.start_operator().await;
    converged(&ns, "cache").await;
    for n in 0..UNCHANGED {
        converged(&ns, &format!("still-{n}")).await;
    }
    // Settled: no reconcile for a while.
    let mut before = operator.reconciles("success");
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = operator.reconciles("success");
        if now == before {
            break;
        }
        before = now;
    }

    // A write no parent cares about moves etcd's revision on, so the
    // new server's watch cache starts past the resourceVersion each watch
    // resumes from: 410 Gone, and every kind is listed again.
    ns.create_secret("unrelated", json!({"a": "1"})).await;
    let mark = plane.audit_mark().expect("the audit log");
    plane.restart_apiserver().expect("restarting the API server");
    let ns = TestNamespace { client: plane.client(User::Admin).await.expect("a client"), ..ns };
    ns.set_spec("cache", json!({"replicas": 2})).await;
    let live = eventually_within(Duration::from_secs(90), "convergence after the restart", || async {
        let live = converged(&ns, "cache").await;
        (live["Deployment"].data["spec"]["replicas"] == 2).then_some(live)
    })
    .await;
    assert_eq!(live["Deployment"].data["spec"]["replicas"], 2);
    plane.audit_sync().await.expect("the audit log");
    let relisted = plane
        .audit_events_since(mark)
        .expect("the audit log")
        .into_iter()
        .filter(|e| e.user == OPERATOR_USER && e.verb == "list" && e.resource.as_deref() == Some("memcacheds"))
        .count();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = operator.reconciles("success");
    assert!(relisted >= 1, "the restart made the operator list Memcacheds again");
    assert!(
        after - before < UNCHANGED as u64,
        "{} reconciles after the re-list; only `cache` changed ({UNCHANGED} others did not)",
        after - before
    );
    operator.stop().await.expect("the operator ran on and stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_servicemonitor_crd_is_reported_and_picked_up_when_installed() {
    let plane = ControlPlane::start().expect("a control plane of our own");
    let crd = control_plane::repo_root().join("deploy/crd/memcached.c5c3.io_memcacheds.yaml");
    plane.apply_yaml(&std::fs::read_to_string(crd).expect("our CRD")).await.expect("installing our CRD only");
    grant_operator_everything(&plane).await;
    let ns = TestNamespace::on(&plane, "nocrd").await;
    ns.create_memcached("cache", json!({"replicas": 1, "monitoring": {"enabled": true, "serviceMonitor": {}}})).await;
    let operator = ns.start_operator().await;

    ns.wait_for("Deployment", "cache").await;
    ns.wait_for("Service", "cache").await;
    let status = ns.wait_status("cache", |s| condition(s, "Degraded")["reason"] == "ReconcileFailed").await;
    let message = condition(&status, "Degraded")["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("ServiceMonitor"), "{message}");
    let warnings = eventually("a KindNotServed warning", || async {
        let notes = ns.event_notes("KindNotServed").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert!(warnings[0].contains("monitoring.coreos.com/v1"), "{warnings:?}");

    let crd = control_plane::repo_root().join("tests/crds/servicemonitors.monitoring.coreos.com.yaml");
    plane.apply_yaml(&std::fs::read_to_string(crd).expect("the CRD")).await.expect("installing the ServiceMonitor CRD");
    let servicemonitor = eventually_within(Duration::from_secs(90), "the ServiceMonitor", || async {
        ns.get(&resource_of("ServiceMonitor"), "cache").await
    })
    .await;
    assert_eq!(controller_uid(&servicemonitor), ns.memcacheds().get("cache").await.ok().and_then(|c| c.metadata.uid));
    ns.wait_status("cache", |s| condition(s, "Degraded")["reason"] != "ReconcileFailed").await;
    converged(&ns, "cache").await;
    operator.stop().await.expect("no crash loop: it ran throughout and stops cleanly");
}
