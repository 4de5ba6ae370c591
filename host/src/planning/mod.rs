//! One reconcile, planned without I/O, and what a module version would do,
//! computed without a cluster and without writing anything:
//! - `step`: the module's calls of one reconcile in the host's order, the
//!   checks on their answers (`answer_check`) and the write each desired
//!   object needs (compared as `object_diff` compares); the operator
//!   performs what it plans;
//! - `kinds`: the kinds a manifest names, as the API client needs them;
//! - `offline`: one reconcile on given objects (`render`, `test`, `plan`,
//!   a swap's dry run, a shadow, a replayed record): the objects passed to
//!   the module as the operator's caches would pass them (`given_objects`),
//!   and what the operator would do (`outcome`);
//! - `compare`, `parent_plan`, `fields`, `summary`: two versions' outcomes
//!   compared object by object and field by field, what that plan says of
//!   a parent, and a plan's counts;
//! - `kind_schema`, `field_set`, `applied`: how the API server merges a
//!   kind (from its OpenAPI schema), the fields an object sets as
//!   server-side apply counts them, and what applying an answer would
//!   change: the write decision for modules that answer what they set
//!   (`quantity`: a resource quantity's amount, which it compares by);
//! - `stored`: a status answer as the API server stores it (pruned and
//!   defaulted by the CRD's schema), which the parent's is compared with;
//! - `case`: the golden-case format a reconcile is written down in.

pub mod answer_check;
pub mod applied;
pub mod case;
pub mod compare;
pub mod field_set;
pub mod fields;
pub mod given_objects;
pub mod kind_schema;
pub mod kinds;
pub mod object_diff;
pub mod offline;
pub mod outcome;
pub mod parent_plan;
pub mod quantity;
pub mod step;
pub mod stored;
pub mod summary;
