//! Which parents reference which related objects (Secrets), as the module
//! answered at each parent's last reconcile, so a changed Secret wakes
//! exactly the parents that use it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// A related object: kind, namespace, name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Related {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// A parent: namespace and name.
pub type ParentKey = (String, String);

#[derive(Default)]
pub struct ReferenceIndex {
    inner: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    parents_of: HashMap<Related, BTreeSet<ParentKey>>,
    related_of: HashMap<ParentKey, BTreeSet<Related>>,
}

impl ReferenceIndex {
    /// Records what `parent` references now, replacing what it did before.
    pub fn set(&self, parent: ParentKey, related: BTreeSet<Related>) {
        let mut index = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let previous = index.related_of.remove(&parent).unwrap_or_default();
        for gone in previous.difference(&related) {
            if let Some(parents) = index.parents_of.get_mut(gone) {
                parents.remove(&parent);
                if parents.is_empty() {
                    index.parents_of.remove(gone);
                }
            }
        }
        for object in &related {
            index.parents_of.entry(object.clone()).or_default().insert(parent.clone());
        }
        if !related.is_empty() {
            index.related_of.insert(parent, related);
        }
    }

    /// Forgets a parent that is gone.
    pub fn remove(&self, parent: &ParentKey) {
        self.set(parent.clone(), BTreeSet::new());
    }

    pub fn parents_of(&self, related: &Related) -> Vec<ParentKey> {
        let index = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        index.parents_of.get(related).map(|p| p.iter().cloned().collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str) -> Related {
        Related { kind: "Secret".into(), namespace: "ns".into(), name: name.into() }
    }

    fn parent(name: &str) -> ParentKey {
        ("ns".into(), name.into())
    }

    #[test]
    fn a_secret_maps_to_every_parent_that_references_it_now() {
        let index = ReferenceIndex::default();
        index.set(parent("a"), [secret("tls"), secret("sasl")].into());
        index.set(parent("b"), [secret("tls")].into());
        assert_eq!(index.parents_of(&secret("tls")), vec![parent("a"), parent("b")]);
        assert_eq!(index.parents_of(&secret("sasl")), vec![parent("a")]);

        // "a" stops using sasl: the Secret no longer wakes it.
        index.set(parent("a"), [secret("tls")].into());
        assert!(index.parents_of(&secret("sasl")).is_empty());

        index.remove(&parent("b"));
        assert_eq!(index.parents_of(&secret("tls")), vec![parent("a")]);
        assert!(index.parents_of(&secret("other")).is_empty());
    }
}
