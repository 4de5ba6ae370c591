//! The owned kinds, in reconcile order, and the one dispatch from a kind to
//! its guard and builder. Both WIT interfaces go through here.

use k8s_openapi::Metadata;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::api::Memcached;
use crate::builders;
use crate::error::Error;
use crate::guards;
use crate::kinds::KindInfo;
use crate::owner::{set_controller_reference, upsert_controller_reference};
use crate::parse::{from_json, to_json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildKind {
    Deployment,
    Service,
    PodDisruptionBudget,
    HorizontalPodAutoscaler,
    ServiceMonitor,
    NetworkPolicy,
}

impl ChildKind {
    /// Reconcile order: the Deployment first, the Service (with the metrics
    /// port) before the ServiceMonitor that scrapes it.
    pub const ALL: [ChildKind; 6] = [
        ChildKind::Deployment,
        ChildKind::Service,
        ChildKind::PodDisruptionBudget,
        ChildKind::HorizontalPodAutoscaler,
        ChildKind::ServiceMonitor,
        ChildKind::NetworkPolicy,
    ];

    pub fn info(self) -> KindInfo {
        let (group, version, kind, plural) = match self {
            ChildKind::Deployment => ("apps", "v1", "Deployment", "deployments"),
            ChildKind::Service => ("", "v1", "Service", "services"),
            ChildKind::PodDisruptionBudget => ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
            ChildKind::HorizontalPodAutoscaler => {
                ("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
            }
            ChildKind::ServiceMonitor => ("monitoring.coreos.com", "v1", "ServiceMonitor", "servicemonitors"),
            ChildKind::NetworkPolicy => ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies"),
        };
        KindInfo { group, version, kind, plural, namespaced: true }
    }

    pub fn from_kind(kind: &str) -> Result<ChildKind, Error> {
        ChildKind::ALL
            .into_iter()
            .find(|k| k.info().kind == kind)
            .ok_or_else(|| Error::Unsupported(format!("{kind} is not a kind this module owns")))
    }

    /// The skip guard: whether this kind must exist for the CR.
    pub fn wanted(self, memcached: &Memcached) -> bool {
        match self {
            ChildKind::Deployment | ChildKind::Service => true,
            ChildKind::PodDisruptionBudget => guards::pdb_enabled(memcached),
            ChildKind::HorizontalPodAutoscaler => guards::hpa_enabled(memcached),
            ChildKind::ServiceMonitor => guards::service_monitor_enabled(memcached),
            ChildKind::NetworkPolicy => guards::network_policy_enabled(memcached),
        }
    }

    /// Runs the builder on `current` (JSON as the server returned it) or on
    /// a new object, sets `owner` as its controller when given, and answers
    /// the object as JSON. Typed objects serialize straight to text, in
    /// k8s-openapi's field order: no intermediate JSON tree on the hot path.
    pub fn build(
        self,
        memcached: &Memcached,
        current: Option<&str>,
        secrets: &[Secret],
        owner: Option<&Memcached>,
    ) -> Result<String, Error> {
        let kind = self.info().kind;
        match self {
            ChildKind::Deployment => {
                typed(kind, current, owner, |d: &mut Deployment| builders::construct_deployment(memcached, d, secrets))
            }
            ChildKind::Service => {
                typed(kind, current, owner, |s: &mut Service| builders::construct_service(memcached, s))
            }
            ChildKind::PodDisruptionBudget => {
                typed(kind, current, owner, |p: &mut PodDisruptionBudget| builders::construct_pdb(memcached, p))
            }
            ChildKind::HorizontalPodAutoscaler => {
                typed(kind, current, owner, |h: &mut HorizontalPodAutoscaler| builders::construct_hpa(memcached, h))
            }
            ChildKind::NetworkPolicy => {
                typed(kind, current, owner, |n: &mut NetworkPolicy| builders::construct_network_policy(memcached, n))
            }
            ChildKind::ServiceMonitor => {
                let mut monitor: Map<String, Value> = match current {
                    Some(text) => from_json(kind, text)?,
                    None => Map::new(),
                };
                builders::construct_service_monitor(memcached, &mut monitor);
                if let Some(owner) = owner {
                    set_controller_reference(&mut monitor, owner)?;
                }
                to_json(&monitor)
            }
        }
    }
}

/// Parses the current object as `T` (or starts from its default), builds,
/// sets the owner, and serializes.
fn typed<T>(
    kind: &str,
    current: Option<&str>,
    owner: Option<&Memcached>,
    build: impl FnOnce(&mut T),
) -> Result<String, Error>
where
    T: DeserializeOwned + Serialize + Default + Metadata<Ty = ObjectMeta>,
{
    let mut object: T = match current {
        Some(text) => from_json(kind, text)?,
        None => T::default(),
    };
    build(&mut object);
    if let Some(owner) = owner {
        let references = object.metadata_mut().owner_references.get_or_insert_with(Vec::new);
        upsert_controller_reference(references, owner)?;
    }
    to_json(&object)
}
