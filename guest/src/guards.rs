//! Skip guards: whether an optional object must exist. When one answers
//! false, the object is not built, and an existing one that this CR controls
//! is deleted (SPEC's deliberate change from the seeds).

use crate::api::Memcached;

/// monitoring.enabled and a serviceMonitor section (even an empty one).
pub fn service_monitor_enabled(memcached: &Memcached) -> bool {
    memcached.spec.service_monitor().is_some()
}

/// security.networkPolicy.enabled.
pub fn network_policy_enabled(memcached: &Memcached) -> bool {
    memcached.spec.security.as_ref().and_then(|s| s.network_policy.as_ref()).is_some_and(|n| n.enabled)
}

/// highAvailability.podDisruptionBudget.enabled.
pub fn pdb_enabled(memcached: &Memcached) -> bool {
    memcached.spec.pdb().is_some()
}

/// autoscaling.enabled.
pub fn hpa_enabled(memcached: &Memcached) -> bool {
    memcached.spec.autoscaling_enabled()
}
