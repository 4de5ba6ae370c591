//! Prometheus metrics, named for the host (`wasm_operator_*`) and labelled
//! by module: reconciles, writes by kind and outcome, conflicts, module
//! calls and failures, the modules loaded, swapped and compiled ahead, and
//! API requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::operator::endpoints::metric_labels::{
    FailureLabels, FunctionLabels, HeapLabels, KindLabels, ModuleLabels, NameLabels, RefusedLabels, RequestLabels,
    ResultLabels, ShadowLabels, StepLabels, SwapLabels, WatchLabels, WriteLabels,
};
use crate::runtime::compiler::Tier;
use crate::runtime::logic_module::LogicModule;

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_duration: HistogramFamily<ResultLabels>,
    pub writes: Family<WriteLabels, Counter>,
    pub conflicts_retried: Family<KindLabels, Counter>,
    pub apply_conflicts: Family<KindLabels, Counter>,
    pub reconcile_steps: Family<StepLabels, Counter>,
    pub parent_timers: Family<NameLabels, Gauge>,
    pub parents_finalizing: Family<NameLabels, Gauge>,
    pub module_call_duration: HistogramFamily<FunctionLabels>,
    pub module_calls_in_flight: Family<NameLabels, Gauge>,
    pub module_failures: Family<FailureLabels, Counter>,
    pub module_info: Family<ModuleLabels, Gauge>,
    pub module_swaps: Family<SwapLabels, Counter>,
    pub module_swap_duration: HistogramFamily<NameLabels>,
    pub module_compiles: Family<NameLabels, Counter>,
    pub module_ready: Family<ModuleLabels, Gauge>,
    pub api_requests: Family<RequestLabels, Counter>,
    pub watches: Family<WatchLabels, Gauge>,
    pub leader: Gauge,
    pub module_shadow_reconciles: Family<NameLabels, Counter>,
    pub module_shadow_differences: Family<ShadowLabels, Counter>,
    pub recorded_reconciles: Family<NameLabels, Gauge>,
    pub recorded_reconcile_bytes: Family<NameLabels, Gauge>,
    pub module_refused_answers: Family<RefusedLabels, Counter>,
    /// Read from the allocator at each scrape.
    heap_bytes: Family<HeapLabels, Gauge>,
    /// Read from the serving versions at each scrape: a tiered compile's
    /// optimized code replaces the baseline code in place, unannounced.
    module_baseline_code: Family<ModuleLabels, Gauge>,
    serving: Mutex<HashMap<ModuleLabels, Weak<LogicModule>>>,
}

fn reconcile_histogram() -> Histogram {
    // 1 ms .. ~16 s
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn swap_histogram() -> Histogram {
    // 10 ms .. ~160 s
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

fn module_histogram() -> Histogram {
    // 10 µs .. ~80 ms
    Histogram::new(exponential_buckets(0.000_01, 2.0, 14))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("wasm_operator");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles by module and result (success, invalid, deleting, error)",
            reconciles.clone(),
        );
        let reconcile_duration: HistogramFamily<ResultLabels> = Family::new_with_constructor(reconcile_histogram);
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took, by module and result",
            reconcile_duration.clone(),
        );
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "create_or_update",
            "CreateOrUpdate outcomes by module and owned kind (created, updated, unchanged, deleted, failed)",
            writes.clone(),
        );
        let conflicts_retried = Family::<KindLabels, Counter>::default();
        registry.register(
            "conflicts_retried",
            "409 Conflicts answered by re-reading the object and retrying, by module and kind",
            conflicts_retried.clone(),
        );
        let apply_conflicts = Family::<KindLabels, Counter>::default();
        registry.register(
            "apply_conflicts",
            "Server-side applies that took over fields another field manager had set, by module and kind",
            apply_conflicts.clone(),
        );
        let reconcile_steps = Family::<StepLabels, Counter>::default();
        registry.register(
            "reconcile_steps",
            "Reconciles woken once every write of the one before had landed (the next step of a controller written in steps: continued), and chains of them stopped after 10 in a row (stopped), by module",
            reconcile_steps.clone(),
        );
        let parent_timers = Family::<NameLabels, Gauge>::default();
        registry.register(
            "parent_timers",
            "Parents whose last answer asked to be reconciled again after a while (a timer, reach 1.3), by module",
            parent_timers.clone(),
        );
        let parents_finalizing = Family::<NameLabels, Gauge>::default();
        registry.register(
            "parents_finalizing",
            "Parents being deleted whose module holds its finalizer on them, not done finalizing (reach 1.3), by module",
            parents_finalizing.clone(),
        );
        let module_call_duration: HistogramFamily<FunctionLabels> = Family::new_with_constructor(module_histogram);
        registry.register(
            "module_call_duration_seconds",
            "Time one call into a logic module took (instantiation included), by module and function",
            module_call_duration.clone(),
        );
        let module_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "module_failures",
            "Calls that failed in the module itself, by module and reason (ModuleTrapped, ModuleDeadlineExceeded, ModuleOutOfMemory, ModuleInvalidOutput, ...)",
            module_failures.clone(),
        );
        let module_info = Family::<ModuleLabels, Gauge>::default();
        registry.register(
            "module_info",
            "1 for each logic module this process runs: its name, version and digest (sha256 of the file)",
            module_info.clone(),
        );
        let module_swaps = Family::<SwapLabels, Counter>::default();
        registry.register(
            "module_swaps",
            "Module versions offered at run time, by module and result (succeeded, refused, rolled_back)",
            module_swaps.clone(),
        );
        let module_swap_duration: HistogramFamily<NameLabels> = Family::new_with_constructor(swap_histogram);
        registry.register(
            "module_swap_duration_seconds",
            "From a new module version noticed to it serving reconciles (load, checks, dry run, swap), by module",
            module_swap_duration.clone(),
        );
        let module_compiles = Family::<NameLabels, Counter>::default();
        registry.register(
            "module_compiles",
            "Module versions compiled at run time (offered by a watched file or a LogicModule, on a standby too), by module; a version already held compiled is not counted",
            module_compiles.clone(),
        );
        let module_ready = Family::<ModuleLabels, Gauge>::default();
        registry.register(
            "module_ready",
            "1 for each module version this process holds compiled (the serving one among them): swapping to it, taking over with it or rolling back to it costs no compile",
            module_ready.clone(),
        );
        let api_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "api_requests",
            "Requests sent to the API server, by verb (get, list, watch, create, update, patch, delete)",
            api_requests.clone(),
        );
        let watches = Family::<WatchLabels, Gauge>::default();
        registry.register(
            "watches",
            "1 for each kind this process watches and caches, 0 once it stopped (owned or read by a serving module version; the parents apart), by apiVersion/Kind",
            watches.clone(),
        );
        let leader = Gauge::default();
        registry.register("leader", "1 while this replica holds the leader lease", leader.clone());
        let module_shadow_reconciles = Family::<NameLabels, Counter>::default();
        registry.register(
            "module_shadow_reconciles",
            "Reconciles a shadowed version (a LogicModule's spec.shadow) was run beside the serving one for, by module",
            module_shadow_reconciles.clone(),
        );
        let module_shadow_differences = Family::<ShadowLabels, Counter>::default();
        registry.register(
            "module_shadow_differences",
            "Where a shadowed version's answer differed from the serving one's, per reconcile: by module, object kind and change (create, update, delete, unmanaged, status, fails)",
            module_shadow_differences.clone(),
        );
        let module_calls_in_flight = Family::<NameLabels, Gauge>::default();
        registry.register(
            "module_calls_in_flight",
            "Calls into a module running now, off the async workers (at most --module-call-concurrency), by module",
            module_calls_in_flight.clone(),
        );
        let recorded_reconciles = Family::<NameLabels, Gauge>::default();
        registry.register(
            "recorded_reconciles",
            "Reconciles recorded and held for export (GET /records), by module",
            recorded_reconciles.clone(),
        );
        let recorded_reconcile_bytes = Family::<NameLabels, Gauge>::default();
        registry.register(
            "recorded_reconcile_bytes",
            "Bytes the recorded reconciles are counted for (their JSON texts and a fixed overhead each; at most --record-budget), by module",
            recorded_reconcile_bytes.clone(),
        );
        let module_refused_answers = Family::<RefusedLabels, Counter>::default();
        registry.register(
            "module_refused_answers",
            "Module answers the host refused before writing anything (another namespace, a kind not owned, another parent's controller, too many objects, too large, too deep, not UTF-8, duplicates, a status not an object, not JSON, labels or annotations for the parent that its reach does not name, or too many), by module and reason",
            module_refused_answers.clone(),
        );
        let heap_bytes = Family::<HeapLabels, Gauge>::default();
        registry.register(
            "heap_bytes",
            "The allocator's heap at the scrape: in_use (allocated, not freed) and free (freed but still held, resident once touched); free growing beside a steady in_use is fragmentation, not a leak",
            heap_bytes.clone(),
        );
        let module_baseline_code = Family::<ModuleLabels, Gauge>::default();
        registry.register(
            "module_baseline_code",
            "1 while a serving module version runs on baseline code (--compile-strategy=tiered: live before its optimized compile ends), 0 once on optimized code; 1 for long means its optimizing compile failed (the log says why)",
            module_baseline_code.clone(),
        );
        Self {
            registry,
            reconciles,
            reconcile_duration,
            writes,
            conflicts_retried,
            apply_conflicts,
            reconcile_steps,
            parent_timers,
            parents_finalizing,
            module_call_duration,
            module_calls_in_flight,
            module_failures,
            module_info,
            module_swaps,
            module_swap_duration,
            module_compiles,
            module_ready,
            api_requests,
            watches,
            leader,
            module_shadow_reconciles,
            module_shadow_differences,
            recorded_reconciles,
            recorded_reconcile_bytes,
            module_refused_answers,
            heap_bytes,
            module_baseline_code,
            serving: Mutex::default(),
        }
    }
}

impl Metrics {
    pub fn api_request(&self, verb: &'static str) {
        self.api_requests.get_or_create(&RequestLabels { verb }).inc();
    }

    /// A kind's watch started (`true`) or stopped.
    pub fn watching(&self, api_version: &str, kind: &str, watching: bool) {
        // Counted up and down, not set: a stopping watch and a new one of
        // the same kind may overlap for a moment.
        let labels = WatchLabels { kind: format!("{api_version}/{kind}") };
        if watching {
            self.watches.get_or_create(&labels).inc();
        } else {
            self.watches.get_or_create(&labels).dec();
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        if let Some(heap) = crate::memory::allocator::heap_use() {
            let set = |state, bytes: u64| self.heap_bytes.get_or_create(&HeapLabels { state }).set(bytes as i64);
            set("in_use", heap.in_use);
            set("free", heap.free);
        }
        self.read_code_tiers();
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    fn read_code_tiers(&self) {
        let serving = self.serving.lock().unwrap_or_else(PoisonError::into_inner);
        for (labels, module) in serving.iter() {
            if let Some(module) = module.upgrade() {
                let baseline = i64::from(module.tier() == Tier::Baseline);
                self.module_baseline_code.get_or_create(labels).set(baseline);
            }
        }
    }

    /// The metrics of one module.
    pub fn for_module(self: &Arc<Self>, module: &str) -> ModuleMetrics {
        // Resolved once: it changes twice per module call.
        let calls_in_flight =
            self.module_calls_in_flight.get_or_create(&NameLabels { module: module.to_owned() }).clone();
        ModuleMetrics { metrics: self.clone(), module: module.to_owned(), calls_in_flight }
    }
}

/// One module's view of the metrics: every series labelled with its name.
#[derive(Clone)]
pub struct ModuleMetrics {
    metrics: Arc<Metrics>,
    module: String,
    calls_in_flight: Gauge,
}

impl ModuleMetrics {
    fn labels(&self, module: &LogicModule) -> ModuleLabels {
        ModuleLabels {
            module: self.module.clone(),
            version: module.manifest().version.clone(),
            digest: module.digest().to_owned(),
        }
    }

    /// The module version now served.
    pub fn loaded(&self, module: &Arc<LogicModule>) {
        let labels = self.labels(module);
        self.metrics.module_info.get_or_create(&labels).set(1);
        let mut serving = self.metrics.serving.lock().unwrap_or_else(PoisonError::into_inner);
        serving.insert(labels, Arc::downgrade(module));
    }

    /// The module version no longer served.
    pub fn unloaded(&self, module: &LogicModule) {
        let labels = self.labels(module);
        self.metrics.module_info.remove(&labels);
        self.metrics.module_baseline_code.remove(&labels);
        self.metrics.serving.lock().unwrap_or_else(PoisonError::into_inner).remove(&labels);
    }

    /// A version offered at run time, and what became of it; `took` for a
    /// successful swap.
    pub fn swap(&self, result: &'static str, took: Option<Duration>) {
        self.metrics.module_swaps.get_or_create(&SwapLabels { module: self.module.clone(), result }).inc();
        if let Some(took) = took {
            let labels = NameLabels { module: self.module.clone() };
            self.metrics.module_swap_duration.get_or_create(&labels).observe(took.as_secs_f64());
        }
    }

    /// A reconcile a shadowed version ran beside, and the differences it
    /// showed (kind, change).
    pub fn shadowed(&self, differences: &[(String, &'static str)]) {
        self.metrics.module_shadow_reconciles.get_or_create(&NameLabels { module: self.module.clone() }).inc();
        for (kind, change) in differences {
            let labels = ShadowLabels { module: self.module.clone(), kind: kind.clone(), change };
            self.metrics.module_shadow_differences.get_or_create(&labels).inc();
        }
    }

    /// A module version compiled from its bytes (not found compiled).
    pub fn compiled(&self) {
        self.metrics.module_compiles.get_or_create(&NameLabels { module: self.module.clone() }).inc();
    }

    /// A module version held compiled (`true`), or no longer (`false`).
    pub fn ready(&self, version: &str, digest: &str, held: bool) {
        let labels =
            ModuleLabels { module: self.module.clone(), version: version.to_owned(), digest: digest.to_owned() };
        if held {
            self.metrics.module_ready.get_or_create(&labels).set(1);
        } else {
            self.metrics.module_ready.remove(&labels);
        }
    }

    pub fn reconciled(&self, result: &'static str, took: Duration) {
        let labels = ResultLabels { module: self.module.clone(), result };
        self.metrics.reconciles.get_or_create(&labels).inc();
        self.metrics.reconcile_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    pub fn wrote(&self, kind: &str, outcome: &'static str) {
        let labels = WriteLabels { module: self.module.clone(), kind: kind.to_owned(), outcome };
        self.metrics.writes.get_or_create(&labels).inc();
    }

    pub fn conflict_retried(&self, kind: &str) {
        let labels = KindLabels { module: self.module.clone(), kind: kind.to_owned() };
        self.metrics.conflicts_retried.get_or_create(&labels).inc();
    }

    pub fn apply_conflicted(&self, kind: &str) {
        let labels = KindLabels { module: self.module.clone(), kind: kind.to_owned() };
        self.metrics.apply_conflicts.get_or_create(&labels).inc();
    }

    /// A reconcile woken as the next step (`continued`), or a chain of
    /// them stopped (`stopped`).
    pub fn reconcile_step(&self, outcome: &'static str) {
        let labels = StepLabels { module: self.module.clone(), outcome };
        self.metrics.reconcile_steps.get_or_create(&labels).inc();
    }

    /// How many parents have a timer now, when that changed.
    pub fn timers(&self, count: Option<usize>) {
        let Some(count) = count else { return };
        let labels = NameLabels { module: self.module.clone() };
        self.metrics.parent_timers.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// How many parents being deleted wait on the module's finalizing,
    /// when that changed.
    pub fn finalizing(&self, count: Option<usize>) {
        let Some(count) = count else { return };
        let labels = NameLabels { module: self.module.clone() };
        self.metrics.parents_finalizing.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// A call into the module started (`+1`) or ended (`-1`).
    pub fn module_call_running(&self, change: i64) {
        self.calls_in_flight.inc_by(change);
    }

    pub fn module_called(&self, function: &'static str, took: Duration) {
        let labels = FunctionLabels { module: self.module.clone(), function };
        self.metrics.module_call_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// An answer of the module's the host refused, and why.
    pub fn refused_answer(&self, reason: &'static str) {
        let labels = RefusedLabels { module: self.module.clone(), reason };
        self.metrics.module_refused_answers.get_or_create(&labels).inc();
    }

    pub fn module_failed(&self, reason: &'static str) {
        let labels = FailureLabels { module: self.module.clone(), reason };
        self.metrics.module_failures.get_or_create(&labels).inc();
    }
}
