//! The module runtime: loading a component, verifying it against the
//! contract (`wit/controller`), and calling it, one fresh instance per call.
//! The bottom layer of the host: it imports nothing of the rest.
//!
//! - `bindings`: the contract's types and functions as wasmtime generates
//!   them.
//! - `contract`: what a component must export and may import, checked
//!   before anything runs, with an error naming the file and what is wrong.
//! - `crd_check`: the CRD a manifest ships describes its parent kind.
//! - `engine`: the one wasmtime `Engine` every module of a process shares
//!   (pooling allocator, epoch deadline, memory limit), and with a tiered
//!   compile a second one for baseline code.
//! - `compiler`: new versions compiled by a child process under a memory
//!   bound and a deadline, into an on-disk cache the operator maps; in
//!   tiers, baseline code first and optimized code in the background.
//! - `logic_module`: a loaded module (digest, manifest, `InstancePre`): its
//!   code checked against the contract and linked (`logic_module/code.rs`),
//!   what the host relies on in its manifest (`logic_module/manifest_check.rs`).
//! - `reconciler`: one instance and its calls; `call_state`: what a call's
//!   store carries (limits, the module's log, WASI); `call_error`: how a
//!   call fails; `call_pool`: where calls run (off the async workers,
//!   bounded per module).
//! - `answer`: a module's answer bounded as it crosses the component
//!   boundary (objects, bytes, UTF-8), and refused answers' reasons.
//! - `module_log`: the lines a module writes through the `log` import.
//! - `slot`: the module a controller runs now, swappable at run time.
//! - `source`: a module file, watched for a new version.
//! - `oci`: modules pulled from (and pushed to) OCI registries.
//! - `signature`: their cosign signatures, checked against a public key.
//! - `wasi`: WASI with nothing granted, for modules that import it.

pub mod answer;
pub mod bindings;
pub mod call_error;
pub mod call_pool;
pub mod call_state;
pub mod compiler;
pub mod contract;
pub mod crd_check;
pub mod engine;
pub mod logic_module;
pub mod module_log;
pub mod oci;
pub mod reconciler;
pub mod signature;
pub mod slot;
pub mod source;
mod wasi;
