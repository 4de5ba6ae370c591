//! The Memcached operator's reconcile logic: API types, defaults,
//! validation, one builder per owned object, skip guards and status. Pure
//! functions only; compiled natively into the host and, unchanged, into a
//! WebAssembly component with zero imports.

pub mod api;
pub mod builders;
pub mod children;
pub mod error;
pub mod exports;
pub mod guards;
pub mod kinds;
pub mod owner;
pub mod parse;
pub mod quantity;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod small_blocks;
pub mod status;
pub mod yaml;

#[cfg(target_arch = "wasm32")]
mod component;
#[cfg(target_arch = "wasm32")]
mod heap;

pub use api::{Memcached, MemcachedSpec, MemcachedStatus};
pub use error::{Error, FieldError};
