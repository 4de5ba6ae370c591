//! The NetworkPolicy (`constructNetworkPolicy`): ingress to this CR's pods on
//! the ports that are open, from the allowed sources (or from anywhere).

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::labels::labels_for_memcached;
use super::metadata::set_identity;
use super::ports;
use crate::api::Memcached;

pub fn construct_network_policy(memcached: &Memcached, policy: &mut NetworkPolicy) {
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    set_identity(&mut policy.metadata, memcached);
    policy.metadata.labels = Some(labels_for_memcached(name));

    let allowed_sources = memcached
        .spec
        .security
        .as_ref()
        .and_then(|s| s.network_policy.as_ref())
        .and_then(|n| n.allowed_sources.clone())
        .filter(|sources| !sources.is_empty());
    let spec = policy.spec.get_or_insert_with(Default::default);
    spec.pod_selector = Some(LabelSelector { match_labels: Some(labels_for_memcached(name)), match_expressions: None });
    spec.policy_types = Some(vec!["Ingress".into()]);
    // One rule, so the peers apply to every port alike; no `from` allows all.
    spec.ingress = Some(vec![NetworkPolicyIngressRule {
        from: allowed_sources,
        ports: Some(
            ports::exposed_ports(&memcached.spec)
                .into_iter()
                .map(|p| NetworkPolicyPort {
                    protocol: Some("TCP".into()),
                    port: Some(IntOrString::Int(p.port)),
                    end_port: None,
                })
                .collect(),
        ),
    }]);
}
