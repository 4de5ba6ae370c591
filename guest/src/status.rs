//! The CR's status: replicas, the four conditions and the server list, from
//! the current Deployment and which referenced Secrets exist.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{Memcached, MemcachedStatus};
use crate::builders::ports;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";
pub const READY: &str = "Ready";

/// Why the last reconcile could not finish, when it could not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The spec breaks validation rules; the message lists them.
    InvalidSpec(String),
    /// The host failed to apply the desired state (an API error).
    ReconcileFailed(String),
}

pub struct Observed<'a> {
    pub deployment: Option<&'a Deployment>,
    /// Referenced Secrets that do not exist.
    pub missing_secrets: Vec<&'a str>,
    pub problem: Option<Problem>,
    pub now: Time,
}

pub fn compute_status(memcached: &Memcached, observed: &Observed<'_>) -> MemcachedStatus {
    let deployment_status = observed.deployment.and_then(|d| d.status.as_ref());
    let ready = deployment_status.and_then(|s| s.ready_replicas).unwrap_or(0);
    let updated = deployment_status.and_then(|s| s.updated_replicas).unwrap_or(0);
    let total = deployment_status.and_then(|s| s.replicas).unwrap_or(0);
    let desired = memcached.spec.effective_replicas().unwrap_or(total);
    let replicas_message = format!("{ready}/{desired} replicas are ready");

    let available = if ready > 0 {
        (true, "Available", replicas_message.clone())
    } else {
        (false, "Unavailable", replicas_message.clone())
    };
    let progressing = if observed.deployment.is_none() {
        (true, "Progressing", "the Deployment does not exist yet".to_owned())
    } else if updated < desired || total != desired {
        (true, "Progressing", format!("{updated}/{desired} replicas updated, {total} in total"))
    } else {
        (false, "ProgressingComplete", format!("all {desired} replicas are updated"))
    };
    let degraded = if let Some(Problem::InvalidSpec(message)) = &observed.problem {
        (true, "InvalidSpec", message.clone())
    } else if !observed.missing_secrets.is_empty() {
        (true, "SecretNotFound", format!("Secret not found: {}", observed.missing_secrets.join(", ")))
    } else if let Some(Problem::ReconcileFailed(message)) = &observed.problem {
        (true, "ReconcileFailed", message.clone())
    } else if desired > 0 && ready < desired {
        (true, "Degraded", replicas_message.clone())
    } else {
        (false, "NotDegraded", replicas_message.clone())
    };
    let is_ready = desired > 0 && ready == desired;
    let ready_condition = if is_ready {
        (true, "MemcachedReady", replicas_message)
    } else {
        (false, "MemcachedNotReady", replicas_message)
    };

    let previous = memcached.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let generation = memcached.metadata.generation;
    let conditions =
        [(AVAILABLE, available), (PROGRESSING, progressing), (DEGRADED, degraded), (READY, ready_condition)]
            .into_iter()
            .map(|(type_, (status, reason, message))| {
                wasm_operator_sdk::condition(previous, type_, status, reason, message, generation, &observed.now)
            })
            .collect();

    let server_list = if is_ready {
        let name = memcached.metadata.name.as_deref().unwrap_or_default();
        let namespace = memcached.metadata.namespace.as_deref().unwrap_or("default");
        vec![format!("{name}.{namespace}:{}", ports::MEMCACHED.port)]
    } else {
        Vec::new()
    };

    MemcachedStatus { observed_generation: generation, ready_replicas: ready, conditions, server_list }
}
