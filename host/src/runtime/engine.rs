//! The wasmtime `Engine` every module of a process shares: one pooling
//! allocator, one epoch ticker, one compile cache.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy};

use super::compiler::{CompileOptions, OutOfProcess, Tier};

/// Most memory one call may use. The Memcached guest caps its inputs at
/// 3 MiB; this leaves room for parsing and building, and stops a runaway
/// module.
pub const MEMORY_LIMIT_BYTES: usize = 256 << 20;
/// Memory kept mapped per pool slot: what one reconcile typically touches.
const KEEP_RESIDENT_BYTES: usize = 1 << 20;
/// Concurrent instances the pool holds, over every module.
const POOL_INSTANCES: u32 = 64;
/// Core instances and memories one component may have: a Rust module has
/// one; componentize-py's output links CPython and libc as several.
pub(crate) const CORE_INSTANCES_PER_COMPONENT: u32 = 32;
pub(crate) const MEMORIES_PER_COMPONENT: u32 = 4;
pub(crate) const TABLES_PER_COMPONENT: u32 = 32;
/// The epoch ticks every TICK; a call may run for DEADLINE_TICKS of them.
const TICK_MS: u64 = 10;
const TICK: Duration = Duration::from_millis(TICK_MS);
pub(crate) const DEADLINE_TICKS: u64 = 500;
/// How long one call may run.
pub const DEADLINE: Duration = Duration::from_millis(TICK_MS * DEADLINE_TICKS);
/// Ticks with no call store alive before the ticker sleeps until one is made.
const IDLE_TICKS_BEFORE_SLEEP: u32 = 100;

/// One per process: modules loaded on it share compiled-code settings, the
/// instance pool and the deadline ticker. Cheap to clone.
#[derive(Clone)]
pub struct ModuleEngine {
    engine: Engine,
    /// With a tiered compile (`--compile-strategy=tiered`): the engine of
    /// baseline code (Winch), on which a new version serves until its
    /// optimized code replaces it (`logic_module.rs`).
    baseline: Option<Engine>,
    _ticker: Arc<Ticker>,
    /// Set for a long-running operator: new versions compile in a child
    /// process, never in this one (`compiler.rs`).
    compiler: Option<Arc<OutOfProcess>>,
}

struct Ticker(Arc<AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
        CALL_STORES.wake_tickers();
    }
}

/// The stores of module calls alive in this process. The epoch tickers run
/// while one is, and for a second after; then they sleep until one is made,
/// so an idle operator's ticker is not woken 100 times a second. A store is
/// counted from before any code of it runs, so every call meets its
/// deadline.
static CALL_STORES: CallStores = CallStores::new();

struct CallStores {
    alive: AtomicUsize,
    sleeping: AtomicUsize,
    lock: Mutex<()>,
    made: Condvar,
}

impl CallStores {
    const fn new() -> Self {
        Self { alive: AtomicUsize::new(0), sleeping: AtomicUsize::new(0), lock: Mutex::new(()), made: Condvar::new() }
    }

    fn opened(&self) {
        if self.alive.fetch_add(1, Ordering::SeqCst) == 0 && self.sleeping.load(Ordering::SeqCst) > 0 {
            self.wake_tickers();
        }
    }

    fn closed(&self) {
        self.alive.fetch_sub(1, Ordering::SeqCst);
    }

    fn any_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst) > 0
    }

    fn wake_tickers(&self) {
        // Under the lock, so a ticker between its look and its wait is not missed.
        let _held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.made.notify_all();
    }

    /// Returns once a store is alive, or `stop` is set.
    fn sleep_until_one(&self, stop: &AtomicBool) {
        let mut held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.sleeping.fetch_add(1, Ordering::SeqCst);
        while !self.any_alive() && !stop.load(Ordering::SeqCst) {
            held = self.made.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
        self.sleeping.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts its store among [`CALL_STORES`] while it lives.
pub(crate) struct CallStoreAlive(());

impl Default for CallStoreAlive {
    fn default() -> Self {
        CALL_STORES.opened();
        Self(())
    }
}

impl Drop for CallStoreAlive {
    fn drop(&mut self) {
        CALL_STORES.closed();
    }
}

impl ModuleEngine {
    /// Compiles in this process, with wasmtime's disk cache: for commands
    /// that load a module and exit, and tests.
    pub fn new() -> Result<Self, wasmtime::Error> {
        Self::build(config(Purpose::Run { disk_cache: true }), None, false)
    }

    /// Never compiles in this process: a component is compiled by a child
    /// process under `options`' bounds and its code mapped from the cache.
    pub fn compiling_out_of_process(options: CompileOptions) -> Result<Self, wasmtime::Error> {
        Self::build(config(Purpose::Run { disk_cache: false }), Some(Arc::new(OutOfProcess::new(options))), false)
    }

    /// As [`Self::compiling_out_of_process`], in tiers: a version nothing
    /// has compiled loads on baseline code first (`compiler.rs`).
    pub fn compiling_in_tiers(options: CompileOptions) -> Result<Self, wasmtime::Error> {
        Self::build(config(Purpose::Run { disk_cache: false }), Some(Arc::new(OutOfProcess::new(options))), true)
    }

    /// An engine that only compiles (the `compile-module` child): the same
    /// code settings as a running one of `tier`, no instance pool, no
    /// cache; on one thread unless `threads` says more.
    pub fn compile_only(threads: usize, tier: Tier) -> Result<Engine, wasmtime::Error> {
        let mut config = match tier {
            Tier::Optimized => config(Purpose::Compile),
            Tier::Baseline => baseline_config(),
        };
        config.parallel_compilation(threads > 1);
        Engine::new(&config)
    }

    fn build(config: Config, compiler: Option<Arc<OutOfProcess>>, tiered: bool) -> Result<Self, wasmtime::Error> {
        let engine = Engine::new(&config)?;
        let baseline = if tiered { Some(Engine::new(&baseline_config())?) } else { None };
        let stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(std::iter::once(&engine).chain(&baseline), stop.clone());
        Ok(Self { engine, baseline, _ticker: Arc::new(Ticker(stop)), compiler })
    }

    pub(crate) fn compiler(&self) -> Option<&OutOfProcess> {
        self.compiler.as_deref()
    }

    /// The engine of baseline code, when new versions are compiled in tiers.
    pub(crate) fn baseline(&self) -> Option<&Engine> {
        self.baseline.as_ref()
    }

    /// The engine of optimized code: what new versions are loaded for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// What an engine is for. Both build the same code: a child's compile
/// loads in the operator's engine.
enum Purpose {
    Run { disk_cache: bool },
    Compile,
}

fn config(purpose: Purpose) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    let disk_cache = match purpose {
        Purpose::Run { disk_cache } => disk_cache,
        Purpose::Compile => return config,
    };
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(POOL_INSTANCES)
        .total_core_instances(POOL_INSTANCES * 4)
        .total_memories(POOL_INSTANCES * 2)
        .total_tables(POOL_INSTANCES * 4)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .max_tables_per_component(TABLES_PER_COMPONENT)
        .max_memory_size(MEMORY_LIMIT_BYTES)
        // A slot's first pages stay mapped between instances and are reset
        // in place: a fresh instance per call then costs no page faults.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES)
        // Where the kernel can say which pages a call dirtied (Linux 6.7+),
        // only those are reset: a fresh instance plus desired state drops
        // from ~77 to ~45 µs. Elsewhere wasmtime resets the resident part.
        .pagemap_scan(wasmtime::Enabled::Auto);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // Compiled code is cached on disk when a cache directory is writable
    // (it is not under a read-only root filesystem; then we compile).
    if disk_cache && let Ok(cache) = wasmtime::Cache::new(wasmtime::CacheConfig::new()) {
        config.cache(Some(cache));
    }
    config
}

/// Baseline code: wasmtime's Winch compiles the Memcached module ~15x
/// faster than Cranelift (0.22 s against 3.4 s) and runs it ~10 % slower.
/// It serves a new version only until that version's optimized code is
/// ready, so its instances are allocated on demand: no pool of its own
/// held beside the optimized engine's.
fn baseline_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.strategy(Strategy::Winch);
    config
}

/// Advances the engine's epoch so a module stuck in a loop traps at its
/// deadline instead of hanging the operator: every TICK while a call store
/// is alive and for IDLE_TICKS_BEFORE_SLEEP after, then not until the next
/// store is made.
fn spawn_epoch_ticker<'a>(engines: impl Iterator<Item = &'a Engine>, stop: Arc<AtomicBool>) {
    let engines: Vec<_> = engines.map(Engine::weak).collect();
    let spawned = std::thread::Builder::new().name("wasm-epoch".into()).spawn(move || {
        let mut idle_ticks = 0;
        while !stop.load(Ordering::SeqCst) {
            if CALL_STORES.any_alive() {
                idle_ticks = 0;
            } else if idle_ticks >= IDLE_TICKS_BEFORE_SLEEP {
                CALL_STORES.sleep_until_one(&stop);
                idle_ticks = 0;
                continue;
            } else {
                idle_ticks += 1;
            }
            std::thread::sleep(TICK);
            let mut ticked = false;
            for engine in engines.iter().filter_map(|engine| engine.upgrade()) {
                engine.increment_epoch();
                ticked = true;
            }
            if !ticked {
                break;
            }
        }
    });
    // Without the thread, calls merely lose their timeout.
    if let Err(error) = spawned {
        tracing::warn!(error = %error, "no epoch thread: module calls have no deadline");
    }
}
