//! Reconciling: one reconcile of one parent performed (the plan of
//! `planning/step.rs`, then its writes), the inputs gathered from the
//! caches (and, for a module that applies, the kinds' schemas and its
//! applied fields), and the per-parent retry delays.

pub(super) mod applying;
pub(super) mod backoff;
pub(super) mod inputs;
pub(super) mod reconcile;
