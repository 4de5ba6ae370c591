//! The Memcached operator: the generic `wasm-operator` host with the
//! Memcached logic component built in, and the component's typed
//! `c5c3:memcached` interface for the `render` command and the tests.

pub mod render;
pub mod typed;

use wasm_operator::cli::args::{BuiltIn, Flavor};

/// The component `make build` produced, baked into the binary.
pub static BUILTIN_COMPONENT: &[u8] = include_bytes!(env!("MEMCACHED_WASM_PATH"));

/// The host, named `memcached-operator` (its Lease, as the Go operator's),
/// running the built-in module unless told otherwise.
pub const FLAVOR: Flavor =
    Flavor { binary: "memcached-operator", builtin: Some(BuiltIn { name: "memcached", bytes: BUILTIN_COMPONENT }) };
