//! What a reconcile hands the module, gathered from the caches. Both the
//! reconcile and a hot swap's plan (`swap_plan.rs`) use it.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Resource;

use crate::modules::CallError;
use crate::operator::cached_object::CachedObject;
use crate::operator::caches::Availability;
use crate::operator::references::Related;
use crate::operator::serving::Serving;
use crate::operator::{Calls, Context, ReconcileError};

/// What one reconcile hands the module: the related objects the parent
/// references (and their keys, for the reference index) and the children it
/// controls now, all from the caches.
pub struct Inputs {
    pub related_keys: BTreeSet<Related>,
    pub related: Vec<String>,
    pub current: Vec<(usize, Arc<CachedObject>)>,
    pub current_json: Vec<String>,
}

/// Gathers [`Inputs`] for `parent` from the caches of `serving`, asking its
/// module which objects it references. Changes nothing: a dry run uses it
/// too.
pub fn inputs(
    ctx: &Context,
    calls: Calls,
    serving: &Serving,
    parent: &CachedObject,
    parent_json: &str,
) -> Result<Inputs, ReconcileError> {
    let module = &serving.module;
    let namespace = parent.meta().namespace.as_deref().unwrap_or_default();
    let uid = parent.meta().uid.as_deref().unwrap_or_default();
    let name = parent.meta().name.as_deref().unwrap_or_default();
    let references = match ctx.call_as(calls, module, (namespace, name), "references", |m| m.references(parent_json)) {
        Ok(references) => references,
        // An invalid parent: desired reports it with every path.
        Err(CallError::Logic(_)) => Vec::new(),
        Err(source) => return Err(ReconcileError::Module { function: "references", source }),
    };
    let mut related_keys = BTreeSet::new();
    let mut related = Vec::new();
    for reference in &references {
        let Some(cache) = serving
            .reads
            .iter()
            .find(|c| c.kind.resource.group == reference.group && c.kind.resource.kind == reference.kind)
        else {
            continue;
        };
        let related_namespace = reference.namespace.as_deref().unwrap_or(namespace);
        related_keys.insert(Related {
            kind: reference.kind.clone(),
            namespace: related_namespace.to_owned(),
            name: reference.name.clone(),
        });
        if let Some(object) = cache.get(related_namespace, &reference.name) {
            related.push(object.module_json(&cache.kind));
        }
    }
    // The children it controls now, from the caches, in manifest order.
    let current: Vec<(usize, Arc<CachedObject>)> = serving
        .owned
        .iter()
        .enumerate()
        .filter(|(_, cache)| cache.availability() == Availability::Served)
        .flat_map(|(index, cache)| cache.controlled_by(namespace, uid).into_iter().map(move |object| (index, object)))
        .collect();
    let current_json: Vec<String> =
        current.iter().map(|(index, object)| object.module_json(&serving.owned[*index].kind)).collect();
    Ok(Inputs { related_keys, related, current, current_json })
}
