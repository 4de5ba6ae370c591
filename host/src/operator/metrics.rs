//! Prometheus metrics: reconciles, writes by kind and outcome, conflicts,
//! module calls and API requests.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FunctionLabels {
    pub function: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_duration: HistogramFamily<ResultLabels>,
    pub writes: Family<WriteLabels, Counter>,
    pub conflicts_retried: Family<KindLabels, Counter>,
    pub module_call_duration: HistogramFamily<FunctionLabels>,
    pub api_requests: Family<RequestLabels, Counter>,
    pub leader: Gauge,
}

fn reconcile_histogram() -> Histogram {
    // 1 ms .. ~16 s
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn module_histogram() -> Histogram {
    // 10 µs .. ~80 ms
    Histogram::new(exponential_buckets(0.000_01, 2.0, 14))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("memcached_operator");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register("reconciles", "Reconciles by result (success, invalid, error)", reconciles.clone());
        let reconcile_duration: HistogramFamily<ResultLabels> = Family::new_with_constructor(reconcile_histogram);
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took, by result",
            reconcile_duration.clone(),
        );
        let writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "create_or_update",
            "CreateOrUpdate outcomes by owned kind (created, updated, unchanged, deleted, failed)",
            writes.clone(),
        );
        let conflicts_retried = Family::<KindLabels, Counter>::default();
        registry.register(
            "conflicts_retried",
            "409 Conflicts answered by re-reading the object and retrying, by kind",
            conflicts_retried.clone(),
        );
        let module_call_duration: HistogramFamily<FunctionLabels> = Family::new_with_constructor(module_histogram);
        registry.register(
            "module_call_duration_seconds",
            "Time one call into the logic module took (instantiation included), by function",
            module_call_duration.clone(),
        );
        let api_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "api_requests",
            "Requests sent to the API server, by verb (get, list, watch, create, update, patch, delete)",
            api_requests.clone(),
        );
        let leader = Gauge::default();
        registry.register("leader", "1 while this replica holds the leader lease", leader.clone());
        Self {
            registry,
            reconciles,
            reconcile_duration,
            writes,
            conflicts_retried,
            module_call_duration,
            api_requests,
            leader,
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, result: &'static str, took: Duration) {
        let labels = ResultLabels { result };
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    pub fn wrote(&self, kind: &str, outcome: &'static str) {
        self.writes.get_or_create(&WriteLabels { kind: kind.to_owned(), outcome }).inc();
    }

    pub fn conflict_retried(&self, kind: &str) {
        self.conflicts_retried.get_or_create(&KindLabels { kind: kind.to_owned() }).inc();
    }

    pub fn module_called(&self, function: &'static str, took: Duration) {
        self.module_call_duration.get_or_create(&FunctionLabels { function }).observe(took.as_secs_f64());
    }

    pub fn api_request(&self, verb: &'static str) {
        self.api_requests.get_or_create(&RequestLabels { verb }).inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
