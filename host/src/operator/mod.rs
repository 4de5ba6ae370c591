//! The operator: a generic host driven by the logic module's manifest. It
//! learns the parent kind, the owned kinds and the kinds it only reads from
//! the module, watches them all through reflector caches, and runs one
//! kube-runtime `Controller` over dynamic objects. Every decision about
//! desired state and status comes from the module; this side does the I/O.

pub mod api_requests;
mod backoff;
pub mod caches;
pub mod compare;
mod create_or_update;
mod delete_disabled;
mod events;
pub mod http;
pub mod kinds;
pub mod leader;
pub mod metrics;
mod reconcile;
pub mod references;
mod status;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{controller, reflector, watcher, Controller, WatchStreamExt};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};

use crate::module::{CallError, CallResult, ControllerInstance, ModuleHandle};
use backoff::Backoff;
use caches::{Cache, CacheEvents};
use kinds::{Kind, KindError, Kinds};
use leader::{LeaderElection, LeaderElectionOptions, LeaderError};
use metrics::Metrics;
use references::{ParentKey, ReferenceIndex, Related};

#[derive(Clone, Debug)]
pub struct Options {
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    pub metrics_address: SocketAddr,
    pub health_address: SocketAddr,
    pub leader_election: Option<LeaderElectionOptions>,
    /// Parents reconciled at once.
    pub concurrency: u16,
    /// How often an unchanged parent is reconciled anyway (drift the
    /// watches could not see); costs no write when nothing drifted.
    pub resync_period: Duration,
    /// The name events are reported under.
    pub controller_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the logic module failed in {function}: {source}")]
    Module { function: &'static str, source: CallError },
    #[error("{verb} {kind} {namespace}/{name}: {source}")]
    Api { verb: &'static str, kind: String, namespace: String, name: String, source: kube::Error },
    #[error("{kind} {namespace}/{name}: {source}")]
    Refused { kind: String, namespace: String, name: String, source: memcached_logic::Error },
    #[error("{kind} {namespace}/{name}: still conflicting after {attempts} attempts")]
    Conflict { kind: String, namespace: String, name: String, attempts: u32 },
    #[error("the module answered a {kind} that is not a Kubernetes object: {source}")]
    BadObject { kind: String, source: serde_json::Error },
    #[error("the module no longer wants the {kind} it asked for a moment ago")]
    Vanished { kind: String },
    #[error("the parent has no namespace or uid")]
    MissingMetadata,
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("reading the module manifest: {0}")]
    Manifest(CallError),
    #[error(transparent)]
    Kinds(#[from] KindError),
    #[error(transparent)]
    Bind(#[from] http::BindError),
    #[error(transparent)]
    Leadership(#[from] LeaderError),
}

/// Everything a reconcile needs, shared by all of them.
pub struct Context {
    pub client: Client,
    pub module: ModuleHandle,
    pub kinds: Kinds,
    /// One cache per owned kind, in manifest order.
    pub owned: Vec<Arc<Cache>>,
    pub reads: Vec<Arc<Cache>>,
    pub references: Arc<ReferenceIndex>,
    pub metrics: Arc<Metrics>,
    events: events::Events,
    backoff: Backoff,
    status_memo: status::StatusMemo,
    resync_period: Duration,
}

impl Context {
    /// One call into the module, on a fresh instance, timed.
    fn call<T>(&self, function: &'static str, call: impl FnOnce(&mut ControllerInstance) -> CallResult<T>) -> CallResult<T> {
        let started = Instant::now();
        let module = self.module.current();
        let result = module.controller().and_then(|mut instance| call(&mut instance));
        self.metrics.module_called(function, started.elapsed());
        result
    }

    /// Drops what is kept per parent (referenced objects, last status,
    /// retry delay) once the parent is gone.
    fn forget(&self, parent: &ParentKey) {
        self.references.remove(parent);
        self.status_memo.forget(parent);
        self.backoff.reset(parent);
    }
}

/// The parent a watch event says was deleted. A CR without finalizers is
/// never reconciled once gone, so this is where its bookkeeping is dropped.
fn deleted_parent(event: &watcher::Event<DynamicObject>) -> Option<ParentKey> {
    match event {
        watcher::Event::Delete(parent) => Some((parent.namespace()?, parent.name_any())),
        _ => None,
    }
}

/// The parent being reconciled, in the forms the steps need.
pub struct ParentView<'a> {
    pub object: &'a DynamicObject,
    pub json: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// The referenced related objects that exist, as JSON.
    pub related: &'a [String],
}

/// Maps cache changes to the parents to reconcile.
struct Triggers {
    parent: Kind,
    read_kinds: Vec<String>,
    references: Arc<ReferenceIndex>,
    parents: mpsc::UnboundedSender<ObjectRef<DynamicObject>>,
    everything: mpsc::UnboundedSender<()>,
}

impl CacheEvents for Triggers {
    fn changed(&self, kind: &Kind, object: &DynamicObject) {
        let Some(namespace) = object.namespace() else { return };
        if self.read_kinds.iter().any(|k| k == kind.name()) {
            let related = Related { kind: kind.name().to_owned(), namespace, name: object.name_any() };
            for (namespace, name) in self.references.parents_of(&related) {
                let _ = self.parents.send(ObjectRef::new_with(&name, self.parent.resource.clone()).within(&namespace));
            }
            return;
        }
        let controller = object.owner_references().iter().find(|r| {
            r.controller == Some(true) && r.kind == self.parent.resource.kind && r.api_version == self.parent.resource.api_version
        });
        if let Some(owner) = controller {
            let _ = self.parents.send(ObjectRef::new_with(&owner.name, self.parent.resource.clone()).within(&namespace));
        }
    }

    fn served_again(&self, _kind: &Kind) {
        let _ = self.everything.send(());
    }
}

fn receiver_stream<T: Send + 'static>(mut receiver: mpsc::UnboundedReceiver<T>) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// Runs the operator until `shutdown` resolves (then finishes the reconciles
/// in flight and releases the lease), or until leadership is lost.
pub async fn run(
    client: Client,
    module: ModuleHandle,
    metrics: Arc<Metrics>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), OperatorError> {
    let manifest = module.current().controller().and_then(|mut m| m.manifest()).map_err(OperatorError::Manifest)?;
    let kinds = Kinds::from_manifest(&manifest)?;
    tracing::info!(
        parent = kinds.parent.resource.api_version.clone() + "/" + kinds.parent.name(),
        owned = ?kinds.owned.iter().map(Kind::name).collect::<Vec<_>>(),
        reads = ?kinds.reads.iter().map(Kind::name).collect::<Vec<_>>(),
        namespace = options.namespace.as_deref().unwrap_or("(all)"),
        "starting"
    );

    let readiness = http::Readiness::default();
    let _servers = http::serve(options.metrics_address, options.health_address, metrics.clone(), readiness.clone()).await?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let shutdown_requested = {
        let stop_tx = stop_tx.clone();
        tokio::spawn(async move {
            shutdown.await;
            tracing::info!("shutting down: finishing reconciles in flight");
            stop_tx.send_replace(true);
        })
    };
    let stopped = move || {
        let mut stop_rx = stop_rx.clone();
        async move {
            let _ = stop_rx.wait_for(|stop| *stop).await;
        }
    };

    let references = Arc::new(ReferenceIndex::default());
    let (parents_tx, parents_rx) = mpsc::unbounded_channel();
    let (everything_tx, everything_rx) = mpsc::unbounded_channel();
    let triggers: Arc<dyn CacheEvents> = Arc::new(Triggers {
        parent: kinds.parent.clone(),
        read_kinds: kinds.reads.iter().map(|k| k.name().to_owned()).collect(),
        references: references.clone(),
        parents: parents_tx,
        everything: everything_tx,
    });
    let namespace = options.namespace.as_deref();
    let spawn = |kind: &Kind| Arc::new(Cache::spawn(&client, kind.clone(), namespace, triggers.clone()));
    let owned: Vec<Arc<Cache>> = kinds.owned.iter().map(spawn).collect();
    let reads: Vec<Arc<Cache>> = kinds.reads.iter().map(spawn).collect();

    // Reconcile only from complete caches: a half-listed cache would make
    // existing children look missing.
    let caches_known = async {
        for cache in owned.iter().chain(&reads) {
            cache.wait_until_known().await;
        }
    };
    tokio::select! {
        () = caches_known => {}
        () = stopped() => return Ok(()),
    }
    readiness.set_ready();
    tracing::info!("caches synced");

    let mut election = options.leader_election.clone().map(|o| LeaderElection::new(client.clone(), o));
    if let Some(election) = election.as_mut() {
        tokio::select! {
            () = election.acquire() => {}
            () = stopped() => return Ok(()),
        }
    }
    metrics.leader.set(1);

    let ctx = Arc::new(Context {
        client: client.clone(),
        module,
        kinds: kinds.clone(),
        owned,
        reads,
        references,
        metrics: metrics.clone(),
        events: events::Events::new(client.clone(), &options.controller_name, Some(instance_name(&options))),
        backoff: Backoff::default(),
        status_memo: status::StatusMemo::default(),
        resync_period: options.resync_period,
    });
    // The parent watch as `Controller::new_with` builds it, plus forgetting
    // deleted parents.
    let parent_writer = reflector::store::Writer::new(kinds.parent.resource.clone());
    let parent_store = parent_writer.as_reader();
    let forgetting = ctx.clone();
    let parents = reflector(parent_writer, watcher(kinds.parent.watch_api(&client, namespace), watcher::Config::default()))
        .inspect_ok(move |event| {
            if let Some(parent) = deleted_parent(event) {
                forgetting.forget(&parent);
            }
        })
        .applied_objects();
    let controller = Controller::for_stream_with(parents, parent_store, kinds.parent.resource.clone())
        .with_config(controller::Config::default().concurrency(options.concurrency))
        .reconcile_on(receiver_stream(parents_rx))
        .reconcile_all_on(receiver_stream(everything_rx))
        .graceful_shutdown_on(stopped())
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|result| {
            if let Err(error) = result {
                match error {
                    // Already logged by the error policy.
                    controller::Error::ReconcilerFailed(..) => {}
                    other => tracing::warn!(error = %other, "controller"),
                }
            }
            std::future::ready(())
        });

    let outcome = match election.as_mut() {
        Some(election) => {
            let mut controller = std::pin::pin!(controller);
            tokio::select! {
                () = &mut controller => Ok(()),
                lost = election.keep() => {
                    tracing::error!(error = %lost, "stepping down");
                    stop_tx.send_replace(true);
                    // Let reconciles in flight finish, then exit.
                    controller.await;
                    Err(OperatorError::Leadership(lost))
                }
            }
        }
        None => {
            controller.await;
            Ok(())
        }
    };
    metrics.leader.set(0);
    if outcome.is_ok()
        && let Some(election) = election.as_mut()
    {
        election.release().await;
    }
    shutdown_requested.abort();
    tracing::info!("stopped");
    outcome
}

fn instance_name(options: &Options) -> String {
    options
        .leader_election
        .as_ref()
        .map(|l| l.identity.clone())
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| options.controller_name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(namespace: Option<&str>) -> DynamicObject {
        let resource = kube::api::ApiResource {
            group: "memcached.c5c3.io".into(),
            version: "v1alpha1".into(),
            api_version: "memcached.c5c3.io/v1alpha1".into(),
            kind: "Memcached".into(),
            plural: "memcacheds".into(),
        };
        let object = DynamicObject::new("cache", &resource);
        match namespace {
            Some(namespace) => object.within(namespace),
            None => object,
        }
    }

    #[test]
    fn only_a_deletion_forgets_a_parent() {
        let key = Some(("team-a".to_owned(), "cache".to_owned()));
        assert_eq!(deleted_parent(&watcher::Event::Delete(parent(Some("team-a")))), key);
        assert_eq!(deleted_parent(&watcher::Event::Apply(parent(Some("team-a")))), None);
        assert_eq!(deleted_parent(&watcher::Event::InitApply(parent(Some("team-a")))), None);
        assert_eq!(deleted_parent(&watcher::Event::InitDone), None);
        // Parents are namespaced; a deletion without a namespace names none.
        assert_eq!(deleted_parent(&watcher::Event::Delete(parent(None))), None);
    }
}
