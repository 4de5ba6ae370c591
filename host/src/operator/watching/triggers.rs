//! Which parents a cache change wakes, as the version serving now uses
//! each kind: a related object wakes the parents that referenced it, a
//! child its controller (unless it is the echo of the reconcile's own write).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::operator::swapping::serving::Serving;
use crate::operator::swapping::swap_state::SwapState;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::CacheEvents;
use crate::operator::watching::own_writes::OwnWrites;
use crate::operator::watching::references::{ReferenceIndex, Related};
use crate::operator::watching::steps::Steps;
use crate::planning::kinds::Kind;

/// Maps one module's cache changes to the parents to reconcile, as the
/// version serving now uses each kind.
pub(in crate::operator) struct Triggers {
    pub(in crate::operator) parent: Kind,
    pub(in crate::operator) serving: Arc<ArcSwap<Serving>>,
    pub(in crate::operator) references: Arc<ReferenceIndex>,
    pub(in crate::operator) own_writes: Arc<OwnWrites>,
    /// Reconciles that wrote, waiting for their writes to land.
    pub(in crate::operator) steps: Arc<Steps>,
    pub(in crate::operator) wakes: Arc<Wakes>,
    /// For the kinds a canary's version uses and the serving one does not.
    pub(in crate::operator) swap: Arc<SwapState>,
}

impl Triggers {
    fn reconcile(&self, namespace: &str, name: &str) {
        self.wakes.parent(|| ObjectRef::new_with(name, self.parent.resource.clone()).within(namespace));
    }
}

/// The queues a module's controller reconciles from, closed until it runs.
/// A standby's caches follow every change while its controller, which
/// drains these unbounded queues, waits for the lease: open, they grew by
/// a parent reference (~0.4 KiB) per child change for as long as it waited
/// (issue 22's soak: standbys' heap rising ~0.1 MiB a minute). Nothing is
/// lost closed: a controller starts with a list of every parent and
/// reconciles each.
pub(in crate::operator) struct Wakes {
    parents: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    everything: mpsc::UnboundedSender<()>,
    open: AtomicBool,
}

impl Wakes {
    pub(in crate::operator) fn closed(
        parents: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
        everything: mpsc::UnboundedSender<()>,
    ) -> Self {
        Wakes { parents, everything, open: AtomicBool::new(false) }
    }

    /// The controller runs from now on.
    pub(in crate::operator) fn open(&self) {
        self.open.store(true, Ordering::Release);
    }

    fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    fn parent(&self, parent: impl FnOnce() -> ObjectRef<CachedObject>) {
        if self.is_open() {
            let _ = self.parents.send(parent());
        }
    }

    fn everything(&self) {
        if self.is_open() {
            let _ = self.everything.send(());
        }
    }
}

impl CacheEvents for Triggers {
    fn changed(&self, kind: &Kind, object: &CachedObject) {
        let Some(namespace) = object.namespace() else { return };
        let serving = self.serving.load();
        let canary = self.swap.canary();
        let canary = canary.as_ref().map(|c| &c.serving);
        if serving.reads(kind) || canary.is_some_and(|c| c.reads(kind)) {
            let related =
                Related { kind: kind.name().to_owned(), namespace: namespace.clone(), name: object.name_any() };
            for (namespace, name) in self.references.parents_of(&related) {
                self.reconcile(&namespace, &name);
            }
        }
        if serving.owns(kind) || canary.is_some_and(|c| c.owns(kind)) {
            let id = (kind.id(), namespace.clone(), object.name_any());
            // Echo first, then the step: a reconcile ending meanwhile sees
            // the echo as landed (`reconcile.rs`), so none slips between.
            let echo = self.own_writes.is_echo(&id, object.resource_version().as_deref());
            if let Some((namespace, name)) = self.steps.landed(&id) {
                self.reconcile(&namespace, &name);
            }
            if echo {
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
        self.wakes.everything();
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ApiResource;
    use kube::core::GroupVersionKind;

    use super::*;

    #[test]
    fn a_standby_queues_no_wake_and_a_leader_every_one() {
        let (parents_tx, mut parents) = mpsc::unbounded_channel();
        let (everything_tx, mut everything) = mpsc::unbounded_channel();
        let wakes = Wakes::closed(parents_tx, everything_tx);
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("memcached.c5c3.io", "v1beta1", "Memcached"));
        let parent = || ObjectRef::new_with("cache", resource.clone()).within("ns");

        for _ in 0..1000 {
            wakes.parent(parent);
            wakes.everything();
        }
        assert!(parents.try_recv().is_err(), "a standby holds no parent to wake");
        assert!(everything.try_recv().is_err());

        wakes.open();
        wakes.parent(parent);
        wakes.everything();
        assert_eq!(parents.try_recv().expect("queued once it leads"), parent());
        assert!(parents.try_recv().is_err(), "only what came after it began to lead");
        assert_eq!(everything.try_recv(), Ok(()));
    }
}
