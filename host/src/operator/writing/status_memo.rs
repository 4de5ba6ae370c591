//! What this process last wrote to each parent's status, so the same
//! status computed on the same cached parent is not written (or read back)
//! again.

use crate::operator::watching::references::ParentKey;

/// The status last written per parent (a hash of the module's answer: a
/// few bytes per parent, not the whole status) and the parent
/// resourceVersion it was computed from.
#[derive(Default)]
pub struct StatusMemo {
    written: std::sync::Mutex<std::collections::HashMap<ParentKey, Written>>,
}

struct Written {
    based_on: Option<String>,
    status: u64,
}

impl StatusMemo {
    pub(super) fn hash(status: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        status.hash(&mut hasher);
        hasher.finish()
    }

    pub(super) fn already_written(&self, parent: &ParentKey, based_on: Option<&str>, status: u64) -> bool {
        let written = self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        written.get(parent).is_some_and(|w| w.based_on.as_deref() == based_on && w.status == status)
    }

    pub(super) fn wrote(&self, parent: ParentKey, based_on: Option<String>, status: u64) {
        let written = Written { based_on, status };
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(parent, written);
    }

    pub fn forget(&self, parent: &ParentKey) {
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_status_on_the_same_cached_parent_is_not_written_twice() {
        let memo = StatusMemo::default();
        let key = ("ns".to_owned(), "cache".to_owned());
        let (a, b) = (StatusMemo::hash("{\"ready\":0}"), StatusMemo::hash("{\"ready\":1}"));
        assert!(!memo.already_written(&key, Some("5"), a));
        memo.wrote(key.clone(), Some("5".into()), a);
        assert!(memo.already_written(&key, Some("5"), a));
        assert!(!memo.already_written(&key, Some("5"), b), "another status");
        assert!(!memo.already_written(&key, Some("6"), a), "another parent version");
        memo.forget(&key);
        assert!(!memo.already_written(&key, Some("5"), a));
    }
}
