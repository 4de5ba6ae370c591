//! The objects of one kind as its watch last reported them, with an index
//! by controller UID, updated in place.
//!
//! Why not kube's reflector store: on a re-list (after an API server
//! restart, a 410 or a long partition) it builds a complete second map
//! beside the first and swaps them at the end, so for a moment every object
//! of the kind is held twice; the allocator then keeps the freed copy's
//! pages, and the process stayed ~10-20 MiB larger after each re-list at a
//! thousand parents (issue 22's soak). Here each listed object replaces its
//! older copy at once, and what the list did not return is removed when it
//! ends. An object listed again at the resourceVersion held is not copied
//! again, and wakes nothing: a re-list after an API server restart then
//! costs no reconcile of what did not change. Its keys are also a
//! namespace and a name, not a reference carrying the kind's five strings
//! per object.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kube::ResourceExt;

use crate::operator::watching::cached_object::CachedObject;

/// namespace, name
pub type ObjectKey = (String, String);

/// The UID of an object's controller (its owner reference with
/// `controller: true`), if it has one.
pub fn controller_uid(object: &CachedObject) -> Option<&str> {
    object.owner_references().iter().find(|r| r.controller == Some(true)).map(|r| r.uid.as_str())
}

pub fn key_of(object: &CachedObject) -> ObjectKey {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// `held` is `listed` at the same resourceVersion: listed again, unchanged.
/// Without a resourceVersion nothing can be known unchanged.
pub fn same_version(held: Option<&CachedObject>, listed: &CachedObject) -> bool {
    held.is_some_and(|held| held.resource_version().is_some() && held.resource_version() == listed.resource_version())
}

struct Held {
    object: Arc<CachedObject>,
    /// The list that last returned it, or during which it last changed.
    list: u64,
}

#[derive(Default)]
pub struct Objects {
    by_key: HashMap<ObjectKey, Held>,
    by_controller: HashMap<String, BTreeSet<ObjectKey>>,
    /// Counts the lists begun; see `begin_list`.
    list: u64,
}

impl Objects {
    /// Adds an object, or replaces the copy held.
    pub fn apply(&mut self, object: Arc<CachedObject>) {
        let key = key_of(&object);
        let controller = controller_uid(&object).map(str::to_owned);
        let held = Held { object, list: self.list };
        let before = match self.by_key.entry(key.clone()) {
            Entry::Occupied(mut entry) => {
                let before = controller_uid(&entry.get().object).map(str::to_owned);
                entry.insert(held);
                before
            }
            Entry::Vacant(entry) => {
                entry.insert(held);
                None
            }
        };
        if before != controller {
            if let Some(before) = before {
                self.unindex(&before, &key);
            }
            if let Some(controller) = controller {
                self.by_controller.entry(controller).or_default().insert(key);
            }
        }
    }

    /// An object a list returned: a copy at the resourceVersion already
    /// held is dropped and the held one kept (a re-list after a watch gap
    /// returns every object, most unchanged); otherwise as [`Self::apply`].
    /// Whether it changed.
    pub fn apply_listed(&mut self, object: Arc<CachedObject>) -> bool {
        let key = key_of(&object);
        if let Some(held) = self.by_key.get_mut(&key)
            && same_version(Some(&held.object), &object)
        {
            held.list = self.list;
            return false;
        }
        self.apply(object);
        true
    }

    /// Removes an object; returns the copy held, if any.
    pub fn delete(&mut self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        let held = self.by_key.remove(key)?;
        if let Some(controller) = controller_uid(&held.object) {
            self.unindex(controller, key);
        }
        Some(held.object)
    }

    /// A list begins: every object it returns is `apply`d; `end_list`
    /// then removes the others.
    pub fn begin_list(&mut self) {
        self.list += 1;
    }

    /// Removes every object the list begun last did not return (deleted
    /// while the watch was down), and returns them.
    pub fn end_list(&mut self) -> Vec<Arc<CachedObject>> {
        let list = self.list;
        let gone: Vec<ObjectKey> =
            self.by_key.iter().filter(|(_, held)| held.list != list).map(|(key, _)| key.clone()).collect();
        gone.iter().filter_map(|key| self.delete(key)).collect()
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<CachedObject>> {
        // A borrowed pair cannot look up a (String, String) key; the two
        // small strings are cheaper than a second map shape.
        self.by_key.get(&(namespace.to_owned(), name.to_owned())).map(|held| held.object.clone())
    }

    /// The objects in `namespace` whose controller is `owner_uid`, ordered
    /// by name.
    pub fn controlled_by(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<CachedObject>> {
        let Some(keys) = self.by_controller.get(owner_uid) else { return Vec::new() };
        keys.iter()
            .filter(|(ns, _)| ns == namespace)
            .filter_map(|key| self.by_key.get(key))
            .map(|held| held.object.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    fn unindex(&mut self, controller: &str, key: &ObjectKey) {
        if let Some(keys) = self.by_controller.get_mut(controller) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_controller.remove(controller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(name: &str, controller: Option<&str>) -> Arc<CachedObject> {
        let owners = controller.map_or_else(Vec::new, |uid| {
            vec![json!({"apiVersion": "x/v1", "kind": "X", "name": "p", "uid": uid, "controller": true})]
        });
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}});
        Arc::new(serde_json::from_value(value).expect("a ConfigMap"))
    }

    fn names(objects: &[Arc<CachedObject>]) -> Vec<String> {
        objects.iter().map(|o| o.name_any()).collect()
    }

    #[test]
    fn the_index_follows_each_objects_controller() {
        let mut objects = Objects::default();
        objects.apply(object("a", Some("parent-1")));
        objects.apply(object("b", Some("parent-1")));
        objects.apply(object("c", Some("parent-2")));
        objects.apply(object("orphan", None));
        assert_eq!(names(&objects.controlled_by("ns", "parent-1")), ["a", "b"]);
        assert_eq!(names(&objects.controlled_by("ns", "parent-2")), ["c"]);
        assert!(objects.controlled_by("elsewhere", "parent-1").is_empty());

        // Adopted by another parent, released, deleted.
        objects.apply(object("a", Some("parent-2")));
        assert_eq!(names(&objects.controlled_by("ns", "parent-1")), ["b"]);
        assert_eq!(names(&objects.controlled_by("ns", "parent-2")), ["a", "c"]);
        objects.apply(object("b", None));
        assert!(objects.controlled_by("ns", "parent-1").is_empty());
        assert!(objects.delete(&("ns".into(), "c".into())).is_some());
        assert!(objects.delete(&("ns".into(), "never-seen".into())).is_none());
        assert_eq!(names(&objects.controlled_by("ns", "parent-2")), ["a"]);
        assert!(objects.by_controller.keys().all(|uid| uid == "parent-2"), "no empty entries are kept");
        assert_eq!(objects.len(), 3);
    }

    #[test]
    fn a_relist_replaces_in_place_and_removes_what_it_did_not_return() {
        let mut objects = Objects::default();
        objects.begin_list();
        for name in ["a", "b", "c"] {
            objects.apply(object(name, Some("parent")));
        }
        assert!(objects.end_list().is_empty(), "the first list removes nothing");
        let old_a = objects.get("ns", "a").expect("a is held");

        // The watch was down; b was deleted meanwhile, d created.
        objects.begin_list();
        objects.apply(object("a", Some("parent")));
        assert!(!Arc::ptr_eq(&old_a, &objects.get("ns", "a").expect("a")), "the new copy is served at once");
        assert!(objects.get("ns", "b").is_some(), "until the list ends, an object not yet listed is still served");
        objects.apply(object("c", Some("parent")));
        objects.apply(object("d", Some("parent")));
        let gone = objects.end_list();
        assert_eq!(names(&gone), ["b"]);
        assert!(objects.get("ns", "b").is_none());
        assert_eq!(names(&objects.controlled_by("ns", "parent")), ["a", "c", "d"]);
        drop(old_a);
        assert_eq!(Arc::strong_count(&objects.get("ns", "a").expect("a")), 2, "no second copy is held");
    }

    fn at_version(name: &str, resource_version: &str) -> Arc<CachedObject> {
        let value = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": resource_version}});
        Arc::new(serde_json::from_value(value).expect("a ConfigMap"))
    }

    #[test]
    fn a_relisted_object_at_the_same_version_keeps_the_held_copy_and_counts_as_unchanged() {
        let mut objects = Objects::default();
        objects.begin_list();
        assert!(objects.apply_listed(at_version("a", "10")), "new");
        assert!(objects.apply_listed(at_version("b", "11")), "new");
        assert!(objects.end_list().is_empty());
        let held_a = objects.get("ns", "a").expect("a");

        objects.begin_list();
        assert!(!objects.apply_listed(at_version("a", "10")), "the same resourceVersion is no change");
        assert!(Arc::ptr_eq(&held_a, &objects.get("ns", "a").expect("a")), "the held copy stays");
        assert!(objects.apply_listed(at_version("b", "12")), "a new resourceVersion is a change");
        assert_eq!(objects.get("ns", "b").expect("b").resource_version().as_deref(), Some("12"));
        assert!(objects.end_list().is_empty(), "an unchanged object counts as listed: not removed");
        assert_eq!(objects.len(), 2);

        // Without a resourceVersion nothing can be known unchanged.
        objects.begin_list();
        objects.apply(object("c", None));
        assert!(objects.apply_listed(object("c", None)));
    }
}
