//! Defaults: the one place that says what an unset field means. Builders read
//! the effective values through these accessors; `apply` writes them into a
//! CR for the WIT `default` function.

use k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscalerBehavior, MetricSpec, MetricTarget, ResourceMetricSource,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{
    AntiAffinityPreset, AntiAffinityType, AutoscalingSpec, GracefulShutdownSpec, HighAvailabilitySpec, Memcached,
    MemcachedConfig, MemcachedSpec, MonitoringSpec, PodDisruptionBudgetSpec, ServiceMonitorSpec,
};

pub const IMAGE: &str = "memcached:1.6";
pub const EXPORTER_IMAGE: &str = "prom/memcached-exporter:v0.15.4";
pub const REPLICAS: i32 = 1;
pub const MAX_MEMORY_MB: i32 = 64;
pub const MAX_CONNECTIONS: i32 = 1024;
pub const THREADS: i32 = 4;
pub const MAX_ITEM_SIZE: &str = "1m";
pub const VERBOSITY: i32 = 0;
pub const PRE_STOP_DELAY_SECONDS: i32 = 10;
pub const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
pub const SCRAPE_INTERVAL: &str = "30s";
pub const SCRAPE_TIMEOUT: &str = "10s";
pub const MIN_REPLICAS: i32 = 1;
pub const CPU_UTILIZATION_PERCENT: i32 = 80;
pub const SCALE_DOWN_STABILIZATION_SECONDS: i32 = 300;

impl MemcachedSpec {
    pub fn autoscaling_enabled(&self) -> bool {
        self.autoscaling.as_ref().is_some_and(|a| a.enabled)
    }

    /// spec.replicas, or 1; none under autoscaling, where the HPA owns it.
    pub fn effective_replicas(&self) -> Option<i32> {
        if self.autoscaling_enabled() { None } else { Some(self.replicas.unwrap_or(REPLICAS)) }
    }

    pub fn effective_image(&self) -> &str {
        self.image.as_deref().unwrap_or(IMAGE)
    }

    pub fn config(&self) -> MemcachedConfigView<'_> {
        MemcachedConfigView(self.memcached.as_ref())
    }

    pub fn monitoring_enabled(&self) -> bool {
        self.monitoring.as_ref().is_some_and(|m| m.enabled)
    }

    pub fn tls_enabled(&self) -> bool {
        self.security.as_ref().and_then(|s| s.tls.as_ref()).is_some_and(|t| t.enabled)
    }

    pub fn client_cert_enabled(&self) -> bool {
        self.security.as_ref().and_then(|s| s.tls.as_ref()).is_some_and(|t| t.enabled && t.enable_client_cert)
    }

    pub fn sasl_enabled(&self) -> bool {
        self.security.as_ref().and_then(|s| s.sasl.as_ref()).is_some_and(|s| s.enabled)
    }

    /// Name of the SASL credentials Secret, when SASL is on and names one.
    pub fn sasl_secret_name(&self) -> Option<&str> {
        let sasl = self.security.as_ref()?.sasl.as_ref().filter(|s| s.enabled)?;
        non_empty(sasl.credentials_secret_ref.as_ref()?.name.as_deref())
    }

    /// Name of the TLS certificate Secret, when TLS is on and names one.
    pub fn tls_secret_name(&self) -> Option<&str> {
        let tls = self.security.as_ref()?.tls.as_ref().filter(|t| t.enabled)?;
        non_empty(tls.certificate_secret_ref.as_ref()?.name.as_deref())
    }

    /// Names of every Secret the pods mount, sorted and without repeats.
    pub fn referenced_secret_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = [self.sasl_secret_name(), self.tls_secret_name()].into_iter().flatten().collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The anti-affinity preset, from either spelling; soft when
    /// highAvailability is present but says nothing.
    pub fn anti_affinity_preset(&self) -> Option<AntiAffinityPreset> {
        let ha = self.high_availability.as_ref()?;
        Some(ha.anti_affinity_preset.unwrap_or_else(|| match ha.anti_affinity.as_ref().and_then(|a| a.type_) {
            Some(AntiAffinityType::Required) => AntiAffinityPreset::Hard,
            Some(AntiAffinityType::Preferred) | None => AntiAffinityPreset::Soft,
        }))
    }

    /// Graceful shutdown when enabled: (preStop delay, termination grace period).
    pub fn graceful_shutdown(&self) -> Option<(i32, i64)> {
        let gs = self.high_availability.as_ref()?.graceful_shutdown.as_ref()?;
        gs.enabled.then(|| {
            (
                gs.pre_stop_delay_seconds.unwrap_or(PRE_STOP_DELAY_SECONDS),
                gs.termination_grace_period_seconds.unwrap_or(TERMINATION_GRACE_PERIOD_SECONDS),
            )
        })
    }

    pub fn pdb(&self) -> Option<&PodDisruptionBudgetSpec> {
        self.high_availability.as_ref()?.pod_disruption_budget.as_ref().filter(|p| p.enabled)
    }

    pub fn autoscaling(&self) -> Option<&AutoscalingSpec> {
        self.autoscaling.as_ref().filter(|a| a.enabled)
    }

    pub fn service_monitor(&self) -> Option<&ServiceMonitorSpec> {
        self.monitoring.as_ref().filter(|m| m.enabled)?.service_monitor.as_ref()
    }

    pub fn exporter_image(&self) -> &str {
        self.monitoring.as_ref().and_then(|m| m.exporter_image.as_deref()).unwrap_or(EXPORTER_IMAGE)
    }
}

fn non_empty(name: Option<&str>) -> Option<&str> {
    name.filter(|n| !n.is_empty())
}

/// memcached flags with their defaults.
#[derive(Clone, Copy)]
pub struct MemcachedConfigView<'a>(Option<&'a MemcachedConfig>);

impl<'a> MemcachedConfigView<'a> {
    pub fn max_memory_mb(self) -> i32 {
        self.0.and_then(|c| c.max_memory_mb).unwrap_or(MAX_MEMORY_MB)
    }
    pub fn max_connections(self) -> i32 {
        self.0.and_then(|c| c.max_connections).unwrap_or(MAX_CONNECTIONS)
    }
    pub fn threads(self) -> i32 {
        self.0.and_then(|c| c.threads).unwrap_or(THREADS)
    }
    pub fn max_item_size(self) -> &'a str {
        self.0.and_then(|c| c.max_item_size.as_deref()).unwrap_or(MAX_ITEM_SIZE)
    }
    pub fn verbosity(self) -> i32 {
        self.0.and_then(|c| c.verbosity).unwrap_or(VERBOSITY)
    }
    pub fn extra_args(self) -> &'a [String] {
        self.0.and_then(|c| c.extra_args.as_deref()).unwrap_or(&[])
    }
}

impl PodDisruptionBudgetSpec {
    /// (minAvailable, maxUnavailable) as the PDB gets them: minAvailable wins,
    /// and with neither set, minAvailable 1.
    pub fn effective_bounds(&self) -> (Option<IntOrString>, Option<IntOrString>) {
        match (&self.min_available, &self.max_unavailable) {
            (Some(min), _) => (Some(min.clone()), None),
            (None, Some(max)) => (None, Some(max.clone())),
            (None, None) => (Some(IntOrString::Int(1)), None),
        }
    }
}

impl AutoscalingSpec {
    pub fn effective_min_replicas(&self) -> i32 {
        self.min_replicas.unwrap_or(MIN_REPLICAS)
    }

    /// The metrics, or CPU at 80% average utilization.
    pub fn effective_metrics(&self) -> Vec<MetricSpec> {
        match &self.metrics {
            Some(metrics) if !metrics.is_empty() => metrics.clone(),
            _ => vec![default_cpu_metric()],
        }
    }

    /// The behavior, or a 300 s scale-down stabilization window.
    pub fn effective_behavior(&self) -> HorizontalPodAutoscalerBehavior {
        self.behavior.clone().unwrap_or_else(|| HorizontalPodAutoscalerBehavior {
            scale_down: Some(HPAScalingRules {
                stabilization_window_seconds: Some(SCALE_DOWN_STABILIZATION_SECONDS),
                ..Default::default()
            }),
            scale_up: None,
        })
    }
}

fn default_cpu_metric() -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(CPU_UTILIZATION_PERCENT),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

/// Writes every default into the CR, for the WIT `default` function: the
/// spec the Go operator's mutating webhook stored, and the one the API
/// server stores with the CRD's schema defaults and deploy/admission/
/// (tests/crd_validation.rs checks they agree). Sections the user left out
/// stay out (an absent section means "off"), except `memcached`, but every
/// section present gets its defaults. Applying twice changes nothing, and a
/// CR is valid after defaulting exactly when it was before.
pub fn apply(memcached: &mut Memcached) {
    let spec = &mut memcached.spec;
    // Under autoscaling replicas stays absent; a user's value is kept either
    // way, so defaulting never hides a validation error.
    if spec.replicas.is_none() && !spec.autoscaling_enabled() {
        spec.replicas = Some(REPLICAS);
    }
    spec.image.get_or_insert_with(|| IMAGE.into());

    let config = spec.memcached.get_or_insert_with(MemcachedConfig::default);
    config.max_memory_mb.get_or_insert(MAX_MEMORY_MB);
    config.max_connections.get_or_insert(MAX_CONNECTIONS);
    config.threads.get_or_insert(THREADS);
    config.max_item_size.get_or_insert_with(|| MAX_ITEM_SIZE.into());
    config.verbosity.get_or_insert(VERBOSITY);

    let preset = spec.anti_affinity_preset();
    if let Some(ha) = spec.high_availability.as_mut() {
        apply_high_availability(ha, preset);
    }
    if let Some(monitoring) = spec.monitoring.as_mut() {
        apply_monitoring(monitoring);
    }
    // minReplicas stays absent, as the Go operator stores it: the HPA's own
    // default (1) applies, and the builder writes it out.
    if let Some(autoscaling) = spec.autoscaling.as_mut().filter(|a| a.enabled) {
        autoscaling.metrics = Some(autoscaling.effective_metrics());
        autoscaling.behavior = Some(autoscaling.effective_behavior());
    }
}

fn apply_high_availability(ha: &mut HighAvailabilitySpec, preset: Option<AntiAffinityPreset>) {
    if ha.anti_affinity_preset.is_none() {
        ha.anti_affinity_preset = preset;
    }
    // The PDB's minAvailable 1 is not written here: it holds only while
    // maxUnavailable is unset, and written out it would read as the user's
    // own integer minAvailable, which validation compares with replicas.
    if let Some(gs) = ha.graceful_shutdown.as_mut() {
        apply_graceful_shutdown(gs);
    }
}

fn apply_graceful_shutdown(gs: &mut GracefulShutdownSpec) {
    gs.pre_stop_delay_seconds.get_or_insert(PRE_STOP_DELAY_SECONDS);
    gs.termination_grace_period_seconds.get_or_insert(TERMINATION_GRACE_PERIOD_SECONDS);
}

fn apply_monitoring(monitoring: &mut MonitoringSpec) {
    monitoring.exporter_image.get_or_insert_with(|| EXPORTER_IMAGE.into());
    if let Some(sm) = monitoring.service_monitor.as_mut() {
        sm.interval.get_or_insert_with(|| SCRAPE_INTERVAL.into());
        sm.scrape_timeout.get_or_insert_with(|| SCRAPE_TIMEOUT.into());
    }
}
