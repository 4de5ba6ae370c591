//! The HorizontalPodAutoscaler (autoscaling/v2), when autoscaling.enabled.
//!
//! The API server completes any `behavior` it is given (both directions,
//! with select policies and policies), so the builder writes the completed
//! form itself: what it sends is what comes back, and an unchanged CR never
//! causes a write.

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior, MetricSpec,
};

use super::labels::labels_for_memcached;
use super::metadata::set_identity;
use crate::api::{AutoscalingSpec, Memcached};

pub fn construct_hpa(memcached: &Memcached, hpa: &mut HorizontalPodAutoscaler) {
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    set_identity(&mut hpa.metadata, memcached);
    hpa.metadata.labels = Some(labels_for_memcached(name));

    let autoscaling = memcached.spec.autoscaling().cloned().unwrap_or_default();
    let spec = &mut hpa.spec;
    spec.scale_target_ref = CrossVersionObjectReference {
        api_version: Some("apps/v1".into()),
        kind: "Deployment".into(),
        name: name.into(),
    };
    spec.min_replicas = Some(autoscaling.effective_min_replicas());
    spec.max_replicas = autoscaling.max_replicas.unwrap_or_else(|| autoscaling.effective_min_replicas());
    spec.metrics = Some(metrics_in_current_spelling(&autoscaling, spec.metrics.take()));
    spec.behavior = Some(completed_behavior(autoscaling.effective_behavior()));
}

/// The CR's metrics; where the current HPA spells an equal target quantity
/// differently (the server canonicalizes), its spelling is kept.
fn metrics_in_current_spelling(autoscaling: &AutoscalingSpec, current: Option<Vec<MetricSpec>>) -> Vec<MetricSpec> {
    let desired = autoscaling.effective_metrics();
    let Some(current) = current.filter(|c| c.len() == desired.len()) else { return desired };
    desired.into_iter().zip(current).map(|(want, have)| if same_metric(&want, &have) { have } else { want }).collect()
}

/// Equal up to the spelling of target quantities.
fn same_metric(want: &MetricSpec, have: &MetricSpec) -> bool {
    let (Ok(mut want_json), Ok(mut have_json)) = (serde_json::to_value(want), serde_json::to_value(have)) else {
        return false;
    };
    // Compare with every quantity in canonical numeric form.
    normalize_quantities(&mut want_json);
    normalize_quantities(&mut have_json);
    want_json == have_json
}

fn normalize_quantities(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if matches!(key.as_str(), "value" | "averageValue") {
                    // One spelling for equal amounts: `1k` and `1000` both
                    // become their exact count of nano-units.
                    if let Value::String(text) = field
                        && let Ok(nanos) = crate::quantity::parse_nanos(text)
                    {
                        *text = nanos.to_string();
                    }
                } else {
                    normalize_quantities(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_quantities),
        _ => {}
    }
}

/// The behavior as the API server stores it: every direction present, each
/// with its select policy and policies (Kubernetes' defaults: scale up by 4
/// pods or 100% per 15 s, scale down by 100% per 15 s, both picking Max).
fn completed_behavior(behavior: HorizontalPodAutoscalerBehavior) -> HorizontalPodAutoscalerBehavior {
    HorizontalPodAutoscalerBehavior {
        scale_up: Some(completed_rules(
            behavior.scale_up,
            Some(0),
            vec![policy("Pods", 4, 15), policy("Percent", 100, 15)],
        )),
        scale_down: Some(completed_rules(behavior.scale_down, None, vec![policy("Percent", 100, 15)])),
    }
}

fn completed_rules(
    rules: Option<HPAScalingRules>,
    default_stabilization: Option<i32>,
    default_policies: Vec<HPAScalingPolicy>,
) -> HPAScalingRules {
    let mut rules = rules.unwrap_or_default();
    if rules.stabilization_window_seconds.is_none() {
        rules.stabilization_window_seconds = default_stabilization;
    }
    rules.select_policy.get_or_insert_with(|| "Max".into());
    rules.policies.get_or_insert(default_policies);
    rules
}

fn policy(type_: &str, value: i32, period_seconds: i32) -> HPAScalingPolicy {
    HPAScalingPolicy { type_: type_.into(), value, period_seconds }
}
