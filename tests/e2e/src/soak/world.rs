//! What the soak sees of the cluster, through watches of full objects
//! opened before the first create (the Memcacheds and every kind they may
//! own), and the changes it made that are still converging: each change
//! names the state that shows it converged, checked at every watch event.
//! Also counted here: modifications whose content did not change (only
//! resourceVersion or managedFields moved), by kind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;

pub const SECRET_HASH: &str = "memcached.c5c3.io/secret-hash";

/// namespace, name
pub type Key = (String, String);

/// When a change has converged.
#[derive(Debug, Clone)]
pub enum Goal {
    /// The CR (this uid) has status.observedGeneration >= generation.
    ObservedGeneration { generation: i64 },
    /// The CR created again (this uid) observed its generation and controls
    /// `children` objects.
    Recreated { children: usize },
    /// A child of this kind and name is back, another object (uid) than the
    /// one deleted, controlled by the CR.
    ChildBack { kind: usize, name: String, old_uid: String },
    /// A label of the child edited by hand has its value back, in a version
    /// newer than the edit.
    LabelRestored { kind: usize, name: String, label: String, value: String, edited_rv: u64 },
    /// The CR's Deployment's pod template carries another secret hash.
    SecretHashChanged { old: String },
}

/// A change waiting to converge.
struct Pending {
    label: &'static str,
    parent: Key,
    /// The CR's uid the change is about: the change is superseded when the
    /// CR is deleted or replaced meanwhile.
    uid: String,
    goal: Goal,
    started: Instant,
}

/// A change that converged.
#[derive(Debug, Clone)]
pub struct Converged {
    pub label: &'static str,
    /// The CR it was about.
    pub parent: Key,
    pub started: Instant,
    pub ended: Instant,
}

#[derive(Default)]
pub struct World {
    pub crs: HashMap<Key, Value>,
    /// (kind index, namespace, name) -> object
    pub children: HashMap<(usize, String, String), Value>,
    /// Children per controller owner uid.
    per_owner: HashMap<String, usize>,
    /// Per watch (kind index; usize::MAX for the CRs), the keys listed
    /// since its (re)list started.
    relisting: HashMap<usize, HashSet<(String, String)>>,
    pending: Vec<Pending>,
    pub converged: Vec<Converged>,
    /// Changes whose CR was deleted or replaced before they converged.
    pub superseded: usize,
    /// Modifications that changed nothing but resourceVersion and
    /// managedFields, by kind.
    pub unchanged_modifications: BTreeMap<String, usize>,
    pub watch_errors: usize,
    /// When the CRs' watch last saw anything (their status follows the
    /// operator's work; the children's status moves on its own: Pods, HPAs).
    pub last_event: Option<Instant>,
}

impl World {
    pub fn expect(&mut self, label: &'static str, parent: Key, uid: String, goal: Goal, started: Instant) {
        self.pending.push(Pending { label, parent, uid, goal, started });
        self.evaluate();
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The labels of the changes still pending, with their CR.
    pub fn pending_list(&self) -> Vec<String> {
        self.pending.iter().map(|p| format!("{} {}/{} ({:?})", p.label, p.parent.0, p.parent.1, p.goal)).collect()
    }

    pub fn uid(&self, key: &Key) -> Option<String> {
        self.crs.get(key).and_then(|o| o.pointer("/metadata/uid")).and_then(Value::as_str).map(String::from)
    }

    /// The hash of the Secrets in the pod template of the Deployment of
    /// this CR (named after it, controlled by `uid`).
    pub fn secret_hash_of(&self, key: &Key, uid: &str) -> Option<String> {
        let deployment = self.children.get(&(0, key.0.clone(), key.1.clone()))?;
        (controller_uid(deployment).as_deref() == Some(uid)).then(|| secret_hash(deployment)).flatten()
    }

    /// Children of this CR (uid) by kind index and name.
    pub fn children_of(&self, uid: &str) -> Vec<(usize, String, Value)> {
        self.children
            .iter()
            .filter(|(_, object)| controller_uid(object).as_deref() == Some(uid))
            .map(|((kind, _, name), object)| (*kind, name.clone(), object.clone()))
            .collect()
    }

    /// Every CR whose status observes its generation.
    pub fn all_observed(&self) -> bool {
        self.crs.values().all(|cr| {
            let generation = cr.pointer("/metadata/generation").and_then(Value::as_i64);
            generation.is_some() && cr.pointer("/status/observedGeneration").and_then(Value::as_i64) == generation
        })
    }

    fn evaluate(&mut self) {
        let now = Instant::now();
        let pending = std::mem::take(&mut self.pending);
        for change in pending {
            match self.check(&change) {
                Some(true) => self.converged.push(Converged {
                    label: change.label,
                    parent: change.parent.clone(),
                    started: change.started,
                    ended: now,
                }),
                Some(false) => self.superseded += 1,
                None => self.pending.push(change),
            }
        }
    }

    /// Some(true): converged; Some(false): superseded; None: not yet.
    fn check(&self, change: &Pending) -> Option<bool> {
        let (namespace, _) = &change.parent;
        let Some(cr) = self.crs.get(&change.parent) else {
            // A re-created CR may not be seen yet.
            return if matches!(change.goal, Goal::Recreated { .. }) { None } else { Some(false) };
        };
        let uid = cr.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        if uid != change.uid {
            return if matches!(change.goal, Goal::Recreated { .. }) { None } else { Some(false) };
        }
        let generation = cr.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        let observed = cr.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
        let child = |kind: usize, name: &str| self.children.get(&(kind, namespace.clone(), name.to_owned()));
        let met = match &change.goal {
            Goal::ObservedGeneration { generation } => observed >= *generation,
            Goal::Recreated { children } => {
                observed == generation && self.per_owner.get(uid).copied().unwrap_or(0) >= *children
            }
            Goal::ChildBack { kind, name, old_uid } => child(*kind, name).is_some_and(|object| {
                object.pointer("/metadata/uid").and_then(Value::as_str).is_some_and(|u| u != old_uid)
                    && controller_uid(object).as_deref() == Some(uid)
            }),
            Goal::LabelRestored { kind, name, label, value, edited_rv } => child(*kind, name).is_some_and(|object| {
                resource_version(object) > *edited_rv
                    && object.pointer("/metadata/labels").and_then(|l| l.get(label)).and_then(Value::as_str)
                        == Some(value.as_str())
            }),
            // The Deployment is named after the CR.
            Goal::SecretHashChanged { old } => child(0, &change.parent.1).is_some_and(|object| {
                controller_uid(object).as_deref() == Some(uid) && secret_hash(object).is_some_and(|hash| hash != *old)
            }),
        };
        met.then_some(true)
    }

    fn apply_cr(&mut self, object: Value) {
        let key = key_of(&object);
        if let Some(listed) = self.relisting.get_mut(&usize::MAX) {
            listed.insert(key.clone());
        }
        if let Some(old) = self.crs.remove(&key) {
            self.count_unchanged("Memcached", &old, &object);
        }
        self.crs.insert(key, object);
    }

    fn apply_child(&mut self, kind: usize, kind_name: &str, object: Value) {
        let (namespace, name) = key_of(&object);
        if let Some(listed) = self.relisting.get_mut(&kind) {
            listed.insert((namespace.clone(), name.clone()));
        }
        let key = (kind, namespace, name);
        if let Some(old) = self.children.remove(&key) {
            self.count_unchanged(kind_name, &old, &object);
            self.forget_owner(&old);
        }
        if let Some(owner) = controller_uid(&object) {
            *self.per_owner.entry(owner).or_default() += 1;
        }
        self.children.insert(key, object);
    }

    fn delete_child(&mut self, kind: usize, namespace: String, name: String) {
        if let Some(old) = self.children.remove(&(kind, namespace, name)) {
            self.forget_owner(&old);
        }
    }

    fn forget_owner(&mut self, object: &Value) {
        if let Some(owner) = controller_uid(object)
            && let Some(count) = self.per_owner.get_mut(&owner)
        {
            *count = count.saturating_sub(1);
        }
    }

    /// A modification of the same object to a new resourceVersion whose
    /// content is the same.
    fn count_unchanged(&mut self, kind: &str, old: &Value, new: &Value) {
        let same_object = old.pointer("/metadata/uid") == new.pointer("/metadata/uid");
        if same_object && resource_version(old) != resource_version(new) && content(old) == content(new) {
            *self.unchanged_modifications.entry(kind.to_owned()).or_default() += 1;
        }
    }

    /// A relist of watch `kind` ended: what it did not list is gone.
    fn relisted(&mut self, kind: usize) {
        let Some(listed) = self.relisting.remove(&kind) else { return };
        if kind == usize::MAX {
            self.crs.retain(|key, _| listed.contains(key));
            return;
        }
        let gone: Vec<(usize, String, String)> = self
            .children
            .keys()
            .filter(|(k, namespace, name)| *k == kind && !listed.contains(&(namespace.clone(), name.clone())))
            .cloned()
            .collect();
        for (kind, namespace, name) in gone {
            self.delete_child(kind, namespace, name);
        }
    }
}

/// The object without resourceVersion and managedFields.
fn content(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
        metadata.remove("managedFields");
    }
    object
}

pub fn resource_version(object: &Value) -> u64 {
    object.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn controller_uid(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| o.get("uid"))
        .and_then(Value::as_str)
        .map(String::from)
}

pub fn secret_hash(deployment: &Value) -> Option<String> {
    deployment
        .pointer("/spec/template/metadata/annotations")
        .and_then(|a| a.get(SECRET_HASH))
        .and_then(Value::as_str)
        .map(String::from)
}

pub fn key_of(object: &Value) -> Key {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    (text("/metadata/namespace"), text("/metadata/name"))
}

pub type Shared = Arc<Mutex<World>>;

pub fn lock(world: &Shared) -> std::sync::MutexGuard<'_, World> {
    world.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The watches, feeding `world` until aborted.
pub fn watch(
    client: &Client,
    world: &Shared,
    parents: &ApiResource,
    owned: &[ApiResource],
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![follow(Api::all_with(client.clone(), parents), world.clone(), usize::MAX, String::new())];
    for (kind, resource) in owned.iter().enumerate() {
        tasks.push(follow(Api::all_with(client.clone(), resource), world.clone(), kind, resource.kind.clone()));
    }
    tasks
}

fn follow(api: Api<DynamicObject>, world: Shared, kind: usize, kind_name: String) -> tokio::task::JoinHandle<()> {
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            let mut world = lock(&world);
            if kind == usize::MAX {
                world.last_event = Some(Instant::now());
            }
            let as_value = |object: DynamicObject| serde_json::to_value(object).unwrap_or(Value::Null);
            match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    let object = as_value(object);
                    if kind == usize::MAX {
                        world.apply_cr(object);
                    } else {
                        world.apply_child(kind, &kind_name, object);
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    let namespace = object.namespace().unwrap_or_default();
                    let name = object.name_any();
                    if kind == usize::MAX {
                        world.crs.remove(&(namespace, name));
                    } else {
                        world.delete_child(kind, namespace, name);
                    }
                }
                Ok(watcher::Event::Init) => {
                    world.relisting.insert(kind, HashSet::new());
                }
                Ok(watcher::Event::InitDone) => world.relisted(kind),
                Err(_) => world.watch_errors += 1,
            }
            world.evaluate();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cr(uid: &str, generation: i64, observed: i64) -> Value {
        json!({ "metadata": { "namespace": "n", "name": "c", "uid": uid, "generation": generation, "resourceVersion": "5" },
                "status": { "observedGeneration": observed } })
    }

    fn deployment(uid: &str, owner: &str, rv: &str, label: &str) -> Value {
        json!({ "metadata": { "namespace": "n", "name": "c", "uid": uid, "resourceVersion": rv,
                              "labels": { "l": label },
                              "ownerReferences": [{ "uid": owner, "controller": true }] } })
    }

    #[test]
    fn changes_converge_on_their_goal_and_are_superseded_by_another_cr() {
        let mut world = World::default();
        let key = ("n".to_owned(), "c".to_owned());
        world.apply_cr(cr("u1", 2, 1));
        world.expect("edit", key.clone(), "u1".into(), Goal::ObservedGeneration { generation: 2 }, Instant::now());
        world.apply_child(0, "Deployment", deployment("d1", "u1", "6", "x"));
        let edited =
            Goal::LabelRestored { kind: 0, name: "c".into(), label: "l".into(), value: "x".into(), edited_rv: 7 };
        world.expect("label", key.clone(), "u1".into(), edited, Instant::now());
        // The edit's own version (7) and an older one do not count.
        world.apply_child(0, "Deployment", deployment("d1", "u1", "7", "hand"));
        world.evaluate();
        assert_eq!((world.pending(), world.converged.len()), (2, 0));
        world.apply_cr(cr("u1", 2, 2));
        world.apply_child(0, "Deployment", deployment("d1", "u1", "8", "x"));
        world.evaluate();
        assert_eq!((world.pending(), world.converged.len()), (0, 2));
        world.expect("edit", key.clone(), "u1".into(), Goal::ObservedGeneration { generation: 3 }, Instant::now());
        world.apply_cr(cr("u2", 1, 0));
        world.evaluate();
        assert_eq!((world.pending(), world.superseded), (0, 1));
    }

    #[test]
    fn a_modification_that_changes_nothing_is_counted() {
        let mut world = World::default();
        world.apply_child(0, "Deployment", deployment("d1", "u1", "6", "x"));
        world.apply_child(0, "Deployment", deployment("d1", "u1", "6", "x"));
        world.apply_child(0, "Deployment", deployment("d1", "u1", "7", "y"));
        assert!(world.unchanged_modifications.is_empty());
        world.apply_child(0, "Deployment", deployment("d1", "u1", "8", "y"));
        assert_eq!(world.unchanged_modifications.get("Deployment"), Some(&1));
        assert_eq!(world.per_owner.get("u1"), Some(&1));
    }
}
