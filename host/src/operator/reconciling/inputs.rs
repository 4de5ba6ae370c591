//! What a reconcile hands the module, gathered from the caches: the
//! children a parent controls and the related objects it references. The
//! reconcile (`reconcile.rs`) and a hot swap's plan (`swap_plan.rs`) use it.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Resource;

use crate::operator::context::{Calls, Context};
use crate::operator::errors::ReconcileError;
use crate::operator::swapping::serving::Serving;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::caches::Availability;
use crate::operator::watching::references::Related;
use crate::planning::step::{self, Child, Parent};
use crate::runtime::bindings::ObjectRef;

/// The children `namespace`/`uid` controls now, from the caches of the
/// owned kinds the API server serves, in manifest order, as the module
/// reads them.
pub struct Children {
    pub objects: Vec<(usize, Arc<CachedObject>)>,
    pub json: Vec<String>,
}

impl Children {
    pub fn of(serving: &Serving, namespace: &str, uid: &str) -> Self {
        let objects: Vec<(usize, Arc<CachedObject>)> = serving
            .owned
            .iter()
            .enumerate()
            .filter(|(_, cache)| cache.availability() == Availability::Served)
            .flat_map(|(index, cache)| {
                cache.controlled_by(namespace, uid).into_iter().map(move |object| (index, object))
            })
            .collect();
        let json = objects.iter().map(|(index, object)| object.module_json(&serving.owned[*index].kind)).collect();
        Self { objects, json }
    }

    /// Which child each is, for the step.
    pub fn keys(&self) -> Vec<Child<'_>> {
        self.objects
            .iter()
            .map(|(kind_index, object)| Child {
                kind_index: *kind_index,
                name: object.meta().name.as_deref().unwrap_or_default(),
            })
            .collect()
    }
}

/// The object `reference` names, from the cache of its kind, as the module
/// reads it; its key goes to `keys` (the reference index) whether or not
/// it exists. A kind the version does not read has no cache: nothing.
pub fn related_from_caches(
    serving: &Serving,
    namespace: &str,
    reference: &ObjectRef,
    keys: &mut BTreeSet<Related>,
) -> Option<String> {
    let cache = serving
        .reads
        .iter()
        .find(|c| c.kind.resource.group == reference.group && c.kind.resource.kind == reference.kind)?;
    let related_namespace = reference.namespace.as_deref().unwrap_or(namespace);
    keys.insert(Related {
        kind: reference.kind.clone(),
        namespace: related_namespace.to_owned(),
        name: reference.name.clone(),
    });
    cache.get(related_namespace, &reference.name).map(|object| object.module_json(&cache.kind))
}

/// What one reconcile would hand the module, gathered for a dry run: the
/// related objects the parent references, and the children it controls now.
pub struct Gathered {
    pub related: Vec<String>,
    pub children: Children,
}

/// Gathers what a reconcile of `parent` would hand the module of `serving`
/// from its caches, asking the module which objects it references. Changes
/// nothing.
pub fn inputs(
    ctx: &Context,
    calls: Calls,
    serving: &Serving,
    parent: &CachedObject,
    parent_json: &str,
) -> Result<Gathered, ReconcileError> {
    let namespace = parent.meta().namespace.as_deref().unwrap_or_default();
    let uid = parent.meta().uid.as_deref().unwrap_or_default();
    let name = parent.meta().name.as_deref().unwrap_or_default();
    let module_calls = ctx.calls(calls, &serving.module, (namespace, name));
    let references = step::references(&module_calls, Parent { json: parent_json, namespace, uid })?;
    let mut keys = BTreeSet::new();
    let related = references
        .iter()
        .filter_map(|reference| related_from_caches(serving, namespace, reference, &mut keys))
        .collect();
    Ok(Gathered { related, children: Children::of(serving, namespace, uid) })
}
