//! What the host reads of the API server's answer to a write. The answer is
//! the whole object as written, managedFields included; where the host
//! needs no more than the version it wrote (a status, an event), the rest
//! is skipped as it is read, not built into a tree and dropped.

use kube::Resource;
use serde::Deserialize;

use crate::operator::watching::cached_object::CachedObject;

/// An answer that says which resourceVersion the write made.
pub trait WriteAnswer {
    fn resource_version(&self) -> Option<&str>;
}

impl WriteAnswer for CachedObject {
    fn resource_version(&self) -> Option<&str> {
        self.meta().resource_version.as_deref()
    }
}

/// Only `metadata.resourceVersion` of a written object.
#[derive(Debug, Default, Deserialize)]
pub struct VersionWritten {
    #[serde(default)]
    metadata: VersionOnly,
}

#[derive(Debug, Default, Deserialize)]
struct VersionOnly {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
}

impl WriteAnswer for VersionWritten {
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_version_is_read_and_the_rest_may_be_anything() {
        let answer = r#"{"apiVersion":"cache.c5c3.io/v1alpha1","kind":"Memcached",
            "metadata":{"name":"web","managedFields":[{"manager":"x","fieldsV1":{"f:status":{}}}],
                        "resourceVersion":"4711","labels":{"a":"b"}},
            "spec":{"replicas":3},"status":{"conditions":[{"type":"Ready"}]}}"#;
        let written: VersionWritten = serde_json::from_str(answer).unwrap();
        assert_eq!(written.resource_version(), Some("4711"));

        let without: VersionWritten = serde_json::from_str(r#"{"kind":"Event","metadata":{"name":"e"}}"#).unwrap();
        assert_eq!(without.resource_version(), None);
        let bare: VersionWritten = serde_json::from_str("{}").unwrap();
        assert_eq!(bare.resource_version(), None);
    }

    #[test]
    fn a_cached_object_answers_with_its_metadata_version() {
        let object: CachedObject =
            serde_json::from_str(r#"{"metadata":{"name":"web","resourceVersion":"12"},"spec":{}}"#).unwrap();
        assert_eq!(WriteAnswer::resource_version(&object), Some("12"));
    }
}
