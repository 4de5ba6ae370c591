//! `wasm-operator`: a generic Kubernetes operator host. It runs logic
//! modules, WebAssembly components exporting the `wasm-operator:controller`
//! contract (`wit/controller`), for any custom resource, several per
//! process, and does all the I/O around them. It knows no particular
//! custom resource.

pub mod allocator;
pub mod authoring;
pub mod cli;
pub mod give_back;
pub mod modules;
pub mod operator;
pub mod planning;
pub mod resident_pages;
