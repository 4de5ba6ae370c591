//! Reconciling: one reconcile of one parent performed (the plan of
//! `planning/step.rs`, then its writes), the inputs gathered from the
//! caches (and, for a module that applies, the kinds' schemas and its
//! applied fields), the per-parent retry delays, and the parents waiting
//! on a timer or a finalizer.

pub(super) mod applying;
pub(super) mod backoff;
pub(super) mod inputs;
pub(super) mod reconcile;
pub(super) mod waiting;
