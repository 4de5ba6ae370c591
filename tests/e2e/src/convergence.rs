//! Convergence without polling the API server: one watch on the Memcacheds
//! (full objects, for `status.observedGeneration`) and one metadata-only
//! watch per kind a Memcached may own (for controller owner references),
//! opened before the first create. At 10,000 CRs a repeated full list of
//! every owned kind would cost the API server (and the bench) far more than
//! the operator under test; the watches cost one event per change.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;

/// A CR the watch has seen.
struct Parent {
    /// Objects its sample renders to.
    expected_children: usize,
    /// status.observedGeneration == metadata.generation.
    status_converged: bool,
}

/// What the watches have seen so far.
#[derive(Default)]
struct Seen {
    /// By CR UID.
    parents: HashMap<String, Parent>,
    status_converged: usize,
    /// Every object of an owned kind, by UID: (kind index, controller owner UID).
    children: HashMap<String, (usize, Option<String>)>,
    /// Objects per controller owner UID.
    per_owner: HashMap<String, usize>,
    /// Per kind, the UIDs listed since its watch (re)started, until `InitDone`.
    relisting: HashMap<usize, HashSet<String>>,
    watch_errors: usize,
}

impl Seen {
    fn apply_parent(&mut self, object: &DynamicObject, expected_children: usize) {
        let Some(uid) = object.uid() else { return };
        let converged = is_converged(object);
        let parent = self.parents.entry(uid).or_insert(Parent { expected_children, status_converged: false });
        match (parent.status_converged, converged) {
            (false, true) => self.status_converged += 1,
            (true, false) => self.status_converged -= 1,
            _ => {}
        }
        parent.status_converged = converged;
    }

    fn apply_child(&mut self, kind: usize, uid: String, owner: Option<String>) {
        if let Some(listed) = self.relisting.get_mut(&kind) {
            listed.insert(uid.clone());
        }
        if let Some((_, Some(old))) = self.children.get(&uid) {
            self.forget_owner(&old.clone());
        }
        if let Some(owner) = &owner {
            *self.per_owner.entry(owner.clone()).or_default() += 1;
        }
        self.children.insert(uid, (kind, owner));
    }

    fn delete_child(&mut self, uid: &str) {
        if let Some((_, Some(owner))) = self.children.remove(uid) {
            self.forget_owner(&owner);
        }
    }

    fn forget_owner(&mut self, owner: &str) {
        if let Some(count) = self.per_owner.get_mut(owner) {
            *count = count.saturating_sub(1);
        }
    }

    /// A relist of `kind` finished: what it did not list is gone.
    fn relisted(&mut self, kind: usize) {
        let Some(listed) = self.relisting.remove(&kind) else { return };
        let gone: Vec<String> = self
            .children
            .iter()
            .filter(|(uid, (k, _))| *k == kind && !listed.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            self.delete_child(&uid);
        }
    }
}

/// Where the CRs stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// CRs the watch has seen.
    pub listed: usize,
    pub status_converged: usize,
    /// Objects the listed CRs' samples render to that no watch has seen yet.
    pub missing_children: usize,
    /// Every object of an owned kind (whoever owns it).
    pub children: usize,
    pub watch_errors: usize,
}

/// The watches, running until dropped.
pub struct Tracker {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Tracker {
    /// Starts watching `parents` (every namespace) and every kind in
    /// `owned`; `expected_children(name)` is how many objects the CR called
    /// `name` renders to.
    pub fn start(
        client: &Client,
        parents: &ApiResource,
        owned: &[ApiResource],
        expected_children: impl Fn(&str) -> usize + Send + 'static,
    ) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut tasks = Vec::new();

        let api: Api<DynamicObject> = Api::all_with(client.clone(), parents);
        tasks.push(follow(api, seen.clone(), move |seen, event| match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                seen.apply_parent(&object, expected_children(&object.name_any()));
            }
            // The bench deletes no CR; the plane goes away with them.
            _ => {}
        }));
        for (kind, resource) in owned.iter().enumerate() {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), resource);
            tasks.push(follow(api, seen.clone(), move |seen, event| match event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    let owner =
                        object.owner_references().iter().find(|o| o.controller == Some(true)).map(|o| o.uid.clone());
                    if let Some(uid) = object.uid() {
                        seen.apply_child(kind, uid, owner);
                    }
                }
                watcher::Event::Delete(object) => {
                    if let Some(uid) = object.uid() {
                        seen.delete_child(&uid);
                    }
                }
                watcher::Event::Init => {
                    seen.relisting.insert(kind, HashSet::new());
                }
                watcher::Event::InitDone => seen.relisted(kind),
            }));
        }
        Tracker { seen, tasks }
    }

    pub fn snapshot(&self) -> Snapshot {
        let seen = lock(&self.seen);
        let missing_children = seen
            .parents
            .iter()
            .map(|(uid, parent)| parent.expected_children.saturating_sub(seen.per_owner.get(uid).copied().unwrap_or(0)))
            .sum();
        Snapshot {
            listed: seen.parents.len(),
            status_converged: seen.status_converged,
            missing_children,
            children: seen.children.len(),
            watch_errors: seen.watch_errors,
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Feeds every event of a watch on `api` to `handle`, counting errors (the
/// watcher backs off and resumes on its own).
fn follow<K>(
    api: Api<K>,
    seen: Arc<Mutex<Seen>>,
    mut handle: impl FnMut(&mut Seen, watcher::Event<K>) + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            let mut seen = lock(&seen);
            match event {
                Ok(event) => handle(&mut seen, event),
                Err(_) => seen.watch_errors += 1,
            }
        }
    })
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(PoisonError::into_inner)
}

pub fn is_converged(object: &DynamicObject) -> bool {
    let generation = object.metadata.generation;
    let observed = object.data.pointer("/status/observedGeneration").and_then(Value::as_i64);
    generation.is_some() && observed == generation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_count_per_controller_owner_and_a_relist_drops_the_gone() {
        let mut seen = Seen::default();
        seen.apply_child(0, "d1".into(), Some("p1".into()));
        seen.apply_child(1, "s1".into(), Some("p1".into()));
        seen.apply_child(1, "s2".into(), None);
        assert_eq!(seen.per_owner.get("p1"), Some(&2));
        // The same object seen again counts once.
        seen.apply_child(0, "d1".into(), Some("p1".into()));
        assert_eq!(seen.per_owner.get("p1"), Some(&2));
        seen.delete_child("s1");
        assert_eq!(seen.per_owner.get("p1"), Some(&1));
        // A relist of kind 0 that no longer lists d1.
        seen.relisting.insert(0, HashSet::new());
        seen.apply_child(0, "d2".into(), Some("p2".into()));
        seen.relisted(0);
        assert_eq!(seen.per_owner.get("p1"), Some(&0));
        assert_eq!(seen.per_owner.get("p2"), Some(&1));
        assert_eq!(seen.children.len(), 2);
    }

    #[test]
    fn a_parent_converges_when_its_status_observes_its_generation() {
        let object = |generation: i64, observed: Option<i64>| {
            let mut object: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "memcached.c5c3.io/v1alpha1", "kind": "Memcached",
                "metadata": { "name": "cache-00001", "uid": "u1", "generation": generation },
            }))
            .expect("an object");
            if let Some(observed) = observed {
                object.data["status"] = serde_json::json!({ "observedGeneration": observed });
            }
            object
        };
        let mut seen = Seen::default();
        seen.apply_parent(&object(1, None), 3);
        assert_eq!(seen.status_converged, 0);
        seen.apply_parent(&object(1, Some(1)), 3);
        assert_eq!(seen.status_converged, 1);
        seen.apply_parent(&object(2, Some(1)), 3);
        assert_eq!(seen.status_converged, 0);
    }
}
