//! One module set up before its controller starts: the version it starts
//! on with its caches subscribed, its triggers and queues; on becoming the
//! leader, the version the previous leader served (and the one to roll
//! back to, when that is on probation) listed and made ready.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::operator::endpoints::metrics::Metrics;
use crate::operator::errors::OperatorError;
use crate::operator::identity::ModuleClient;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::swap_state::SwapState;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::{CacheEvents, Caches};
use crate::operator::watching::own_writes::OwnWrites;
use crate::operator::watching::references::ReferenceIndex;
use crate::operator::watching::steps::Steps;
use crate::operator::watching::triggers::{Triggers, Wakes};
use crate::planning::kinds::Kind;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::slot::ModuleSlot;

/// One module, set up: the version it starts on with its caches
/// subscribed, its triggers.
pub(super) struct Prepared {
    pub(super) slot: ModuleSlot,
    pub(super) swap: Arc<SwapState>,
    pub(super) name: String,
    pub(super) parent_kind: Kind,
    pub(super) serving: Arc<ArcSwap<Serving>>,
    pub(super) triggers: Arc<dyn CacheEvents>,
    /// Opened when its controller starts (the replica leads).
    pub(super) wakes: Arc<Wakes>,
    pub(super) references: Arc<ReferenceIndex>,
    pub(super) own_writes: Arc<OwnWrites>,
    pub(super) steps: Arc<Steps>,
    pub(super) requeue: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    pub(super) parents: mpsc::UnboundedReceiver<ObjectRef<CachedObject>>,
    pub(super) everything: mpsc::UnboundedReceiver<()>,
    /// Set on taking over a version on probation: the version to roll back
    /// to (its caches listed) and when the window closes.
    pub(super) resumed_probation: Option<(Arc<Serving>, std::time::SystemTime)>,
    /// Who its writes are made as, already checked against its manifest.
    pub(super) identity: ModuleClient,
}

pub(super) fn prepare(
    slot: ModuleSlot,
    identity: ModuleClient,
    caches: &Caches,
    metrics: &Arc<Metrics>,
    max_steps: u32,
) -> Result<Prepared, OperatorError> {
    let module = slot.current();
    let name = module.name().to_owned();
    let kinds_error = |source| OperatorError::Kinds { module: name.clone(), source };
    let parent_kind = Kind::from_info(&module.manifest().parent).map_err(kinds_error)?;
    let serving = Arc::new(ArcSwap::from_pointee(Serving::new(module.clone(), caches).map_err(kinds_error)?));
    let references = Arc::new(ReferenceIndex::default());
    let own_writes = Arc::new(OwnWrites::default());
    let steps = Arc::new(Steps::new(max_steps));
    let (parents_tx, parents) = mpsc::unbounded_channel();
    let (everything_tx, everything) = mpsc::unbounded_channel();
    let swap = Arc::new(SwapState::new(metrics.for_module(&name)));
    let wakes = Arc::new(Wakes::closed(parents_tx.clone(), everything_tx));
    let triggers: Arc<dyn CacheEvents> = Arc::new(Triggers {
        parent: parent_kind.clone(),
        serving: serving.clone(),
        references: references.clone(),
        own_writes: own_writes.clone(),
        steps: steps.clone(),
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
        steps,
        requeue: parents_tx,
        parents,
        everything,
        resumed_probation: None,
        identity,
    })
}

/// Two modules reconciling one parent kind would fight over its children.
pub(super) fn one_module_per_parent(prepared: &[Prepared]) -> Result<(), OperatorError> {
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

/// On becoming the leader, before any reconcile: the module serves the
/// version the previous leader served when this replica holds it compiled
/// (`SwapState::take_over`), with its kinds' caches listed first (if they
/// cannot be listed in time it keeps the version it started on); and when
/// that version is on probation, the version to roll back to is made ready
/// the same way.
pub(super) async fn take_over(prepared: &mut Prepared, caches: &Caches, sync_timeout: Duration) {
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
