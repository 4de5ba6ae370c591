//! Starting the operator: each module prepared on the shared caches, the
//! LogicModule followers, the endpoints, leader election, then one
//! controller per module until shutdown or a lost lease.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use kube::Client;
use kube::runtime::reflector;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{mpsc, watch};

use crate::operator::context::Context;
use crate::operator::controller::controller_for;
use crate::operator::endpoints::http;
use crate::operator::endpoints::metrics::Metrics;
use crate::operator::errors::OperatorError;
use crate::operator::identity::ModuleClient;
use crate::operator::leader::LeaderElection;
use crate::operator::reconciling::backoff::Backoff;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::swap_state::{self, SwapState};
use crate::operator::swapping::{hot_swap, logic_modules, probation};
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::{CacheEvents, Caches};
use crate::operator::watching::own_writes::OwnWrites;
use crate::operator::watching::references::ReferenceIndex;
use crate::operator::watching::triggers::{Triggers, Wakes};
use crate::operator::writing::events;
use crate::operator::writing::status_memo::StatusMemo;
use crate::operator::{Options, recording};
use crate::planning::kinds::Kind;
use crate::runtime::call_pool::CallPool;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::slot::ModuleSlot;

/// One module, set up: the version it starts on with its caches
/// subscribed, its triggers.
struct Prepared {
    slot: ModuleSlot,
    swap: Arc<SwapState>,
    name: String,
    parent_kind: Kind,
    serving: Arc<ArcSwap<Serving>>,
    triggers: Arc<dyn CacheEvents>,
    /// Opened when its controller starts (the replica leads).
    wakes: Arc<Wakes>,
    references: Arc<ReferenceIndex>,
    own_writes: Arc<OwnWrites>,
    requeue: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    parents: mpsc::UnboundedReceiver<ObjectRef<CachedObject>>,
    everything: mpsc::UnboundedReceiver<()>,
    /// Set on taking over a version on probation: the version to roll back
    /// to (its caches listed) and when the window closes.
    resumed_probation: Option<(Arc<Serving>, std::time::SystemTime)>,
    /// Who its writes are made as, already checked against its manifest.
    identity: ModuleClient,
}

fn prepare(
    slot: ModuleSlot,
    identity: ModuleClient,
    caches: &Caches,
    metrics: &Arc<Metrics>,
) -> Result<Prepared, OperatorError> {
    let module = slot.current();
    let name = module.name().to_owned();
    let kinds_error = |source| OperatorError::Kinds { module: name.clone(), source };
    let parent_kind = Kind::from_info(&module.manifest().parent).map_err(kinds_error)?;
    let serving = Arc::new(ArcSwap::from_pointee(Serving::new(module.clone(), caches).map_err(kinds_error)?));
    let references = Arc::new(ReferenceIndex::default());
    let own_writes = Arc::new(OwnWrites::default());
    let (parents_tx, parents) = mpsc::unbounded_channel();
    let (everything_tx, everything) = mpsc::unbounded_channel();
    let swap = Arc::new(SwapState::new(metrics.for_module(&name)));
    let wakes = Arc::new(Wakes::closed(parents_tx.clone(), everything_tx));
    let triggers: Arc<dyn CacheEvents> = Arc::new(Triggers {
        parent: parent_kind.clone(),
        serving: serving.clone(),
        references: references.clone(),
        own_writes: own_writes.clone(),
        wakes: wakes.clone(),
        swap: swap.clone(),
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
    swap.remember(module.clone());
    Ok(Prepared {
        slot,
        swap,
        name,
        parent_kind,
        serving,
        triggers,
        wakes,
        references,
        own_writes,
        requeue: parents_tx,
        parents,
        everything,
        resumed_probation: None,
        identity,
    })
}

/// Each module's client for its writes, once its identity is known to be
/// allowed all its manifest claims: a module that is not is refused here,
/// before anything is watched.
async fn identities(
    client: &Client,
    modules: &[ModuleSlot],
    options: &Options,
) -> Result<Vec<ModuleClient>, OperatorError> {
    let mut identities = Vec::with_capacity(modules.len());
    for slot in modules {
        let module = slot.current();
        let identity = options.module_identity.client_for(client, module.name(), options.namespace.as_deref())?;
        check_when_reachable(&identity, &module).await?;
        if let Some(user) = &identity.user {
            tracing::info!(module = module.name(), user, "the module's writes are made as its ServiceAccount");
        }
        identities.push(identity);
    }
    Ok(identities)
}

/// The check of what the module's identity may do, asked again while the
/// API server cannot answer (restarting, unreachable, overloaded), for as
/// long as it takes a control plane to restart: an operator started
/// meanwhile waits for it, as its watches and the Lease do, instead of
/// exiting at once (make soak saw it crash-loop through every restart).
///
/// A denial is asked again too, for a few seconds: an API server that has
/// just restarted answers 403 until its authorizer's caches are filled
/// (make soak saw a replica refused its module so), and a module that truly
/// may not is refused that much later.
async fn check_when_reachable(identity: &ModuleClient, module: &LogicModule) -> Result<(), OperatorError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(250);
    loop {
        let error = match identity.check(module).await {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        let transient = error.is_transient();
        let limit = if transient { UNREACHABLE_AT_START } else { DENIED_AT_START };
        if started.elapsed() + delay >= limit {
            return Err(OperatorError::Access { module: module.name().to_owned(), source: error });
        }
        let retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        if transient {
            tracing::warn!(
                module = module.name(),
                error = %error,
                retry_in_ms,
                "cannot ask the API server what the module may do yet; asking again"
            );
        } else {
            // What it may not do is said once, when it is final.
            tracing::warn!(
                module = module.name(),
                retry_in_ms,
                "the API server denies what the module needs; asking again, in case its authorizer is still starting"
            );
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// How long a starting operator waits for an API server that cannot answer.
const UNREACHABLE_AT_START: Duration = Duration::from_secs(120);

/// How long a starting operator asks again after a denial.
const DENIED_AT_START: Duration = Duration::from_secs(8);

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

/// How long a stopping operator waits for its queued events to be written.
const EVENTS_AT_SHUTDOWN: Duration = Duration::from_secs(5);

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
            let takeover =
                logic_modules::takeover::serving_version(&client, &logic_modules.registry, &slot.current()).await;
            if let Some(takeover) = &takeover {
                slot.swap(takeover.module.clone());
            }
            at_start.push(takeover);
        }
    }
    let identities = identities(&client, &modules, &options).await?;
    let caches = Arc::new(Caches::new(client.clone(), options.namespace.clone(), Some(metrics.clone())));
    let mut prepared: Vec<Prepared> = modules
        .into_iter()
        .zip(identities)
        .map(|(slot, identity)| prepare(slot, identity, &caches, &metrics))
        .collect::<Result<_, _>>()?;
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
        let release = swap_state::release_idle_code(prepared.slot.clone(), prepared.swap.clone());
        _followers.push(AbortOnDrop(tokio::spawn(release)));
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
    let records = Arc::new(recording::recorder::Records::new(options.record_budget, metrics.clone()));
    let endpoints =
        http::Endpoints { metrics: metrics.clone(), records: records.clone(), readiness: readiness.clone() };
    let _servers = http::serve(options.metrics_address, options.health_address, endpoints, secure).await?;

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
    // Started: what only starting touched goes back now, before the
    // readiness, and from then on what bursts free and rare work maps,
    // every 30 s.
    let _giving_back = AbortOnDrop(tokio::spawn(crate::memory::give_back::give_back_unused_memory()));
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
    // A leader that cannot renew its lease in time starts no reconcile.
    let may_reconcile = election.as_ref().map(LeaderElection::may_reconcile);
    let controllers = prepared.into_iter().zip(leading).map(|(prepared, leading)| {
        let module = prepared.slot.current();
        let manifest = module.manifest();
        let module_metrics = metrics.for_module(&prepared.name);
        module_metrics.loaded(&module);
        let parent_writer = reflector::store::Writer::new(prepared.parent_kind.resource.clone());
        let ctx = Arc::new(Context {
            identity: prepared.identity,
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
            status_memo: StatusMemo::default(),
            resync_period: options.resync_period,
            parents: parent_writer.as_reader(),
            requeue: prepared.requeue,
            swap: prepared.swap,
            swap_policy: options.swap_policy.clone(),
            own_writes: prepared.own_writes,
            recorder: records.for_module(&prepared.name, prepared.slot.clone()),
            call_pool: CallPool::new(options.module_call_concurrency),
        });
        if let Some((previous, until)) = prepared.resumed_probation {
            probation::resume_probation(&ctx, previous, until);
        }
        leading.send_replace(Some(ctx.clone()));
        let events = ctx.events.clone();
        // A watched module file: new versions are offered for a swap.
        let watcher = prepared.slot.file().map(|file| {
            let task = hot_swap::watch_file(ctx.clone(), file.clone(), prepared.slot.allow_precompiled());
            AbortOnDrop(tokio::spawn(task))
        });
        // Changes from here on wake parents; the controller's first list
        // reconciles every parent for what came before.
        prepared.wakes.open();
        let controller = controller_for(
            ctx,
            parent_writer,
            &client,
            options.namespace.as_deref(),
            options.concurrency,
            prepared.parents,
            prepared.everything,
            may_reconcile.clone(),
            stopped.clone(),
        );
        async move {
            controller.await;
            // The module's sources stop with its controller.
            drop(watcher);
            drop(leading);
            events.flush(EVENTS_AT_SHUTDOWN).await;
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

fn instance_name(options: &Options) -> String {
    options
        .leader_election
        .as_ref()
        .map(|l| l.identity.clone())
        .or_else(|| std::env::var("POD_NAME").ok())
        .unwrap_or_else(|| "wasm-operator".to_owned())
}
