//! The command line both binaries share: `wasm-operator` (modules given
//! with `--module`) and binaries that carry a built-in module (such as
//! `memcached-operator`), which add their own commands. What every command
//! needs is here (arguments, loading modules, the operator process, output);
//! the commands themselves are `host_command.rs` and `authoring/`.

pub mod args;
pub mod loading;
pub mod operator_process;
pub mod output;
