//! An event as the writers take it: what happened, to what (the object it
//! regards, its type, reason and action, the related object), with its note
//! and when; and the series it folds into.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event waiting for its writer, with when it happened.
pub(super) struct Pending {
    pub(super) what: Occurrence,
    pub(super) note: String,
    /// Its series.
    pub(super) key: u64,
    pub(super) at: jiff::Timestamp,
    pub(super) seen: Instant,
}

impl Pending {
    pub(super) fn now(what: Occurrence, note: String) -> Self {
        Self { key: what.series_key(), what, note, at: jiff::Timestamp::now(), seen: Instant::now() }
    }
}

/// What happened, to what: everything of an event but its note and time.
pub(super) struct Occurrence {
    pub(super) regarding: ObjectReference,
    pub(super) type_: EventType,
    pub(super) reason: String,
    pub(super) action: String,
    pub(super) related: Option<ObjectReference>,
}

impl Occurrence {
    pub(super) fn new(
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        related: Option<ObjectReference>,
    ) -> Self {
        Self { regarding: regarding.clone(), type_, reason: reason.to_owned(), action: action.to_owned(), related }
    }

    /// What makes two events one series: all of the occurrence (the note
    /// may differ, as in client-go).
    pub(super) fn series_key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let identity = |reference: &ObjectReference, hasher: &mut DefaultHasher| {
            (&reference.api_version, &reference.kind, &reference.namespace, &reference.name, &reference.uid)
                .hash(hasher);
        };
        identity(&self.regarding, &mut hasher);
        (self.type_, &self.reason, &self.action).hash(&mut hasher);
        if let Some(related) = &self.related {
            identity(related, &mut hasher);
        }
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_related_object_and_reason_make_separate_series() {
        let reference = |kind: &str, name: &str| ObjectReference {
            kind: Some(kind.into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        let parent = reference("Memcached", "web");
        let key = |reason, related: Option<&ObjectReference>| {
            Occurrence::new(&parent, EventType::Normal, reason, "Create", related.cloned()).series_key()
        };
        let deployment = reference("Deployment", "web");
        let service = reference("Service", "web");
        assert_eq!(key("Created", Some(&deployment)), key("Created", Some(&deployment)));
        assert_ne!(key("Created", Some(&deployment)), key("Created", Some(&service)));
        assert_ne!(key("Created", Some(&deployment)), key("Updated", Some(&deployment)));
        assert_ne!(key("Created", None), key("Created", Some(&deployment)));
    }
}
