//! WASI for modules that import it, with nothing granted: no preopened
//! directories, no sockets or name lookups, empty environment and
//! arguments, stdin empty and output discarded. Only clocks and random
//! work. componentize-py and jco link WASI into every component whether
//! the code uses it or not; a module that imports nothing never gets here.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::engine::CallState;

pub(crate) struct WasiState {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiState {
    fn nothing_granted() -> Self {
        let mut builder = WasiCtx::builder();
        builder.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
        Self { ctx: builder.build(), table: ResourceTable::new() }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let state = self.wasi.get_or_insert_with(WasiState::nothing_granted);
        WasiCtxView { ctx: &mut state.ctx, table: &mut state.table }
    }
}

/// Adds WASI 0.2 (synchronous) to a module's linker.
pub(crate) fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)
}
