//! Which parents a cache change wakes, as the version serving now uses
//! each kind: a related object wakes the parents that referenced it, a
//! child its controller (unless it is the echo of the reconcile's own write).

use std::sync::Arc;

use arc_swap::ArcSwap;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use crate::operator::cached_object::CachedObject;
use crate::operator::caches::CacheEvents;
use crate::operator::hot_swap::SwapState;
use crate::operator::kinds::Kind;
use crate::operator::own_writes::OwnWrites;
use crate::operator::references::{ReferenceIndex, Related};
use crate::operator::serving::Serving;

/// Maps one module's cache changes to the parents to reconcile, as the
/// version serving now uses each kind.
pub(in crate::operator) struct Triggers {
    pub(in crate::operator) parent: Kind,
    pub(in crate::operator) serving: Arc<ArcSwap<Serving>>,
    pub(in crate::operator) references: Arc<ReferenceIndex>,
    pub(in crate::operator) own_writes: Arc<OwnWrites>,
    pub(in crate::operator) parents: mpsc::UnboundedSender<ObjectRef<CachedObject>>,
    pub(in crate::operator) everything: mpsc::UnboundedSender<()>,
    /// For the kinds a canary's version uses and the serving one does not.
    pub(in crate::operator) swap: Arc<SwapState>,
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
