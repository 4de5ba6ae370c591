//! The contract's types and functions as wasmtime generates them from
//! `wit/controller` (the `logic-module-writes` world), and the names the rest of
//! the host uses for the ones it passes around. Each exported interface is
//! bound on its own (`GuestIndices`), not through the world: `writes` (1.2)
//! is optional, and a 1.0 or 1.1 module exports none.

wasmtime::component::bindgen!({
    path: "../wit/controller",
    world: "logic-module-writes",
});

pub use exports::wasm_operator::controller::reconciler::{KindInfo, ModuleManifest as Manifest, ObjectRef};
pub use exports::wasm_operator::controller::writes::WriteModel;
