//! What every builder does to metadata, and the rule for fields the API
//! server defaults.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::Memcached;

/// Every owned object has the CR's name and namespace.
pub fn set_identity(meta: &mut ObjectMeta, memcached: &Memcached) {
    meta.name.clone_from(&memcached.metadata.name);
    meta.namespace.clone_from(&memcached.metadata.namespace);
}

/// For a field the operator sets only when a feature is on: when it is off,
/// keep the value the API server defaults the field to (so that building from
/// the server's answer changes nothing), and clear anything else.
pub fn keep_if_server_default<T>(current: Option<T>, is_default: impl FnOnce(&T) -> bool) -> Option<T> {
    current.filter(is_default)
}
