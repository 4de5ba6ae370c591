//! Writing a module without a cluster: `render` (what the operator would
//! write for the parents in a file) and `test` (golden cases: the inputs of
//! one reconcile and the expected answer). Both run the module as the
//! operator calls it and apply the operator's checks to its answers.
//!
//! - one reconcile without a cluster, and comparing two versions' outcomes,
//!   are `planning/`'s, which the operator shares.
//! - `parents`: the namespace and uid a parent written by hand lacks.
//! - `documents`: objects in and out of YAML and JSON files.
//! - `render`: the `render` command's work.
//! - `cases`: the case format, where a case's module comes from, running
//!   and comparing a case, `--update`.
//! - `diff`: expected against actual, as a unified diff of YAML.
//! - `command`: the commands' arguments and what they print.
//! - `plan`: `plan`, what a new version would do differently from the
//!   current one, per parent (reads a cluster, or files).
//! - `record`: `record`, a running operator's recorded reconciles as cases.
//! - `dev`: `dev`, a module on a cluster with hot reload (needs one).
//! - `scaffold`: `new`, a module project from the embedded templates and SDK.
//! - `componentize`: a Rust module's core wasm into a component.
//! - `function_order`: a core module's functions laid out in a given order
//!   (`componentize --function-order`), and the copy a profile run uses.
//! - `project_command`: the arguments of `new` and `componentize`.

pub mod cases;
pub mod command;
pub mod componentize;
pub mod dev;
pub mod diff;
pub mod documents;
pub mod function_order;
pub mod parents;
pub mod plan;
pub mod project_command;
pub mod rbac;
pub mod record;
pub mod render;
pub mod scaffold;

pub use command::AuthoringCommand;
pub use project_command::ProjectCommand;
