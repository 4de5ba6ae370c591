//! What one module's reconciles share (`Context`), the module call and the
//! write every step goes through, and the parent as a reconcile sees it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use kube::runtime::reflector;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::operator::endpoints::metrics::ModuleMetrics;
use crate::operator::identity::ModuleClient;
use crate::operator::reconciling::backoff::Backoff;
use crate::operator::reconciling::waiting::WaitingParents;
use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::swap_state::{SwapPolicy, SwapState};
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::{CacheEvents, Caches};
use crate::operator::watching::own_writes;
use crate::operator::watching::own_writes::OwnWrites;
use crate::operator::watching::references::{ParentKey, ReferenceIndex};
use crate::operator::watching::steps::Steps;
use crate::operator::writing::events;
use crate::operator::writing::status_memo::StatusMemo;
use crate::operator::writing::write_answer::WriteAnswer;
use crate::planning::kinds::{Kind, KindError};
use crate::planning::step::ModuleCaller;
use crate::runtime::call_error::CallResult;
use crate::runtime::call_pool::CallPool;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::reconciler::Reconciler;
use crate::runtime::slot::ModuleSlot;

/// Everything one module's reconciles need, shared by all of them.
pub struct Context {
    /// The client the module's writes go through, as the module's own
    /// identity (`identity/`) unless the operator runs them as itself.
    pub identity: ModuleClient,
    /// The version serving now, as the module's sources see it; kept equal
    /// to `serving`'s module by [`Context::serve`].
    pub module: ModuleSlot,
    /// The module's name, as its metrics and logs carry it.
    pub module_name: String,
    /// The parent kind, which every version of the module keeps.
    pub parent_kind: Kind,
    /// The version serving now with the caches of its kinds; a reconcile
    /// takes it once and uses only it.
    pub(super) serving: Arc<ArcSwap<Serving>>,
    /// Every cache of the process, for a new version's kinds.
    pub(super) caches: Arc<Caches>,
    /// What a cache change means for this module's parents.
    pub(super) triggers: Arc<dyn CacheEvents>,
    pub references: Arc<ReferenceIndex>,
    pub metrics: ModuleMetrics,
    /// The field manager writes go under (the manifest's).
    pub field_manager: String,
    pub(super) events: events::Events,
    pub(super) backoff: Backoff,
    /// Parents whose last answer asked for a timer.
    pub(super) timers: WaitingParents,
    /// Parents being deleted whose module is not done finalizing them.
    pub(super) finalizing: WaitingParents,
    /// The finalizer this module holds on its parents when it finalizes.
    pub(super) finalizer: String,
    pub(super) status_memo: StatusMemo,
    pub(super) resync_period: Duration,
    /// The parents, as the controller's watch caches them.
    pub parents: reflector::Store<CachedObject>,
    /// Queues a parent for a reconcile (a rollout after a swap).
    pub(super) requeue: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    pub(super) swap: Arc<SwapState>,
    pub(super) swap_policy: SwapPolicy,
    /// This module's own writes, so their watch events wake no reconcile.
    pub(super) own_writes: Arc<OwnWrites>,
    /// This module's reconciles that wrote, until their next step.
    pub(super) steps: Arc<Steps>,
    /// This module's recent reconciles, for export (`recording/`).
    pub recorder: Arc<crate::operator::recording::recorder::Recorder>,
    /// Where this module's calls run: off the async workers, a bounded
    /// number at once.
    pub(super) call_pool: CallPool,
}

impl Context {
    /// The version serving now, with its caches.
    pub fn serving(&self) -> Arc<Serving> {
        self.serving.load_full()
    }

    /// Makes `serving` the version every later reconcile runs on; answers
    /// the one it replaced. Reconciles in flight finish on theirs.
    pub(super) fn serve(&self, serving: Arc<Serving>) -> Arc<Serving> {
        self.module.swap(serving.module.clone());
        self.serving.swap(serving)
    }

    /// `module` with the caches of its kinds, subscribed to this module's
    /// triggers (which ignore kinds the serving version does not use).
    pub(super) fn serving_for(&self, module: Arc<LogicModule>) -> Result<Serving, KindError> {
        let serving = Serving::new(module, &self.caches)?;
        serving.subscribe(&self.triggers);
        Ok(serving)
    }

    /// The calls of one reconcile of `parent` (namespace, name) into
    /// `module`, the version it runs on (`planning/step.rs` makes them).
    pub fn calls<'a>(&'a self, calls: Calls, module: &'a LogicModule, parent: (&'a str, &'a str)) -> ModuleCalls<'a> {
        ModuleCalls { ctx: self, calls, module, parent }
    }

    /// One call into `module`, on a fresh instance, timed; a failure of the
    /// module itself is counted by its reason. A dry run
    /// (`Calls::Unrecorded`) counts nothing.
    ///
    /// What the module logs is emitted with `parent` (namespace, name).
    fn call_as<T>(
        &self,
        calls: Calls,
        module: &LogicModule,
        (namespace, name): (&str, &str),
        function: &'static str,
        call: impl FnOnce(&mut Reconciler) -> CallResult<T>,
    ) -> CallResult<T> {
        let started = Instant::now();
        let result = self.call_pool.run(|| {
            self.metrics.module_call_running(1);
            let result = module.reconciler().and_then(|mut instance| {
                let result = call(&mut instance);
                let log = instance.take_log();
                if !log.is_empty() {
                    log.emit(module.name(), Some(&format!("{namespace}/{name}")));
                }
                result
            });
            self.metrics.module_call_running(-1);
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
    pub(super) async fn own_write<T: WriteAnswer>(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        parent: &str,
        request: impl Future<Output = kube::Result<T>>,
    ) -> kube::Result<T> {
        let mut in_flight = WriteInFlight {
            ctx: self,
            id: (kind.id(), namespace.to_owned(), name.to_owned()),
            parent,
            answered: false,
        };
        self.own_writes.writing(&in_flight.id);
        let result = request.await;
        match &result {
            Ok(object) => in_flight.answer(object.resource_version()),
            // The API server answered: it did not apply the write.
            Err(kube::Error::Api(_)) => in_flight.answer(None),
            // No answer: it may have been applied.
            Err(_) => in_flight.unanswered(),
        }
        result
    }

    /// Queues the parent `namespace/name` for another reconcile (as a
    /// change: it goes before the start-up pass and the resync).
    pub(super) fn reconcile_again(&self, namespace: &str, name: &str) {
        let parent = ObjectRef::new_with(name, self.parent_kind.resource.clone()).within(namespace);
        let _ = self.requeue.send(parent);
    }

    /// Drops what is kept per parent (referenced objects, last status,
    /// retry delay) once the parent is gone.
    pub(super) fn forget(&self, parent: &ParentKey) {
        self.references.remove(parent);
        self.status_memo.forget(parent);
        self.backoff.reset(parent);
        self.metrics.timers(self.timers.forget(parent));
        self.metrics.finalizing(self.finalizing.forget(parent));
    }
}

/// A write on its way; dropped unanswered (the reconcile was cancelled), it
/// counts as maybe applied, and what it held is not lost.
struct WriteInFlight<'a> {
    ctx: &'a Context,
    id: own_writes::ObjectId,
    /// The parent whose reconcile writes, in the object's namespace.
    parent: &'a str,
    answered: bool,
}

impl WriteInFlight<'_> {
    fn answer(&mut self, resource_version: Option<&str>) {
        let held = self.ctx.own_writes.answered(&self.id, resource_version);
        self.settled(held);
    }

    fn unanswered(&mut self) {
        let held = self.ctx.own_writes.unanswered(&self.id);
        self.settled(held);
    }

    fn settled(&mut self, held: own_writes::Held) {
        self.answered = true;
        if held == own_writes::Held::OtherChanges {
            self.ctx.reconcile_again(&self.id.1, self.parent);
        }
    }
}

impl Drop for WriteInFlight<'_> {
    fn drop(&mut self) {
        // Cancelled while on its way: it may have been sent and applied.
        if !self.answered {
            self.unanswered();
        }
    }
}

/// One reconcile's calls into its module version, as [`Context::calls`]
/// makes them.
pub struct ModuleCalls<'a> {
    ctx: &'a Context,
    calls: Calls,
    module: &'a LogicModule,
    parent: (&'a str, &'a str),
}

impl<'a> ModuleCalls<'a> {
    /// The version these calls go to.
    pub fn module(&self) -> &'a LogicModule {
        self.module
    }
}

impl ModuleCaller for ModuleCalls<'_> {
    fn call<T>(&self, function: &'static str, call: impl FnOnce(&mut Reconciler) -> CallResult<T>) -> CallResult<T> {
        self.ctx.call_as(self.calls, self.module, self.parent, function, call)
    }
}

/// Whether module calls count in the metrics (a dry run's do not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    Recorded,
    Unrecorded,
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
