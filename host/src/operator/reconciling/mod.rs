//! Reconciling: one reconcile of one parent performed (the plan of
//! `planning/step.rs`, then its writes), the inputs gathered from the
//! caches, and the per-parent retry delays.

pub(super) mod backoff;
pub(super) mod inputs;
pub(super) mod reconcile;
