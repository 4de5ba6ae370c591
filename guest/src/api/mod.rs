//! The API: types, defaults and validation of `Memcached` v1alpha1.

pub mod defaults;
mod memcached;
pub mod validation;

pub use memcached::*;
