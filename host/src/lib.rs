//! `wasm-operator`: a generic Kubernetes operator host. It runs logic
//! modules, WebAssembly components exporting the `wasm-operator:controller`
//! contract (`wit/controller`), for any custom resource, several per
//! process, and does all the I/O around them. It knows no particular
//! custom resource.

//!
//! Its layers, each importing only from those below it (`tests/layers.rs`
//! in the host's tests keeps it so):
//! 1. `runtime` (loading, checking and calling a module: the contract's
//!    side in the host), `memory`, `duration`;
//! 2. `planning`: one reconcile's module calls and checks, and the writes
//!    they call for, with no I/O (`step`), and what a version would do
//!    offline;
//! 3. `operator`: the I/O (watching, writing, identities, endpoints) and its
//!    wiring (one controller per module, hot swap, recording);
//! 4. `cli`: what every command shares (arguments, loading, the operator
//!    process);
//! 5. `authoring`: the module author's commands;
//! 6. `host_command`: the commands every binary has.

pub mod authoring;
pub mod cli;
pub mod duration;
pub mod host_command;
pub mod memory;
pub mod operator;
pub mod planning;
pub mod runtime;
