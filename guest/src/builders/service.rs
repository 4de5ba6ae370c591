//! The headless Service (`constructService`): always present, `clusterIP:
//! None`, selecting this CR's pods. clusterIPs, ipFamilies and the other
//! fields the server fills in are kept.

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::labels::labels_for_memcached;
use super::metadata::set_identity;
use super::ports;
use crate::api::Memcached;

pub fn construct_service(memcached: &Memcached, service: &mut Service) {
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    set_identity(&mut service.metadata, memcached);
    service.metadata.labels = Some(labels_for_memcached(name));
    // Replaced wholesale, as the seed says: the CR's annotations, or none.
    service.metadata.annotations =
        memcached.spec.service.as_ref().and_then(|s| s.annotations.clone()).filter(|a| !a.is_empty());

    let spec = service.spec.get_or_insert_with(Default::default);
    spec.cluster_ip = Some("None".into());
    spec.selector = Some(labels_for_memcached(name));
    spec.ports = Some(
        ports::exposed_ports(&memcached.spec)
            .into_iter()
            .map(|p| ServicePort {
                name: Some(p.name.into()),
                port: p.port,
                target_port: Some(IntOrString::String(p.name.into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            })
            .collect(),
    );
}
