//! The ports memcached and its exporter listen on, which the Deployment,
//! Service and NetworkPolicy all follow.

use crate::api::MemcachedSpec;

pub const MEMCACHED: NamedPort = NamedPort { name: "memcached", port: 11211 };
pub const MEMCACHED_TLS: NamedPort = NamedPort { name: "memcached-tls", port: 11212 };
pub const METRICS: NamedPort = NamedPort { name: "metrics", port: 9150 };

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedPort {
    pub name: &'static str,
    pub port: i32,
}

/// memcached's ports: plain always, TLS when TLS is on.
pub fn memcached_ports(spec: &MemcachedSpec) -> Vec<NamedPort> {
    let mut ports = vec![MEMCACHED];
    if spec.tls_enabled() {
        ports.push(MEMCACHED_TLS);
    }
    ports
}

/// Every port the pods expose: memcached's, then metrics when monitoring is on.
pub fn exposed_ports(spec: &MemcachedSpec) -> Vec<NamedPort> {
    let mut ports = memcached_ports(spec);
    if spec.monitoring_enabled() {
        ports.push(METRICS);
    }
    ports
}
