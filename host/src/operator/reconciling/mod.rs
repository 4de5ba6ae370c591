//! Reconciling: one reconcile of one parent, the inputs a module is given,
//! the checks on what it answers, and the per-parent retry delays.

pub(super) mod backoff;
pub mod desired;
pub(super) mod inputs;
pub(super) mod reconcile;
