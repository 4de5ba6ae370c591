//! What the caches keep of an object's managedFields: the fields each
//! manager applied (server-side apply to the object itself), as the
//! fieldsV1 text the API server sent. A module that writes by apply is
//! decided by its manager's fields (`planning/applied.rs`); every other
//! entry's fields are skipped unread.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One manager's applied fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedFields {
    pub manager: Box<str>,
    /// fieldsV1, as JSON text.
    pub fields: Box<str>,
}

/// The applied entries of managedFields. Every other entry's fields are
/// skipped unread: the API server writes `operation` before `fieldsV1`, so
/// an update's fields cost no copy.
pub(super) struct ManagedFields(Vec<AppliedFields>);

impl ManagedFields {
    pub(super) fn into_applied(self) -> Vec<AppliedFields> {
        self.0
    }
}

impl<'de> Deserialize<'de> for ManagedFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = ManagedFields;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("managedFields")
            }

            fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<ManagedFields, S::Error> {
                let mut applied = Vec::new();
                while let Some(entry) = seq.next_element::<ManagedEntry>()? {
                    if let ManagedEntry {
                        manager: Some(manager),
                        apply: true,
                        on_subresource: false,
                        fields: Some(fields),
                    } = entry
                    {
                        applied.push(AppliedFields { manager: manager.into(), fields: fields.get().into() });
                    }
                }
                Ok(ManagedFields(applied))
            }

            // Not a list: nothing applied, as for an object without any.
            fn visit_unit<E: serde::de::Error>(self) -> Result<ManagedFields, E> {
                Ok(ManagedFields(Vec::new()))
            }
        }
        deserializer.deserialize_any(Entries)
    }
}

/// One managedFields entry, as far as the host reads it.
#[derive(Default)]
struct ManagedEntry {
    manager: Option<String>,
    /// `operation: Apply`.
    apply: bool,
    /// Made on a subresource (`status`): not the object's own fields.
    on_subresource: bool,
    fields: Option<Box<RawValue>>,
}

impl<'de> Deserialize<'de> for ManagedEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entry;
        impl<'de> Visitor<'de> for Entry {
            type Value = ManagedEntry;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a managedFields entry")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ManagedEntry, A::Error> {
                let mut entry = ManagedEntry::default();
                let mut operation_seen = false;
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "manager" => entry.manager = map.next_value::<Option<String>>()?,
                        "operation" => {
                            operation_seen = true;
                            entry.apply = map.next_value::<Option<String>>()?.as_deref() == Some("Apply");
                        }
                        "subresource" => {
                            entry.on_subresource = map.next_value::<Option<String>>()?.is_some_and(|s| !s.is_empty())
                        }
                        // Kept only when it may be an apply's.
                        "fieldsV1" if entry.apply || !operation_seen => {
                            entry.fields = Some(map.next_value::<Box<RawValue>>()?)
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(entry)
            }
        }
        deserializer.deserialize_map(Entry)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::operator::watching::cached_object::CachedObject;
    use crate::operator::watching::cached_object::tests::deployments;

    /// Each manager's applied fields are kept, as the server sent them; an
    /// update's, or an apply to the status subresource, are not.
    #[test]
    fn the_fields_each_manager_applied_are_kept() {
        let server = json!({
            "metadata": {"name": "web", "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}},
                {"manager": "queue", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}},
                {"manager": "queue", "operation": "Apply", "subresource": "status",
                 "fieldsV1": {"f:status": {}}},
                // fieldsV1 before operation: still read right.
                {"fieldsV1": {"f:data": {}}, "manager": "other", "operation": "Apply"},
                {"fieldsV1": {"f:data": {}}, "manager": "edit", "operation": "Update"},
            ]},
            "spec": {"replicas": 2},
        });
        let cached: CachedObject = serde_json::from_str(&server.to_string()).expect("an object");
        assert_eq!(cached.applied_fields("queue"), Some(r#"{"f:metadata":{"f:labels":{"f:app":{}}}}"#));
        assert_eq!(cached.applied_fields("other"), Some(r#"{"f:data":{}}"#));
        assert_eq!(cached.applied_fields("kube-controller-manager"), None);
        assert_eq!(cached.applied_fields("edit"), None);
        assert!(!cached.module_json(&deployments()).contains("managedFields"));

        let none: CachedObject =
            serde_json::from_str(r#"{"metadata":{"name":"a","managedFields":null}}"#).expect("an object");
        assert_eq!(none.applied_fields("queue"), None);
        let updated: CachedObject = serde_json::from_str(
            r#"{"metadata":{"name":"a","managedFields":[{"manager":"m","operation":"Update","fieldsV1":{}}]}}"#,
        )
        .expect("an object");
        let bare: CachedObject = serde_json::from_str(r#"{"metadata":{"name":"a"}}"#).expect("an object");
        assert_eq!(updated.applied_fields("m"), None);
        assert_eq!(updated.held_bytes(), bare.held_bytes(), "nothing is kept for an object no one applied");
    }
}
