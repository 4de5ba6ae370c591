//! Swapping: the module version serving each reconcile, a new version
//! verified and rolled out without a restart (from a watched file or a
//! LogicModule's OCI reference), planned against the serving one, held by
//! the rollout's gates or served to a canary first, and rolled back on
//! failures; and a candidate shadowing the serving version, writing nothing.

pub mod hot_swap;
pub mod logic_modules;
pub mod precheck;
pub mod probation;
pub mod rollout;
pub mod serving;
pub mod shadow;
pub mod shadow_run;
pub mod swap_plan;
pub mod swap_state;
