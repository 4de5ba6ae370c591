//! WASI for modules that import it, with nothing granted: no preopened
//! directories, no sockets or name lookups, empty environment and
//! arguments, stdin empty and output discarded. Only clocks and random
//! work. componentize-py and jco link WASI into every component whether
//! the code uses it or not; a module that imports nothing never gets here.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// A store's WASI state.
pub(crate) struct WasiState {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiState {
    pub(crate) fn nothing_granted() -> Self {
        let mut builder = WasiCtx::builder();
        builder.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
        Self { ctx: builder.build(), table: ResourceTable::new() }
    }

    pub(crate) fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.ctx, table: &mut self.table }
    }
}

/// Adds WASI 0.2 (synchronous) to a module's linker.
pub(crate) fn link<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)
}
