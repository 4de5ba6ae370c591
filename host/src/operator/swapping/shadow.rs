//! Shadow mode (a LogicModule's `spec.shadow`), what a shadow is and what
//! it found (`shadow_run.rs` runs it): a candidate version runs beside the
//! serving one on every reconcile for a while and writes nothing; where the two answers differ is counted
//! (`module_shadow_differences_total`) and the first differing parents
//! listed, each with its first differing field. The comparison is the
//! plan's (`swap_plan::plan_parent`): both versions on the same inputs from
//! the caches, after the serving version's reconcile. Promoting the
//! candidate is setting the LogicModule's image to its reference.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::operator::swapping::serving::Serving;
use crate::planning::kinds::Kinds;

/// How many differing parents a report lists (it counts them all).
pub const DIFFERENCES_LISTED: usize = 20;

/// A candidate running beside the serving version.
pub struct Shadow {
    /// The candidate, with the caches of its kinds.
    pub serving: Arc<Serving>,
    pub(super) kinds: Kinds,
    /// Where it was pulled from, pinned.
    pub reference: String,
    pub until: SystemTime,
    pub(super) report: Mutex<Tally>,
}

#[derive(Default)]
pub(super) struct Tally {
    pub(super) report: ShadowReport,
    /// The parents that differed, hashed: one word each.
    pub(super) differing: HashSet<u64>,
}

/// What a shadow found, as the LogicModule's status shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ShadowReport {
    /// Reconciles it ran beside.
    pub reconciles: u64,
    /// Parents where its answer differed at least once.
    pub differing_parents: u64,
    /// The first [`DIFFERENCES_LISTED`] of them, each with its first difference.
    pub differences: Vec<ShadowDifference>,
}

/// A parent's first difference.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ShadowDifference {
    /// `namespace/name`
    pub parent: String,
    /// `create`, `update`, `delete`, `unmanaged`, `status` or `fails`.
    pub change: String,
    /// The object's kind and name (the parent's for `status` and `fails`).
    pub kind: String,
    pub name: String,
    /// The first differing field (`data.revision`), or why it fails.
    pub field: String,
}

impl Shadow {
    pub fn new(serving: Arc<Serving>, reference: String, until: SystemTime) -> Result<Self, String> {
        let kinds = Kinds::from_manifest(serving.module.manifest()).map_err(|error| error.to_string())?;
        Ok(Self { serving, kinds, reference, until, report: Mutex::default() })
    }

    pub fn report(&self) -> ShadowReport {
        self.report.lock().unwrap_or_else(PoisonError::into_inner).report.clone()
    }
}

/// A shadow whose window ended, and what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndedShadow {
    pub reference: String,
    pub digest: String,
    pub report: ShadowReport,
}
