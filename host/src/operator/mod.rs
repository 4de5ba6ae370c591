//! The operator: a generic host driven by each module's manifest. It learns
//! the parent kind, the owned kinds and the kinds only read from the
//! module, watches them through reflector caches shared by every module of
//! the process, and runs one kube-runtime `Controller` per module over
//! dynamic objects. Every decision about desired state and status comes from
//! the module; this side does the I/O.

pub mod api_requests;
mod backoff;
pub mod cached_object;
pub mod caches;
pub mod compare;
mod create_or_update;
mod delete_unwanted;
pub(crate) mod desired;
mod events;
pub mod hot_swap;
pub mod http;
mod inputs;
pub mod kinds;
pub mod leader;
pub mod logic_modules;
pub mod metrics;
pub mod metrics_auth;
mod own_writes;
mod reconcile;
pub mod references;
pub mod serving;
mod status;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt, controller, reflector, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};

use crate::modules::{CallError, CallResult, LogicError, LogicModule, ModuleSlot, Reconciler};
use backoff::Backoff;
use cached_object::CachedObject;
use caches::{CacheEvents, Caches};
use kinds::{Kind, KindError};
use leader::{LeaderElection, LeaderElectionOptions, LeaderError};
use metrics::{Metrics, ModuleMetrics};
use own_writes::OwnWrites;
use references::{ParentKey, ReferenceIndex, Related};
use serving::Serving;

#[derive(Clone, Debug)]
pub struct Options {
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    pub metrics_address: SocketAddr,
    /// HTTPS and reviewed requests on `metrics_address`; `None`: plain HTTP,
    /// open to anyone who reaches it.
    pub metrics_secure: Option<http::SecureMetrics>,
    pub health_address: SocketAddr,
    pub leader_election: Option<LeaderElectionOptions>,
    /// Parents reconciled at once, per module.
    pub concurrency: u16,
    /// How often an unchanged parent is reconciled anyway (drift the
    /// watches could not see); costs no write when nothing drifted.
    pub resync_period: Duration,
    /// How new module versions are verified, rolled out and rolled back.
    pub swap_policy: hot_swap::SwapPolicy,
    /// Follow each module's LogicModule resource (new versions from an OCI
    /// registry); `None` leaves LogicModules alone.
    pub logic_modules: Option<logic_modules::LogicModuleOptions>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the logic module failed in {function}: {source}")]
    Module { function: &'static str, source: CallError },
    #[error("the logic module answered something the host refuses: {problem}")]
    InvalidOutput { problem: String },
    #[error("{verb} {kind} {namespace}/{name}: {source}")]
    Api { verb: &'static str, kind: String, namespace: String, name: String, source: Box<kube::Error> },
    #[error("{kind} {namespace}/{name}: {source}")]
    Refused { kind: String, namespace: String, name: String, source: LogicError },
    #[error("{kind} {namespace}/{name}: still conflicting after {attempts} attempts")]
    Conflict { kind: String, namespace: String, name: String, attempts: u32 },
    #[error("the module no longer wants the {kind} {name} it asked for a moment ago")]
    Vanished { kind: String, name: String },
    #[error("the parent has no namespace or uid")]
    MissingMetadata,
}

impl ReconcileError {
    /// Whether this failure is the module's doing, which counts against a
    /// newly swapped-in version: the module failing, or the API server
    /// refusing what it produced (400, 422). Conflicts and outages do not.
    pub fn counts_against_the_module(&self) -> bool {
        match self {
            ReconcileError::Api { verb, source, .. } => {
                matches!(**source, kube::Error::Api(ref status) if (*verb == "create" || *verb == "update") && (status.code == 400 || status.code == 422))
            }
            other => other.module_failure().is_some(),
        }
    }

    /// Why the module itself failed, if it did: a trap, its deadline, its
    /// memory limit, or output the host cannot use.
    pub fn module_failure(&self) -> Option<&'static str> {
        match self {
            ReconcileError::Module { source, .. } if source.is_module_failure() => Some(source.reason()),
            ReconcileError::InvalidOutput { .. } => Some("ModuleInvalidOutput"),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("module {module}: {source}")]
    Kinds { module: String, source: KindError },
    #[error("modules {first} and {second} both reconcile {kind}; one controller per parent kind")]
    SameParent { kind: String, first: String, second: String },
    #[error("no module to run")]
    NoModules,
    #[error(transparent)]
    Serve(#[from] http::ServeError),
    #[error(transparent)]
    Leadership(#[from] LeaderError),
}

/// Everything one module's reconciles need, shared by all of them.
pub struct Context {
    pub client: Client,
    /// The version serving now, as the module's sources see it; kept equal
    /// to `serving`'s module by [`Context::serve`].
    pub module: ModuleSlot,
    /// The module's name, as its metrics and logs carry it.
    pub module_name: String,
    /// The parent kind, which every version of the module keeps.
    pub parent_kind: Kind,
    /// The version serving now with the caches of its kinds; a reconcile
    /// takes it once and uses only it.
    serving: Arc<ArcSwap<Serving>>,
    /// Every cache of the process, for a new version's kinds.
    caches: Arc<Caches>,
    /// What a cache change means for this module's parents.
    triggers: Arc<dyn CacheEvents>,
    pub references: Arc<ReferenceIndex>,
    pub metrics: ModuleMetrics,
    /// The field manager writes go under (the manifest's).
    pub field_manager: String,
    events: events::Events,
    backoff: Backoff,
    status_memo: status::StatusMemo,
    resync_period: Duration,
    /// The parents, as the controller's watch caches them.
    pub parents: reflector::Store<CachedObject>,
    /// Queues a parent for a reconcile (a rollout after a swap).
    requeue: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    swap: Arc<hot_swap::SwapState>,
    swap_policy: hot_swap::SwapPolicy,
    /// This module's own writes, so their watch events wake no reconcile.
    own_writes: Arc<OwnWrites>,
}

impl Context {
    /// The version serving now, with its caches.
    pub fn serving(&self) -> Arc<Serving> {
        self.serving.load_full()
    }

    /// Makes `serving` the version every later reconcile runs on; answers
    /// the one it replaced. Reconciles in flight finish on theirs.
    fn serve(&self, serving: Arc<Serving>) -> Arc<Serving> {
        self.module.swap(serving.module.clone());
        self.serving.swap(serving)
    }

    /// `module` with the caches of its kinds, subscribed to this module's
    /// triggers (which ignore kinds the serving version does not use).
    fn serving_for(&self, module: Arc<LogicModule>) -> Result<Serving, KindError> {
        let serving = Serving::new(module, &self.caches)?;
        serving.subscribe(&self.triggers);
        Ok(serving)
    }

    /// One call into `module` (the one this reconcile runs on), on a fresh
    /// instance, timed; a failure of the module itself is counted by its
    /// reason. A dry run (`Calls::Unrecorded`) counts nothing.
    ///
    /// What the module logs is emitted with `parent` (namespace, name).
    fn call<T>(
        &self,
        module: &LogicModule,
        parent: (&str, &str),
        function: &'static str,
        call: impl FnOnce(&mut Reconciler) -> CallResult<T>,
    ) -> CallResult<T> {
        self.call_as(Calls::Recorded, module, parent, function, call)
    }

    fn call_as<T>(
        &self,
        calls: Calls,
        module: &LogicModule,
        (namespace, name): (&str, &str),
        function: &'static str,
        call: impl FnOnce(&mut Reconciler) -> CallResult<T>,
    ) -> CallResult<T> {
        let started = Instant::now();
        let result = module.reconciler().and_then(|mut instance| {
            let result = call(&mut instance);
            let log = instance.take_log();
            if !log.is_empty() {
                log.emit(module.name(), Some(&format!("{namespace}/{name}")));
            }
            result
        });
        if calls == Calls::Recorded {
            self.metrics.module_called(function, started.elapsed());
            if let Err(error) = &result
                && error.is_module_failure()
            {
                self.metrics.module_failed(error.reason());
            }
        }
        result
    }

    /// Sends `request`, a write to `kind` `namespace/name` made by a
    /// reconcile of `parent`, so that its echo wakes no reconcile: see
    /// [`own_writes`]. A change by someone else seen meanwhile queues the
    /// parent again.
    async fn own_write(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        parent: &str,
        request: impl Future<Output = kube::Result<DynamicObject>>,
    ) -> kube::Result<DynamicObject> {
        let mut in_flight = WriteInFlight {
            ctx: self,
            id: (kind.id(), namespace.to_owned(), name.to_owned()),
            parent,
            answered: false,
        };
        self.own_writes.writing(&in_flight.id);
        let result = request.await;
        in_flight.answer(result.as_ref().ok().and_then(|o| o.metadata.resource_version.as_deref()));
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

/// A write on its way; dropped unanswered (the reconcile was cancelled), it
/// counts as failed, so what it held is not lost.
struct WriteInFlight<'a> {
    ctx: &'a Context,
    id: own_writes::ObjectId,
    /// The parent whose reconcile writes, in the object's namespace.
    parent: &'a str,
    answered: bool,
}

impl WriteInFlight<'_> {
    fn answer(&mut self, resource_version: Option<&str>) {
        self.answered = true;
        if self.ctx.own_writes.answered(&self.id, resource_version) == own_writes::Held::OtherChanges {
            let parent = ObjectRef::new_with(self.parent, self.ctx.parent_kind.resource.clone()).within(&self.id.1);
            let _ = self.ctx.requeue.send(parent);
        }
    }
}

impl Drop for WriteInFlight<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.answer(None);
        }
    }
}

/// Whether module calls count in the metrics (a dry run's do not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    Recorded,
    Unrecorded,
}

/// The parent a watch event says was deleted. A CR without finalizers is
/// never reconciled once gone, so this is where its bookkeeping is dropped.
fn deleted_parent(event: &watcher::Event<CachedObject>) -> Option<ParentKey> {
    match event {
        watcher::Event::Delete(parent) => Some((parent.namespace()?, parent.name_any())),
        _ => None,
    }
}

/// The parent being reconciled, in the forms the steps need, and the one
/// module version the whole reconcile runs on.
pub struct ParentView<'a> {
    /// That version, with the caches of its kinds.
    pub serving: &'a Serving,
    pub module: &'a LogicModule,
    pub object: &'a CachedObject,
    pub json: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// The children it controls now, as JSON (what `desired` was given).
    pub owned: &'a [String],
    /// The referenced related objects that exist, as JSON.
    pub related: &'a [String],
}

/// Maps one module's cache changes to the parents to reconcile, as the
/// version serving now uses each kind.
struct Triggers {
    parent: Kind,
    serving: Arc<ArcSwap<Serving>>,
    references: Arc<ReferenceIndex>,
    own_writes: Arc<OwnWrites>,
    parents: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    everything: mpsc::UnboundedSender<()>,
}

impl Triggers {
    fn reconcile(&self, namespace: &str, name: &str) {
        let _ = self.parents.send(ObjectRef::new_with(name, self.parent.resource.clone()).within(namespace));
    }
}

impl CacheEvents for Triggers {
    fn changed(&self, kind: &Kind, object: &CachedObject) {
        let Some(namespace) = object.namespace() else { return };
        let serving = self.serving.load();
        if serving.reads(kind) {
            let related =
                Related { kind: kind.name().to_owned(), namespace: namespace.clone(), name: object.name_any() };
            for (namespace, name) in self.references.parents_of(&related) {
                self.reconcile(&namespace, &name);
            }
        }
        if serving.owns(kind) {
            let id = (kind.id(), namespace.clone(), object.name_any());
            if self.own_writes.is_echo(&id, object.resource_version().as_deref()) {
                return;
            }
            let controller = object
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true) && self.parent.is_group_kind_of(&r.api_version, &r.kind));
            if let Some(owner) = controller {
                self.reconcile(&namespace, &owner.name);
            }
        }
    }

    fn served_again(&self, _kind: &Kind) {
        let _ = self.everything.send(());
    }
}

fn receiver_stream<T: Send + 'static>(
    mut receiver: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// One module, set up: the version it starts on with its caches
/// subscribed, its triggers.
struct Prepared {
    slot: ModuleSlot,
    swap: Arc<hot_swap::SwapState>,
    name: String,
    parent_kind: Kind,
    serving: Arc<ArcSwap<Serving>>,
    triggers: Arc<dyn CacheEvents>,
    references: Arc<ReferenceIndex>,
    own_writes: Arc<OwnWrites>,
    requeue: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    parents: mpsc::UnboundedReceiver<ObjectRef<CachedObject>>,
    everything: mpsc::UnboundedReceiver<()>,
    /// Set on taking over a version on probation: the version to roll back
    /// to (its caches listed) and when the window closes.
    resumed_probation: Option<(Arc<Serving>, std::time::SystemTime)>,
}

fn prepare(slot: ModuleSlot, caches: &Caches, metrics: &Arc<Metrics>) -> Result<Prepared, OperatorError> {
    let module = slot.current();
    let name = module.name().to_owned();
    let kinds_error = |source| OperatorError::Kinds { module: name.clone(), source };
    let parent_kind = Kind::from_info(&module.manifest().parent).map_err(kinds_error)?;
    let serving = Arc::new(ArcSwap::from_pointee(Serving::new(module.clone(), caches).map_err(kinds_error)?));
    let references = Arc::new(ReferenceIndex::default());
    let own_writes = Arc::new(OwnWrites::default());
    let (parents_tx, parents) = mpsc::unbounded_channel();
    let (everything_tx, everything) = mpsc::unbounded_channel();
    let triggers: Arc<dyn CacheEvents> = Arc::new(Triggers {
        parent: parent_kind.clone(),
        serving: serving.clone(),
        references: references.clone(),
        own_writes: own_writes.clone(),
        parents: parents_tx.clone(),
        everything: everything_tx,
    });
    let started = serving.load_full();
    started.subscribe(&triggers);
    tracing::info!(
        module = name,
        version = module.manifest().version,
        digest = module.digest(),
        parent = parent_kind.resource.api_version.clone() + "/" + parent_kind.name(),
        owned = ?started.owned_kinds.iter().map(Kind::name).collect::<Vec<_>>(),
        reads = ?started.reads.iter().map(|c| c.kind.name()).collect::<Vec<_>>(),
        "module loaded"
    );
    // The version it starts on is kept compiled too: going back to it costs nothing.
    let swap = Arc::new(hot_swap::SwapState::new(metrics.for_module(&name)));
    swap.remember(module.clone());
    Ok(Prepared {
        slot,
        swap,
        name,
        parent_kind,
        serving,
        triggers,
        references,
        own_writes,
        requeue: parents_tx,
        parents,
        everything,
        resumed_probation: None,
    })
}

/// Two modules reconciling one parent kind would fight over its children.
fn one_module_per_parent(prepared: &[Prepared]) -> Result<(), OperatorError> {
    for (i, first) in prepared.iter().enumerate() {
        let parent = &first.parent_kind;
        if let Some(second) = prepared[i + 1..]
            .iter()
            .find(|p| p.parent_kind.resource.group == parent.resource.group && p.parent_kind.name() == parent.name())
        {
            return Err(OperatorError::SameParent {
                kind: format!("{}/{}", parent.resource.group, parent.name()),
                first: first.name.clone(),
                second: second.name.clone(),
            });
        }
    }
    Ok(())
}

/// Runs one controller per module until `shutdown` resolves (then finishes
/// the reconciles in flight and releases the lease), or until leadership is
/// lost. Modules share the client, the caches of the kinds they have in
/// common, the lease and the metrics.
pub async fn run(
    client: Client,
    modules: Vec<ModuleSlot>,
    metrics: Arc<Metrics>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), OperatorError> {
    if modules.is_empty() {
        return Err(OperatorError::NoModules);
    }
    let mut at_start = Vec::new();
    if let Some(logic_modules) = &options.logic_modules {
        // Come up on the version each module's LogicModule says was serving.
        for slot in &modules {
            let takeover = logic_modules::serving_version(&client, &logic_modules.registry, &slot.current()).await;
            if let Some(takeover) = &takeover {
                slot.swap(takeover.module.clone());
            }
            at_start.push(takeover);
        }
    }
    let caches = Arc::new(Caches::new(client.clone(), options.namespace.clone(), Some(metrics.clone())));
    let mut prepared: Vec<Prepared> =
        modules.into_iter().map(|slot| prepare(slot, &caches, &metrics)).collect::<Result<_, _>>()?;
    one_module_per_parent(&prepared)?;
    for (prepared, takeover) in prepared.iter().zip(at_start) {
        // A probation from before the restart goes on (see take_over).
        prepared.swap.serve_on_takeover(takeover);
    }
    tracing::info!(
        modules = ?prepared.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        namespace = options.namespace.as_deref().unwrap_or("(all)"),
        "starting"
    );

    // LogicModule followers fetch and compile new versions on every
    // replica; once this one leads, they get the module's context and swap.
    let mut leading = Vec::new();
    let mut _followers = Vec::new();
    for prepared in &prepared {
        let (leading_tx, leading_rx) = watch::channel(None);
        leading.push(leading_tx);
        if let Some(logic_modules) = &options.logic_modules {
            let follow = logic_modules::follow(
                client.clone(),
                prepared.slot.clone(),
                prepared.swap.clone(),
                logic_modules.clone(),
                leading_rx,
            );
            _followers.push(AbortOnDrop(tokio::spawn(follow)));
        }
    }

    let readiness = http::Readiness::default();
    let secure = options.metrics_secure.as_ref().map(|settings| (settings, client.clone()));
    let _servers =
        http::serve(options.metrics_address, options.health_address, metrics.clone(), readiness.clone(), secure)
            .await?;

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

    // Reconcile only from complete caches: a half-listed cache would make
    // existing children look missing.
    let all_caches = caches.all();
    let caches_known = async {
        for cache in &all_caches {
            cache.wait_until_known().await;
        }
    };
    tokio::select! {
        () = caches_known => {}
        () = stopped() => return Ok(()),
    }
    readiness.set_ready();
    tracing::info!(kinds = all_caches.len(), "caches synced");

    let mut election = options.leader_election.clone().map(|o| LeaderElection::new(client.clone(), o));
    if let Some(election) = election.as_mut() {
        tokio::select! {
            () = election.acquire() => {}
            () = stopped() => return Ok(()),
        }
    }
    metrics.leader.set(1);

    for prepared in &mut prepared {
        take_over(prepared, &caches, options.swap_policy.cache_sync_timeout).await;
    }
    let instance = instance_name(&options);
    let controllers = prepared.into_iter().zip(leading).map(|(prepared, leading)| {
        let module = prepared.slot.current();
        let manifest = module.manifest();
        let module_metrics = metrics.for_module(&prepared.name);
        module_metrics.loaded(&manifest.version, module.digest());
        let parent_writer = reflector::store::Writer::new(prepared.parent_kind.resource.clone());
        let ctx = Arc::new(Context {
            client: client.clone(),
            module: prepared.slot.clone(),
            module_name: prepared.name.clone(),
            parent_kind: prepared.parent_kind.clone(),
            serving: prepared.serving,
            caches: caches.clone(),
            triggers: prepared.triggers,
            references: prepared.references,
            metrics: module_metrics,
            field_manager: manifest.field_manager.clone(),
            events: events::Events::new(client.clone(), &manifest.event_reporter, Some(instance.clone())),
            backoff: Backoff::default(),
            status_memo: status::StatusMemo::default(),
            resync_period: options.resync_period,
            parents: parent_writer.as_reader(),
            requeue: prepared.requeue,
            swap: prepared.swap,
            swap_policy: options.swap_policy.clone(),
            own_writes: prepared.own_writes,
        });
        if let Some((previous, until)) = prepared.resumed_probation {
            hot_swap::resume_probation(&ctx, previous, until);
        }
        leading.send_replace(Some(ctx.clone()));
        // A watched module file: new versions are offered for a swap.
        let watcher = prepared.slot.file().map(|file| {
            let task = hot_swap::watch_file(ctx.clone(), file.clone(), prepared.slot.allow_precompiled());
            AbortOnDrop(tokio::spawn(task))
        });
        let controller = controller_for(
            ctx,
            parent_writer,
            &client,
            options.namespace.as_deref(),
            options.concurrency,
            prepared.parents,
            prepared.everything,
            stopped.clone(),
        );
        async move {
            controller.await;
            // The module's sources stop with its controller.
            drop(watcher);
            drop(leading);
        }
    });
    let controllers = futures::future::join_all(controllers);

    let outcome = match election.as_mut() {
        Some(election) => {
            let mut controllers = std::pin::pin!(controllers);
            tokio::select! {
                _ = &mut controllers => Ok(()),
                lost = election.keep() => {
                    tracing::error!(error = %lost, "stepping down");
                    stop_tx.send_replace(true);
                    // Let reconciles in flight finish, then exit.
                    controllers.await;
                    Err(OperatorError::Leadership(lost))
                }
            }
        }
        None => {
            controllers.await;
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

/// On becoming the leader, before any reconcile: the module serves the
/// version the previous leader served when this replica holds it compiled
/// (`SwapState::take_over`), with its kinds' caches listed first (if they
/// cannot be listed in time it keeps the version it started on); and when
/// that version is on probation, the version to roll back to is made ready
/// the same way.
async fn take_over(prepared: &mut Prepared, caches: &Caches, sync_timeout: Duration) {
    let started = prepared.serving.load_full();
    let previous = prepared.swap.take_over(&prepared.slot);
    let module = prepared.slot.current();
    if module.digest() != started.module.digest() {
        match listed(module.clone(), caches, &prepared.triggers, sync_timeout).await {
            Ok(serving) => {
                prepared.serving.store(serving);
            }
            Err(error) => {
                tracing::error!(
                    module = prepared.name,
                    digest = module.digest(),
                    error,
                    "cannot serve the previous leader's version; serving the one this replica started on"
                );
                prepared.slot.swap(started.module.clone());
                return;
            }
        }
    }
    let Some(previous) = previous else { return };
    let rollback_target = if previous.module.digest() == started.module.digest() {
        Ok(started)
    } else {
        listed(previous.module.clone(), caches, &prepared.triggers, sync_timeout).await
    };
    match rollback_target {
        Ok(serving) => prepared.resumed_probation = Some((serving, previous.until)),
        Err(error) => {
            tracing::warn!(
                module = prepared.name,
                digest = previous.module.digest(),
                error,
                "cannot ready the version to roll back to; no rollback window"
            )
        }
    }
}

/// `module` with the caches of its kinds subscribed and listed.
async fn listed(
    module: Arc<LogicModule>,
    caches: &Caches,
    triggers: &Arc<dyn CacheEvents>,
    sync_timeout: Duration,
) -> Result<Arc<Serving>, String> {
    let serving = Serving::new(module, caches).map_err(|error| error.to_string())?;
    serving.subscribe(triggers);
    serving.wait_until_known(sync_timeout).await?;
    Ok(Arc::new(serving))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One module's controller: its parent watch (as `Controller::new_with`
/// builds it, plus forgetting deleted parents), triggered also by its
/// owned and read kinds' changes.
#[allow(clippy::too_many_arguments)]
fn controller_for<Stopped>(
    ctx: Arc<Context>,
    parent_writer: reflector::store::Writer<CachedObject>,
    client: &Client,
    namespace: Option<&str>,
    concurrency: u16,
    parents_rx: mpsc::UnboundedReceiver<ObjectRef<CachedObject>>,
    everything_rx: mpsc::UnboundedReceiver<()>,
    stopped: impl Fn() -> Stopped + Send + Sync + 'static,
) -> impl Future<Output = ()>
where
    Stopped: Future<Output = ()> + Send + Sync + 'static,
{
    let parent_kind = ctx.parent_kind.clone();
    let parent_store = parent_writer.as_reader();
    let parent_store_for_stop = parent_store.clone();
    let forgetting = ctx.clone();
    let own_writes = ctx.own_writes.clone();
    let parent_id = parent_kind.id();
    // Compact parents, without managedFields: see CachedObject.
    let parent_watch = watcher(parent_kind.watch_api(client, namespace), watcher::Config::default());
    let parents = reflector(parent_writer, parent_watch)
        .inspect_ok(move |event| {
            if let Some(parent) = deleted_parent(event) {
                forgetting.forget(&parent);
            }
        })
        .applied_objects()
        // The store has it; a status the reconcile wrote itself wakes nothing.
        .try_filter(move |parent| {
            let id = (parent_id.clone(), parent.namespace().unwrap_or_default(), parent.name_any());
            let echo = own_writes.is_echo(&id, parent.resource_version().as_deref());
            std::future::ready(!echo)
        });
    let module = ctx.module_name.clone();
    Controller::for_stream_with(parents, parent_store, parent_kind.resource.clone())
        .with_config(controller::Config::default().concurrency(concurrency))
        .reconcile_on(receiver_stream(parents_rx))
        .reconcile_all_on(receiver_stream(everything_rx))
        .graceful_shutdown_on(stopped())
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .take_until(stopped_before_ready(parent_store_for_stop, stopped()))
        .for_each(move |result| {
            if let Err(error) = result {
                match error {
                    // Already logged by the error policy.
                    controller::Error::ReconcilerFailed(..) => {}
                    other => tracing::warn!(module, error = %other, "controller"),
                }
            }
            std::future::ready(())
        })
}

/// Resolves when `stopped` does before the parents' first list is complete:
/// then the controller must stop at once. A graceful shutdown would wait
/// for ever, as kube-runtime's runner holds every reconcile until that
/// list, which the shutdown itself cuts off; nothing has been reconciled
/// yet, so nothing is cut short. Once the list is in, it never resolves and
/// the graceful shutdown lets reconciles in flight finish.
async fn stopped_before_ready(parents: reflector::Store<CachedObject>, stopped: impl Future<Output = ()>) {
    stopped.await;
    if parents.wait_until_ready().now_or_never().is_none() {
        tracing::info!("stopping before the first list of the parents was complete: nothing to finish");
        return;
    }
    std::future::pending::<()>().await;
}

fn instance_name(options: &Options) -> String {
    options
        .leader_election
        .as_ref()
        .map(|l| l.identity.clone())
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| "wasm-operator".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(namespace: Option<&str>) -> CachedObject {
        let metadata = match namespace {
            Some(namespace) => serde_json::json!({"name": "cache", "namespace": namespace}),
            None => serde_json::json!({"name": "cache"}),
        };
        serde_json::from_str(&serde_json::json!({"metadata": metadata}).to_string()).expect("an object")
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
