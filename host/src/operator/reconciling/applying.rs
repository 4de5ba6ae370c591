//! What deciding the applies of one reconcile of a module that writes by
//! server-side apply needs, gathered before the plan: each owned kind's
//! schema and the fields the module's manager applied to each child.

use std::sync::Arc;

use crate::operator::errors::ReconcileError;
use crate::operator::reconciling::inputs::Children;
use crate::operator::swapping::serving::Serving;
use crate::operator::watching::caches::Availability;
use crate::planning::field_set::FieldSet;
use crate::planning::kind_schema::KindSchema;
use crate::planning::step::Applying;

/// The owned kinds' names, for an error reading their schemas.
fn owned_names(serving: &Serving) -> String {
    serving.owned.iter().map(|cache| cache.kind.name()).collect::<Vec<_>>().join(", ")
}

/// What deciding the applies of one reconcile needs, gathered: each owned
/// kind's schema (read from the API server once per kind) and the fields
/// the module's manager applied to each child.
pub async fn applying(serving: &Serving, children: &Children, manager: &str) -> Result<Applying, ReconcileError> {
    serving
        .read_owned_schemas()
        .await
        .map_err(|source| ReconcileError::Schema { kind: owned_names(serving), source })?;
    let mut schemas = Vec::with_capacity(serving.owned.len());
    for cache in &serving.owned {
        // A kind the API server does not serve is not written (its
        // objects are skipped with `KindNotServed`): nothing to read.
        if cache.availability() != Availability::Served {
            schemas.push(Arc::new(KindSchema::untyped()));
            continue;
        }
        let schema = cache
            .schema()
            .await
            .map_err(|source| ReconcileError::Schema { kind: cache.kind.name().to_owned(), source })?;
        schemas.push(schema);
    }
    // Fields that do not read as fieldsV1 count as never applied: the
    // object is applied again, which is always safe.
    let applied = children
        .objects
        .iter()
        .map(|(_, object)| {
            let text = object.applied_fields(manager)?;
            let fields = serde_json::from_str(text).ok()?;
            FieldSet::from_fields_v1(&fields).ok()
        })
        .collect();
    Ok(Applying { schemas, applied })
}
