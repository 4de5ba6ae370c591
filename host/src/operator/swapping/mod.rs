//! Swapping: the module version serving each reconcile, a new version
//! verified and rolled out without a restart (from a watched file or a
//! LogicModule's OCI reference), and rolled back on failures.

pub mod hot_swap;
pub mod logic_modules;
pub mod serving;
