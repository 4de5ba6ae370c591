//! What one call's store carries (its memory limiter, the lines the module
//! logged, WASI state), and the store itself: the host side of the
//! `log` import lives here, beside the state it writes to.

use wasmtime::{Engine, ResourceLimiter, Store};

use super::bindings::wasm_operator::controller::log::{Host, Level};
use super::engine::{
    CORE_INSTANCES_PER_COMPONENT, CallStoreAlive, DEADLINE_TICKS, MEMORIES_PER_COMPONENT, MEMORY_LIMIT_BYTES,
    TABLES_PER_COMPONENT,
};
use super::module_log::ModuleLog;
use super::wasi::WasiState;

/// A fresh store for one call (or one short sequence of calls) on `engine`,
/// the one the code to call was compiled for (a version's code may move
/// from the baseline engine to the optimized one): its own memory limit and
/// deadline.
pub fn call_store(engine: &Engine) -> Store<CallState> {
    let mut store = Store::new(engine, CallState::default());
    store.limiter(|state| &mut state.limits);
    store.set_epoch_deadline(DEADLINE_TICKS);
    store.epoch_deadline_trap();
    store
}

/// What a store carries: its memory limiter, the lines the module logged,
/// and WASI state for a module that imports WASI (built on first use, so
/// others never pay for it).
#[derive(Default)]
pub struct CallState {
    /// Keeps the epoch ticking while the store lives.
    _alive: CallStoreAlive,
    pub(crate) limits: Limits,
    pub(crate) log: ModuleLog,
    pub(crate) wasi: Option<WasiState>,
}

impl wasmtime_wasi::WasiView for CallState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        self.wasi.get_or_insert_with(WasiState::nothing_granted).view()
    }
}

/// The store's memory and table limits; remembers a refused growth, so a
/// module aborting on a failed allocation is reported as out of memory.
#[derive(Default)]
pub(crate) struct Limits {
    pub(crate) refused_growth: bool,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = desired <= MEMORY_LIMIT_BYTES;
        if !allowed {
            self.refused_growth = true;
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }

    fn instances(&self) -> usize {
        CORE_INSTANCES_PER_COMPONENT as usize
    }

    fn memories(&self) -> usize {
        MEMORIES_PER_COMPONENT as usize
    }

    fn tables(&self) -> usize {
        TABLES_PER_COMPONENT as usize
    }
}

impl Host for CallState {
    fn write(&mut self, level: Level, message: String) {
        self.log.write(level.into(), message);
    }
}
