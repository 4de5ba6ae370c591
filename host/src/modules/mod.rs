//! Logic modules: loading a component, verifying it against the contract
//! (`wit/controller`), and calling it, one fresh instance per call.
//!
//! - `engine`: the one wasmtime `Engine` every module of a process shares
//!   (pooling allocator, epoch deadline, memory limit), and with a tiered
//!   compile a second one for baseline code.
//! - `compiler`: new versions compiled by a child process under a memory
//!   bound and a deadline, into an on-disk cache the operator maps; in
//!   tiers, baseline code first and optimized code in the background.
//! - `answer`: a module's answer bounded as it crosses the component
//!   boundary (objects, bytes, UTF-8), and refused answers' reasons.
//! - `contract`: what a component must export and may import, checked
//!   before anything runs, with an error naming the file and what is wrong.
//! - `crd_check`: the CRD a manifest ships describes its parent kind.
//! - `logic_module`: a loaded module (digest, manifest, `InstancePre`) and
//!   its calls.
//! - `module_log`: the lines a module writes through the `log` import.
//! - `slot`: the module a controller runs now, swappable at run time.
//! - `source`: a module file, watched for a new version.
//! - `oci`: modules pulled from (and pushed to) OCI registries.
//! - `signature`: their cosign signatures, checked against a public key.

mod answer;
pub mod compiler;
mod contract;
mod crd_check;
mod engine;
mod logic_module;
mod module_log;
pub mod oci;
pub mod signature;
mod slot;
mod source;
mod wasi;

pub use answer::{MAX_ANSWER_BYTES, MAX_DEPTH, MAX_OBJECTS, Refusal, RefusedAnswer, check_bounds, check_status, parse};
pub use contract::{CONTRACT, CONTRACT_MAJOR, CONTRACT_VERSION, ContractError};
pub use engine::{CallState, DEADLINE, MEMORY_LIMIT_BYTES, ModuleEngine, call_store};
pub use logic_module::{
    CallError, CallResult, FieldError, KindInfo, LoadError, LogicError, LogicModule, Manifest, ModuleSource, ObjectRef,
    Reconciler, digest, failure,
};
pub use module_log::{LogLevel, LogLine, ModuleLog};
pub use slot::ModuleSlot;
pub use source::{FileStamp, WatchedFile};
