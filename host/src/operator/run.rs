//! Starting the operator: each module prepared on the shared caches, the
//! LogicModule followers, the endpoints, leader election, then one
//! controller per module until shutdown or a lost lease. Each module's
//! identity is checked first (`run/identities.rs`), then the module is set
//! up on the caches, and taken over on becoming the leader
//! (`run/prepared.rs`).

mod identities;
mod prepared;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector;
use tokio::sync::watch;

use crate::operator::context::Context;
use crate::operator::controller::controller_for;
use crate::operator::endpoints::http;
use crate::operator::endpoints::metrics::Metrics;
use crate::operator::errors::OperatorError;
use crate::operator::leader::LeaderElection;
use crate::operator::reconciling::backoff::Backoff;
use crate::operator::reconciling::waiting::WaitingParents;
use crate::operator::swapping::swap_state;
use crate::operator::swapping::{hot_swap, logic_modules, probation};
use crate::operator::watching::caches::Caches;
use crate::operator::writing::events;
use crate::operator::writing::status_memo::StatusMemo;
use crate::operator::{Options, recording};
use crate::runtime::call_pool::CallPool;
use crate::runtime::slot::ModuleSlot;
use identities::identities;
use prepared::{Prepared, one_module_per_parent, prepare, take_over};

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
        .map(|(slot, identity)| prepare(slot, identity, &caches, &metrics, options.max_reconcile_steps))
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
            timers: WaitingParents::default(),
            finalizing: WaitingParents::default(),
            finalizer: crate::runtime::contract::finalizer_of(&prepared.name),
            status_memo: StatusMemo::default(),
            resync_period: options.resync_period,
            parents: parent_writer.as_reader(),
            requeue: prepared.requeue,
            swap: prepared.swap,
            swap_policy: options.swap_policy.clone(),
            own_writes: prepared.own_writes,
            steps: prepared.steps,
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
