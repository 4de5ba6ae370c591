//! The logic module in wasmtime: one `Engine`, one pre-linked `InstancePre`,
//! and a fresh `Store` and instance for every call, from the pooling
//! allocator. The guest imports nothing, so the linker is empty: the module
//! can reach no file, socket, clock or random source.
//!
//! Every module exports the generic `controller` contract (what the operator
//! drives); the Memcached module also exports the typed `memcached`
//! interface (what `render` and the tests use).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use memcached_logic::{Error as LogicError, FieldError};
use wasmtime::component::{Component, Linker};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder,
};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "memcached-logic",
    });
}

mod controller_bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "controller-logic",
    });
}

use bindings::exports::c5c3::memcached::errors as wit;
use controller_bindings::exports::c5c3::memcached::controller;
use controller_bindings::exports::c5c3::memcached::errors as controller_wit;
pub use controller_bindings::exports::c5c3::memcached::controller::{KindInfo, ModuleManifest, ObjectRef};

/// The component `make build` produced, baked into the binary.
pub static BUILTIN_COMPONENT: &[u8] = include_bytes!(env!("MEMCACHED_WASM_PATH"));

/// Most memory one call may use. Inputs are capped at 3 MiB by the guest;
/// this leaves room for parsing and building, and stops a runaway guest.
const MEMORY_LIMIT_BYTES: usize = 256 << 20;
/// Memory kept mapped per pool slot: what one reconcile typically touches.
const KEEP_RESIDENT_BYTES: usize = 1 << 20;
/// Concurrent instances the pool holds.
const POOL_INSTANCES: u32 = 64;
/// The epoch ticks every TICK; a call may run for DEADLINE_TICKS of them.
const TICK: Duration = Duration::from_millis(10);
const DEADLINE_TICKS: u64 = 500;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading the logic module {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("setting up wasmtime: {0:#}")]
    Engine(wasmtime::Error),
    #[error("compiling the logic module: {0:#}")]
    Compile(wasmtime::Error),
    #[error("{path} is a precompiled module (native code); load it only if you built it yourself, with --allow-precompiled")]
    PrecompiledNotAllowed { path: String },
    #[error("{path} is a precompiled module this binary cannot run (another wasmtime version, engine settings or CPU); precompile it again with this binary: {source:#}")]
    Incompatible { path: String, source: wasmtime::Error },
    #[error("the logic module does not export the controller contract, or imports something (a logic module must import nothing): {0:#}")]
    Link(wasmtime::Error),
}

/// A failed call: the module's own answer, or the module itself failing.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Logic(#[from] LogicError),
    #[error("the logic module failed (trap, limit or timeout): {0:#}")]
    Module(wasmtime::Error),
}

pub type CallResult<T> = Result<T, CallError>;

struct CallState {
    limits: StoreLimits,
}

/// A loaded logic module, ready to instantiate. Cheap to share behind an `Arc`.
pub struct LogicModule {
    engine: Engine,
    controller_pre: controller_bindings::ControllerLogicPre<CallState>,
    /// Only for modules that also export the typed `memcached` interface.
    memcached_pre: Option<bindings::MemcachedLogicPre<CallState>>,
    ticker_stop: Arc<AtomicBool>,
}

impl Drop for LogicModule {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

impl LogicModule {
    /// The module built into this binary.
    pub fn builtin() -> Result<Self, LoadError> {
        Self::from_bytes(BUILTIN_COMPONENT)
    }

    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        Self::from_file_allowing_precompiled(path, false)
    }

    /// A component, or with `allow_precompiled` also what [`Self::precompile`]
    /// wrote: native code, loaded without compiling (no start-up CPU and
    /// memory spike), so only from a trusted source.
    pub fn from_file_allowing_precompiled(path: &Path, allow_precompiled: bool) -> Result<Self, LoadError> {
        let bytes = std::fs::read(path)
            .map_err(|source| LoadError::Read { path: path.display().to_string(), source })?;
        if Engine::detect_precompiled(&bytes) != Some(wasmtime::Precompiled::Component) {
            return Self::from_bytes(&bytes);
        }
        let path = path.display().to_string();
        if !allow_precompiled {
            return Err(LoadError::PrecompiledNotAllowed { path });
        }
        let engine = Engine::new(&engine_config()).map_err(LoadError::Engine)?;
        // SAFETY: wasmtime checks the artifact's version, settings and CPU
        // features; the operator's administrator vouches for its origin
        // (--allow-precompiled), as for the binary itself.
        let component = unsafe { Component::deserialize(&engine, &bytes) }
            .map_err(|source| LoadError::Incompatible { path, source })?;
        Self::from_component(engine, &component)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LoadError> {
        let engine = Engine::new(&engine_config()).map_err(LoadError::Engine)?;
        let component = Component::new(&engine, bytes).map_err(LoadError::Compile)?;
        Self::from_component(engine, &component)
    }

    /// Compiles a component ahead of time for this binary's engine settings
    /// and this CPU. Compiling the Memcached component takes seconds and
    /// close to 1 GiB of memory; an image that ships the result starts
    /// without either.
    pub fn precompile(bytes: &[u8]) -> Result<Vec<u8>, LoadError> {
        let engine = Engine::new(&engine_config()).map_err(LoadError::Engine)?;
        engine.precompile_component(bytes).map_err(LoadError::Compile)
    }

    fn from_component(engine: Engine, component: &Component) -> Result<Self, LoadError> {
        let linker: Linker<CallState> = Linker::new(&engine);
        let instance_pre = linker.instantiate_pre(component).map_err(LoadError::Link)?;
        let controller_pre =
            controller_bindings::ControllerLogicPre::new(instance_pre.clone()).map_err(LoadError::Link)?;
        let memcached_pre = bindings::MemcachedLogicPre::new(instance_pre).ok();
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(&engine, ticker_stop.clone());
        Ok(Self { engine, controller_pre, memcached_pre, ticker_stop })
    }

    fn new_store(&self) -> Store<CallState> {
        let limits = StoreLimitsBuilder::new().memory_size(MEMORY_LIMIT_BYTES).instances(4).build();
        let mut store = Store::new(&self.engine, CallState { limits });
        store.limiter(|state| &mut state.limits);
        store.set_epoch_deadline(DEADLINE_TICKS);
        store.epoch_deadline_trap();
        store
    }

    /// A fresh instance of the typed `memcached` interface in its own store.
    /// Use one per call (or per reconcile): a trap poisons only this instance.
    pub fn instance(&self) -> CallResult<Instance> {
        let pre = self.memcached_pre.as_ref().ok_or_else(|| {
            CallError::Module(wasmtime::Error::msg("this logic module does not export the memcached interface"))
        })?;
        let mut store = self.new_store();
        let bindings = pre.instantiate(&mut store).map_err(CallError::Module)?;
        Ok(Instance { store, bindings })
    }

    /// A fresh instance of the generic controller contract, in its own store.
    pub fn controller(&self) -> CallResult<ControllerInstance> {
        let mut store = self.new_store();
        let bindings = self.controller_pre.instantiate(&mut store).map_err(CallError::Module)?;
        Ok(ControllerInstance { store, bindings })
    }
}

fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES)
        .total_memories(POOL_INSTANCES)
        .total_tables(POOL_INSTANCES)
        .max_memory_size(MEMORY_LIMIT_BYTES)
        // A slot's first pages stay mapped between instances and are reset
        // in place: a fresh instance per call then costs no page faults.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES)
        // Where the kernel can say which pages a call dirtied (Linux 6.7+),
        // only those are reset: a fresh instance plus desired-all drops from
        // ~77 to ~52 µs. Elsewhere wasmtime resets the whole resident part.
        .pagemap_scan(wasmtime::Enabled::Auto);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // Compiled code is cached on disk when a cache directory is writable
    // (it is not under a read-only root filesystem; then we compile).
    if let Ok(cache) = wasmtime::Cache::new(wasmtime::CacheConfig::new()) {
        config.cache(Some(cache));
    }
    config
}

/// Advances the engine's epoch so a guest stuck in a loop traps at its
/// deadline instead of hanging the operator.
fn spawn_epoch_ticker(engine: &Engine, stop: Arc<AtomicBool>) {
    let engine = engine.weak();
    let spawned = std::thread::Builder::new().name("wasm-epoch".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK);
            match engine.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => break,
            }
        }
    });
    // Without the thread, calls merely lose their timeout.
    drop(spawned);
}

/// One instance of the module. Every method is one call into the guest.
pub struct Instance {
    store: Store<CallState>,
    bindings: bindings::MemcachedLogic,
}

fn field_errors(list: Vec<wit::FieldError>) -> Vec<FieldError> {
    list.into_iter().map(|e| FieldError { path: e.path, message: e.message }).collect()
}

fn controller_field_errors(list: Vec<controller_wit::FieldError>) -> Vec<FieldError> {
    list.into_iter().map(|e| FieldError { path: e.path, message: e.message }).collect()
}

// Each bindgen world has its own copy of the `errors` types.
impl From<wit::Error> for LogicError {
    fn from(error: wit::Error) -> Self {
        match error {
            wit::Error::Malformed(list) => LogicError::Malformed(field_errors(list)),
            wit::Error::Invalid(list) => LogicError::Invalid(field_errors(list)),
            wit::Error::Unsupported(message) => LogicError::Unsupported(message),
        }
    }
}

impl From<controller_wit::Error> for LogicError {
    fn from(error: controller_wit::Error) -> Self {
        match error {
            controller_wit::Error::Malformed(list) => LogicError::Malformed(controller_field_errors(list)),
            controller_wit::Error::Invalid(list) => LogicError::Invalid(controller_field_errors(list)),
            controller_wit::Error::Unsupported(message) => LogicError::Unsupported(message),
        }
    }
}

/// Flattens wasmtime's outer error (trap) and the guest's answer.
fn answer<T, E: Into<LogicError>>(result: wasmtime::Result<Result<T, E>>) -> CallResult<T> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(CallError::Logic(error.into())),
        Err(trap) => Err(CallError::Module(trap)),
    }
}

/// The store, with a fresh deadline: the timeout is per call, even on an
/// instance that is reused for many.
fn armed(store: &mut Store<CallState>) -> &mut Store<CallState> {
    store.set_epoch_deadline(DEADLINE_TICKS);
    store
}

impl Instance {
    fn armed_store(&mut self) -> &mut Store<CallState> {
        armed(&mut self.store)
    }

    fn memcached(&self) -> &bindings::exports::c5c3::memcached::memcached::Guest {
        self.bindings.c5c3_memcached_memcached()
    }

    pub fn render(&mut self, memcached: &str) -> CallResult<Vec<String>> {
        let guest = self.memcached().clone();
        let result = guest.call_render(self.armed_store(), memcached);
        answer(result)
    }

    pub fn to_yaml(&mut self, objects: &str) -> CallResult<String> {
        let guest = self.memcached().clone();
        let result = guest.call_to_yaml(self.armed_store(), objects);
        answer(result)
    }

    pub fn validate(&mut self, memcached: &str) -> CallResult<Vec<FieldError>> {
        let guest = self.memcached().clone();
        let result = guest.call_validate(self.armed_store(), memcached);
        answer(result).map(field_errors)
    }

    pub fn default(&mut self, memcached: &str) -> CallResult<String> {
        let guest = self.memcached().clone();
        let result = guest.call_default(self.armed_store(), memcached);
        answer(result)
    }

    pub fn labels_for_memcached(&mut self, name: &str) -> CallResult<Vec<(String, String)>> {
        let guest = self.memcached().clone();
        guest.call_labels_for_memcached(self.armed_store(), name).map_err(CallError::Module)
    }

    /// A skip guard by its WIT name (`pdb-enabled`, ...).
    pub fn guard(&mut self, guard: Guard, memcached: &str) -> CallResult<bool> {
        let guest = self.memcached().clone();
        let store = self.armed_store();
        answer(match guard {
            Guard::ServiceMonitor => guest.call_service_monitor_enabled(store, memcached),
            Guard::NetworkPolicy => guest.call_network_policy_enabled(store, memcached),
            Guard::Pdb => guest.call_pdb_enabled(store, memcached),
            Guard::Hpa => guest.call_hpa_enabled(store, memcached),
        })
    }

    /// A typed builder, by the kind it builds.
    pub fn construct(
        &mut self,
        kind: &str,
        memcached: &str,
        current: Option<&str>,
        secrets: &[String],
    ) -> CallResult<String> {
        let guest = self.memcached().clone();
        let store = self.armed_store();
        answer(match kind {
            "Deployment" => guest.call_construct_deployment(store, memcached, current, secrets),
            "Service" => guest.call_construct_service(store, memcached, current),
            "PodDisruptionBudget" => guest.call_construct_pdb(store, memcached, current),
            "HorizontalPodAutoscaler" => guest.call_construct_hpa(store, memcached, current),
            "ServiceMonitor" => guest.call_construct_service_monitor(store, memcached, current),
            "NetworkPolicy" => guest.call_construct_network_policy(store, memcached, current),
            other => return Err(LogicError::Unsupported(format!("no typed builder for {other}")).into()),
        })
    }

    pub fn compute_status(
        &mut self,
        memcached: &str,
        deployment: Option<&str>,
        secrets: &[String],
        now: &str,
    ) -> CallResult<String> {
        let guest = self.memcached().clone();
        answer(guest.call_compute_status(self.armed_store(), memcached, deployment, secrets, now))
    }
}

/// One instance of the generic controller contract. Every method is one
/// call into the guest.
pub struct ControllerInstance {
    store: Store<CallState>,
    bindings: controller_bindings::ControllerLogic,
}

impl ControllerInstance {
    fn armed_store(&mut self) -> &mut Store<CallState> {
        armed(&mut self.store)
    }

    fn controller(&self) -> &controller::Guest {
        self.bindings.c5c3_memcached_controller()
    }

    pub fn manifest(&mut self) -> CallResult<ModuleManifest> {
        let guest = self.controller().clone();
        guest.call_manifest(self.armed_store()).map_err(CallError::Module)
    }

    pub fn references(&mut self, parent: &str) -> CallResult<Vec<ObjectRef>> {
        let guest = self.controller().clone();
        answer(guest.call_references(self.armed_store(), parent))
    }

    pub fn desired(
        &mut self,
        kind: &str,
        parent: &str,
        current: Option<&str>,
        related: &[String],
    ) -> CallResult<Option<String>> {
        let guest = self.controller().clone();
        answer(guest.call_desired(self.armed_store(), kind, parent, current, related))
    }

    pub fn desired_all(
        &mut self,
        parent: &str,
        current: &[Option<String>],
        related: &[String],
    ) -> CallResult<Vec<Option<String>>> {
        let guest = self.controller().clone();
        answer(guest.call_desired_all(self.armed_store(), parent, current, related))
    }

    pub fn status(
        &mut self,
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
        problem: Option<&str>,
    ) -> CallResult<String> {
        let guest = self.controller().clone();
        answer(guest.call_status(self.armed_store(), parent, owned, related, now, problem))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    ServiceMonitor,
    NetworkPolicy,
    Pdb,
    Hpa,
}

/// The one place the running operator gets its logic module from. Every
/// reconcile takes the module current at its start, so a module swapped in
/// at run time serves the next reconcile while calls in flight finish on
/// the old one.
#[derive(Clone)]
pub struct ModuleHandle(Arc<arc_swap::ArcSwap<LogicModule>>);

impl ModuleHandle {
    pub fn new(module: LogicModule) -> Self {
        Self(Arc::new(arc_swap::ArcSwap::from_pointee(module)))
    }

    pub fn current(&self) -> Arc<LogicModule> {
        self.0.load_full()
    }

    /// Replaces the module for every later call.
    pub fn swap(&self, module: LogicModule) {
        self.0.store(Arc::new(module));
    }
}
