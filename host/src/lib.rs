//! The Memcached operator host: loads the logic component into wasmtime and
//! does the I/O around it.

pub mod crd;
pub mod module;
pub mod operator;
pub mod render;
