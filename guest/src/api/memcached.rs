//! The `Memcached` custom resource, `memcached.c5c3.io`: served as v1alpha1
//! and v1beta1 with this one schema, stored as v1beta1 (`super::crd_yaml`).
//!
//! Ranges, enums, lengths and defaults here become the CRD's OpenAPI schema;
//! the cross-field rules are CEL `x-kubernetes-validations` on the struct that
//! holds the fields they compare (see `validation.rs` for the same rules in
//! Rust). Every field is optional so that a partial CR parses and `validate`
//! can name what is missing instead of failing to parse.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerBehavior, MetricSpec};
use k8s_openapi::api::core::v1::{PodSecurityContext, ResourceRequirements, SecurityContext, TopologySpreadConstraint};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a Memcached cluster.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "memcached.c5c3.io",
    version = "v1beta1",
    kind = "Memcached",
    plural = "memcacheds",
    shortname = "mc",
    namespaced,
    status = "MemcachedStatus",
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.autoscaling) || !self.autoscaling.enabled || !has(self.replicas)",
        "message": "must be absent when autoscaling is enabled",
        "fieldPath": ".replicas",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": "!has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || quantity(string(self.resources.limits['memory'])).asApproximateFloat() >= double((has(self.memcached) && has(self.memcached.maxMemoryMB) ? self.memcached.maxMemoryMB : 64) + 32) * 1048576.0",
        "message": "must be at least memcached.maxMemoryMB + 32 MiB",
        "fieldPath": ".resources.limits.memory"
    },
    {
        "rule": "!has(self.highAvailability) || !has(self.highAvailability.podDisruptionBudget) || !self.highAvailability.podDisruptionBudget.enabled || !has(self.highAvailability.podDisruptionBudget.minAvailable) || type(self.highAvailability.podDisruptionBudget.minAvailable) != int || int(self.highAvailability.podDisruptionBudget.minAvailable) < ((has(self.autoscaling) && self.autoscaling.enabled) ? (has(self.autoscaling.minReplicas) ? self.autoscaling.minReplicas : 1) : (has(self.replicas) ? self.replicas : 1))",
        "message": "an integer minAvailable must be below replicas",
        "fieldPath": ".highAvailability.podDisruptionBudget.minAvailable"
    },
    {
        "rule": "!has(self.autoscaling) || !self.autoscaling.enabled || !(!has(self.autoscaling.metrics) || size(self.autoscaling.metrics) == 0 || self.autoscaling.metrics.exists(m, m.type == 'Resource' && has(m.resource) && m.resource.name == 'cpu' && m.resource.target.type == 'Utilization')) || (has(self.resources) && has(self.resources.requests) && 'cpu' in self.resources.requests)",
        "message": "a CPU Utilization metric needs resources.requests.cpu",
        "fieldPath": ".resources.requests"
    }
]))]
pub struct MemcachedSpec {
    /// Number of memcached pods. Defaults to 1; must be absent when autoscaling is enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 64))]
    pub replicas: Option<i32>,

    /// Container image of memcached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), extend("default" = "memcached:1.6"))]
    pub image: Option<String>,

    /// Compute resources of the memcached container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "bounded_resources")]
    pub resources: Option<ResourceRequirements>,

    /// memcached's own settings, passed as command-line flags.
    // `default: {}`: the block is always stored with its defaults, as the Go
    // operator's webhook stores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub memcached: Option<MemcachedConfig>,

    /// Anti-affinity, topology spread, PodDisruptionBudget and graceful shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_availability: Option<HighAvailabilitySpec>,

    /// The Prometheus exporter sidecar and its ServiceMonitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring: Option<MonitoringSpec>,

    /// Security contexts, SASL, TLS and the NetworkPolicy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecuritySpec>,

    /// A HorizontalPodAutoscaler for the Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,

    /// The headless Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
}

/// Kubernetes' own pattern for a resource quantity.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// ResourceRequirements with bounds on every map, list and quantity: the
/// API server estimates the cost of CEL rules from them, and refuses the
/// memory-limit rule over unbounded strings.
fn bounded_resources(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema = ResourceRequirements::json_schema(generator);
    if let Some(properties) = schema.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
        for map in ["limits", "requests"] {
            if let Some(serde_json::Value::Object(map)) = properties.get_mut(map) {
                map.insert("maxProperties".into(), 16.into());
                map.insert(
                    "additionalProperties".into(),
                    serde_json::json!({
                        "description": "A quantity, such as 500m or 128Mi.",
                        "x-kubernetes-int-or-string": true,
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                        "maxLength": 64,
                        "pattern": QUANTITY_PATTERN,
                    }),
                );
            }
        }
        if let Some(serde_json::Value::Object(claims)) = properties.get_mut("claims") {
            claims.insert("maxItems".into(), 16.into());
        }
    }
    schema
}

/// memcached flags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedConfig {
    /// Item memory in megabytes (`-m`).
    #[serde(rename = "maxMemoryMB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16, max = 65536), extend("default" = 64))]
    pub max_memory_mb: Option<i32>,

    /// Maximum simultaneous connections (`-c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536), extend("default" = 1024))]
    pub max_connections: Option<i32>,

    /// Worker threads (`-t`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128), extend("default" = 4))]
    pub threads: Option<i32>,

    /// Largest item size (`-I`), such as `1m` or `512k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(k|m)$"), length(max = 16), extend("default" = "1m"))]
    pub max_item_size: Option<String>,

    /// 0 quiet, 1 `-v`, 2 `-vv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2), extend("default" = 0))]
    pub verbosity: Option<i32>,

    /// Further flags appended after the ones the operator sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 1024)))]
    pub extra_args: Option<Vec<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AntiAffinityPreset {
    /// Preferred: spread pods across nodes when possible.
    Soft,
    /// Required: never two pods on one node.
    Hard,
}

/// Seed 001's spelling of the anti-affinity preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AntiAffinityType {
    Preferred,
    Required,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AntiAffinitySpec {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<AntiAffinityType>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.antiAffinityPreset) || !has(self.antiAffinity) || !has(self.antiAffinity.type) || ((self.antiAffinityPreset == 'soft') == (self.antiAffinity.type == 'preferred'))",
        "message": "antiAffinityPreset and antiAffinity.type disagree",
        "fieldPath": ".antiAffinity.type"
    }
]))]
pub struct HighAvailabilitySpec {
    /// `soft` (preferred) or `hard` (required) pod anti-affinity; `soft` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_affinity_preset: Option<AntiAffinityPreset>,

    /// The same choice in seed 001's spelling: `preferred` or `required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<AntiAffinitySpec>,

    /// Passed to the pod; a constraint without labelSelector selects this CR's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<PodDisruptionBudgetSpec>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown: Option<GracefulShutdownSpec>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!self.enabled || !(has(self.minAvailable) && has(self.maxUnavailable))",
        "message": "minAvailable and maxUnavailable are mutually exclusive",
        "fieldPath": ".maxUnavailable"
    }
]))]
pub struct PodDisruptionBudgetSpec {
    #[serde(default)]
    pub enabled: bool,
    /// Defaults to 1 when neither this nor maxUnavailable is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!self.enabled || (has(self.terminationGracePeriodSeconds) ? self.terminationGracePeriodSeconds : 30) > (has(self.preStopDelaySeconds) ? self.preStopDelaySeconds : 10)",
        "message": "terminationGracePeriodSeconds must be greater than preStopDelaySeconds",
        "fieldPath": ".terminationGracePeriodSeconds"
    }
]))]
pub struct GracefulShutdownSpec {
    #[serde(default)]
    pub enabled: bool,
    /// Seconds the preStop hook sleeps so endpoints drain before memcached stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300), extend("default" = 10))]
    pub pre_stop_delay_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600), extend("default" = 30))]
    pub termination_grace_period_seconds: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MonitoringSpec {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), extend("default" = "prom/memcached-exporter:v0.15.4"))]
    pub exporter_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "bounded_resources")]
    pub exporter_resources: Option<ResourceRequirements>,
    /// Present (even empty) to create a Prometheus ServiceMonitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_monitor: Option<ServiceMonitorSpec>,
}

/// A Prometheus duration such as `30s` or `1m30s`.
pub const DURATION_PATTERN: &str =
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// Extra labels on the ServiceMonitor; the standard labels win on a clash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(min = 1, max = 32), extend("default" = "30s"))]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(min = 1, max = 32), extend("default" = "10s"))]
    pub scrape_timeout: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecuritySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_security_context: Option<PodSecurityContext>,
    /// Applied to both the memcached and the exporter container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_security_context: Option<SecurityContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl: Option<SaslSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicySpec>,
}

/// A Secret in the CR's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SecretReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!self.enabled || (has(self.credentialsSecretRef) && has(self.credentialsSecretRef.name) && self.credentialsSecretRef.name != '')",
        "message": "SASL needs credentialsSecretRef.name",
        "fieldPath": ".credentialsSecretRef.name",
        "reason": "FieldValueRequired"
    }
]))]
pub struct SaslSpec {
    #[serde(default)]
    pub enabled: bool,
    /// Secret with key `password-file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretReference>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!self.enabled || (has(self.certificateSecretRef) && has(self.certificateSecretRef.name) && self.certificateSecretRef.name != '')",
        "message": "TLS needs certificateSecretRef.name",
        "fieldPath": ".certificateSecretRef.name",
        "reason": "FieldValueRequired"
    }
]))]
pub struct TlsSpec {
    #[serde(default)]
    pub enabled: bool,
    /// Secret with keys `tls.crt`, `tls.key` and, for client certificates, `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_secret_ref: Option<SecretReference>,
    /// Require client certificates signed by the Secret's `ca.crt`.
    #[serde(default)]
    pub enable_client_cert: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicySpec {
    #[serde(default)]
    pub enabled: bool,
    /// Peers allowed in; empty allows every source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub allowed_sources: Option<Vec<NetworkPolicyPeer>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!self.enabled || has(self.maxReplicas)",
        "message": "maxReplicas is required when autoscaling is enabled",
        "fieldPath": ".maxReplicas",
        "reason": "FieldValueRequired"
    },
    {
        "rule": "!self.enabled || !has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must not exceed maxReplicas",
        "fieldPath": ".minReplicas"
    }
]))]
pub struct AutoscalingSpec {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub min_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_replicas: Option<i32>,
    /// autoscaling/v2 metrics; CPU at 80% average utilization when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub metrics: Option<Vec<MetricSpec>>,
    /// autoscaling/v2 behavior; scale-down stabilization 300 s when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// Annotations of the Service, replaced wholesale on every reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Observed state, written through the status subresource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub ready_replicas: i32,
    /// Available, Progressing, Degraded and Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// `<name>.<namespace>:11211` while Ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_list: Vec<String>,
}
