//! The plan of a swap: what a verified version would do differently from
//! the serving one, parent by parent, computed by the leader from its
//! caches before anything changes. It is `wasm-operator plan`'s
//! computation (`offline::reconcile` with both versions on the same inputs
//! and the same `now`, then `plan::compare`), so the plan a LogicModule's
//! status shows is the one the command prints for the same cluster. It is
//! also the dry run: a parent the serving version reconciles and the new
//! one fails on is a regression, and too many refuse the version.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::Resource;
use serde_json::{Value, json};

use crate::operator::context::{Calls, Context};
use crate::operator::reconciling::inputs::inputs;
use crate::operator::swapping::rollout::{PARENTS_NAMED, SwapPlan};
use crate::operator::swapping::serving::Serving;
use crate::operator::watching::cached_object::CachedObject;
use crate::planning::compare::{self, Side};
use crate::planning::kind_schema::Schemas;
use crate::planning::kinds::{KindError, Kinds};
use crate::planning::offline::{self, Given};
use crate::planning::parent_plan::ParentPlan;

/// Every cached parent (not being deleted) through `active` and
/// `candidate`; stops once more than `failures_allowed` parents regress.
pub fn plan_swap(
    ctx: &Context,
    active: &Serving,
    candidate: &Serving,
    failures_allowed: usize,
    now: &str,
) -> Result<SwapPlan, KindError> {
    let active_kinds = Kinds::from_manifest(active.module.manifest())?;
    let candidate_kinds = Kinds::from_manifest(candidate.module.manifest())?;
    let mut plan = SwapPlan {
        digest: candidate.module.digest().to_owned(),
        against: active.module.digest().to_owned(),
        planned_at: now.to_owned(),
        ..SwapPlan::default()
    };
    // In namespace and name order: the parents named are the same on every run.
    let mut parents: Vec<Arc<CachedObject>> = ctx.parents.state();
    parents.sort_by(|a, b| (&a.meta().namespace, &a.meta().name).cmp(&(&b.meta().namespace, &b.meta().name)));
    for parent in parents.iter().filter(|p| p.meta().deletion_timestamp.is_none()) {
        let planned = plan_parent(ctx, parent, (active, &active_kinds), (candidate, &candidate_kinds), now);
        plan.summary.add(&planned);
        let name = format!("{}/{}", planned.namespace, planned.name);
        if planned.fails() {
            let why = planned.new_error.as_ref().map_or_else(String::new, |e| e.message.clone());
            plan.regressions.push(format!("{name}: {why}"));
            // Enough to refuse: a module that loops would cost its
            // deadline on every parent.
            if plan.regressions.len() > failures_allowed {
                break;
            }
        }
        if planned.changed() && plan.changed_parents.len() < PARENTS_NAMED {
            plan.changed_parents.push(name);
        }
    }
    Ok(plan)
}

/// One parent through both versions, on the inputs the caches give each
/// (its children of either version's owned kinds, and the related objects
/// either version references).
pub(super) fn plan_parent(
    ctx: &Context,
    parent: &CachedObject,
    (active, active_kinds): (&Serving, &Kinds),
    (candidate, candidate_kinds): (&Serving, &Kinds),
    now: &str,
) -> ParentPlan {
    let parent_json = parent.module_json(&ctx.parent_kind);
    let parent_value: Value = serde_json::from_str(&parent_json).unwrap_or_default();
    let mut owned = Vec::new();
    let mut related = Vec::new();
    let mut seen = BTreeSet::new();
    let mut schemas = Schemas::default();
    for serving in [active, candidate] {
        serving.add_schemas(&mut schemas);
        // A version whose `references` fails fails in the reconcile below
        // too; its inputs add nothing.
        let Ok(gathered) = inputs(ctx, Calls::Unrecorded, serving, parent, &parent_json) else { continue };
        let children = &gathered.children;
        for ((_, object), text) in children.objects.iter().zip(&children.json) {
            if let Some(child) = with_applied(object, text, &ctx.field_manager) {
                add_once(child, &mut owned, &mut seen);
            }
        }
        for text in &gathered.related {
            if let Ok(object) = serde_json::from_str(text) {
                add_once(object, &mut related, &mut seen);
            }
        }
    }
    let given = Given {
        parent: &parent_value,
        owned: &owned,
        related: &related,
        now,
        problem: None,
        status_owned: None,
        schemas: Some(&schemas),
    };
    let before = offline::reconcile(&active.module, active_kinds, &given);
    let after = offline::reconcile(&candidate.module, candidate_kinds, &given);
    compare::compare(
        &parent_value,
        &owned,
        &Side { outcome: &before, kinds: active_kinds },
        &Side { outcome: &after, kinds: candidate_kinds },
    )
}

/// A child (`text`, as a module reads it) as it is listed from the
/// cluster, with the fields `manager` applied to it (a `managedFields`
/// entry): `offline` decides a version's applies by them, as its
/// reconciles do.
fn with_applied(object: &CachedObject, text: &str, manager: &str) -> Option<Value> {
    let mut child: Value = serde_json::from_str(text).ok()?;
    let applied = object.applied_fields(manager).and_then(|fields| serde_json::from_str::<Value>(fields).ok());
    if let (Some(fields), Some(metadata)) = (applied, child.get_mut("metadata").and_then(Value::as_object_mut)) {
        let entry = json!({"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields});
        metadata.insert("managedFields".into(), Value::Array(vec![entry]));
    }
    Some(child)
}

/// Adds `object` to `list` unless an object of that apiVersion, kind,
/// namespace and name is there already (both versions' caches of one kind
/// are the same cache).
fn add_once(object: Value, list: &mut Vec<Value>, seen: &mut BTreeSet<(String, String, String, String)>) {
    let field = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let key = (field("/apiVersion"), field("/kind"), field("/metadata/namespace"), field("/metadata/name"));
    if seen.insert(key) {
        list.push(object);
    }
}
