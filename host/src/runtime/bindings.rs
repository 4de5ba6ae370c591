//! The contract's types and functions as wasmtime generates them from
//! `wit/controller` (the `logic-module` world), and the names the rest of
//! the host uses for the ones it passes around.

wasmtime::component::bindgen!({
    path: "../wit/controller",
    world: "logic-module",
});

pub use exports::wasm_operator::controller::reconciler::{KindInfo, ModuleManifest as Manifest, ObjectRef};
