//! The Prometheus ServiceMonitor (`monitoring.coreos.com/v1`), when
//! monitoring is enabled with a serviceMonitor section.
//!
//! k8s-openapi has no type for this CRD, so the builder works on the JSON
//! object itself: it sets the keys it owns and every other key the current
//! object has survives untouched.

use serde_json::{Map, Value, json};

use super::labels::labels_for_memcached;
use super::ports;
use crate::api::Memcached;
use crate::api::defaults::{SCRAPE_INTERVAL, SCRAPE_TIMEOUT};

pub const API_VERSION: &str = "monitoring.coreos.com/v1";
pub const KIND: &str = "ServiceMonitor";

pub fn construct_service_monitor(memcached: &Memcached, monitor: &mut Map<String, Value>) {
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    let namespace = memcached.metadata.namespace.as_deref().unwrap_or_default();
    let settings = memcached.spec.service_monitor().cloned().unwrap_or_default();

    // additionalLabels first, then the standard labels over them: standard wins.
    let mut labels = settings.additional_labels.clone().unwrap_or_default();
    labels.extend(labels_for_memcached(name));

    monitor.insert("apiVersion".into(), API_VERSION.into());
    monitor.insert("kind".into(), KIND.into());
    with_object(monitor, "metadata", |metadata| {
        metadata.insert("name".into(), name.into());
        metadata.insert("namespace".into(), namespace.into());
        metadata.insert("labels".into(), json!(labels));
    });
    with_object(monitor, "spec", |spec| {
        spec.insert("selector".into(), json!({ "matchLabels": labels_for_memcached(name) }));
        spec.insert("namespaceSelector".into(), json!({ "matchNames": [namespace] }));
        spec.insert(
            "endpoints".into(),
            json!([{
                "port": ports::METRICS.name,
                "interval": settings.interval.as_deref().unwrap_or(SCRAPE_INTERVAL),
                "scrapeTimeout": settings.scrape_timeout.as_deref().unwrap_or(SCRAPE_TIMEOUT),
            }]),
        );
    });
}

/// Edits the object under `key`, which replaces whatever non-object stood there.
fn with_object(parent: &mut Map<String, Value>, key: &str, edit: impl FnOnce(&mut Map<String, Value>)) {
    let mut object = match parent.remove(key) {
        Some(Value::Object(object)) => object,
        _ => Map::new(),
    };
    edit(&mut object);
    parent.insert(key.into(), Value::Object(object));
}
