//! The contract's types and functions as wasmtime generates them from
//! `wit/controller` (the `logic-module-reach` world), and the names the rest of
//! the host uses for the ones it passes around. Each exported interface is
//! bound on its own (`GuestIndices`), not through the world: `writes` (1.2),
//! `reach` and `admission` (1.3) are optional, and a module built against
//! an earlier version exports none of them.

wasmtime::component::bindgen!({
    path: "../wit/controller",
    world: "logic-module-reach",
});

pub use exports::wasm_operator::controller::reach::ReachManifest;
pub use exports::wasm_operator::controller::reconciler::{KindInfo, ModuleManifest as Manifest, ObjectRef};
pub use exports::wasm_operator::controller::writes::WriteModel;
