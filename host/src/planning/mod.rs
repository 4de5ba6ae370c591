//! What a module version would do, computed without a cluster and without
//! writing anything: one reconcile as the operator makes it (`offline`),
//! two versions' outcomes compared object by object and field by field
//! (`compare`, `fields`), a plan's counts (`summary`), and the golden-case
//! format a reconcile is written down in (`case`). The authoring
//! commands (`render`, `test`, `plan`) and the operator (a swap's plan, a
//! shadow, the replay of a recorded reconcile) share it.

pub mod case;
pub mod compare;
pub mod fields;
pub mod offline;
pub mod summary;
