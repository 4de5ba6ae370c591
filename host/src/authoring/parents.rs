//! A parent as the API server would store it: in a namespace and with a
//! uid. A parent written by hand has neither; the operator's answer checks
//! need both (every owned object carries a controller owner reference with
//! the parent's uid), so `render` and `test` fill them in.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// What [`complete`] filled in, to say so.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Filled {
    pub namespace: bool,
    pub uid: bool,
}

/// The namespace a parent without one gets, as `kubectl apply` would give it.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The parent with `metadata.namespace` (`default`) and `metadata.uid` (see
/// [`default_uid`]) set when missing or empty.
pub fn complete(parent: &Value) -> (Value, Filled) {
    let mut parent = parent.clone();
    let mut filled = Filled::default();
    let missing = |value: Option<&Value>| value.and_then(Value::as_str).is_none_or(str::is_empty);
    let Some(metadata) = parent.get_mut("metadata").and_then(Value::as_object_mut) else {
        return (parent, filled);
    };
    if missing(metadata.get("namespace")) {
        metadata.insert("namespace".into(), DEFAULT_NAMESPACE.into());
        filled.namespace = true;
    }
    if missing(metadata.get("uid")) {
        let namespace = metadata.get("namespace").and_then(Value::as_str).unwrap_or_default();
        let name = metadata.get("name").and_then(Value::as_str).unwrap_or_default();
        metadata.insert("uid".into(), default_uid(namespace, name).into());
        filled.uid = true;
    }
    (parent, filled)
}

/// A uid for a parent that has none: the SHA-256 of `namespace/name` in the
/// form of a UUID, so the same parent gets the same uid on every run (and
/// objects captured for it keep matching).
pub fn default_uid(namespace: &str, name: &str) -> String {
    let hash = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let hex: String = hash.iter().take(16).map(|byte| format!("{byte:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_parent_gets_the_default_namespace_and_a_stable_uid() {
        let (parent, filled) = complete(&json!({"metadata": {"name": "hello"}}));
        assert_eq!(filled, Filled { namespace: true, uid: true });
        assert_eq!(parent["metadata"]["namespace"], "default");
        let uid = parent["metadata"]["uid"].as_str().expect("a uid");
        assert_eq!(uid, default_uid("default", "hello"));
        assert_eq!(uid.len(), 36);
        assert_ne!(uid, default_uid("default", "other"));
    }

    #[test]
    fn what_the_parent_has_is_kept() {
        let given = json!({"metadata": {"name": "hello", "namespace": "team", "uid": "u-1"}});
        assert_eq!(complete(&given), (given, Filled::default()));
    }
}
