//! One cache per kind, shared by every module of the process that
//! owns or reads that kind. Reconciles read current objects from here, never
//! with a GET; each change is handed to every subscriber, which maps it to
//! the parents to reconcile. Objects are indexed by their controller's UID,
//! so a parent's children are found without a scan.
//!
//! A kind whose CRD is not installed (a ServiceMonitor without the
//! Prometheus operator) is `NotServed`: the operator runs without it, and the
//! watcher keeps retrying, so the kind is picked up when its CRD appears.
//!
//! A cache lives as long as a serving module version holds it (see
//! `serving`): a module version that adds a kind starts its watch, and the
//! watch of a kind no version uses any more stops when the last holder
//! lets go.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use futures::StreamExt;
use kube::Client;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::operator::endpoints::metrics::Metrics;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::kind_schemas::{self, KindSchemaError};
use crate::operator::watching::objects::{Objects, key_of};
use crate::planning::kind_schema::KindSchema;
use crate::planning::kinds::{Kind, KindKey};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// The first list has not answered yet.
    Unknown,
    Served,
    /// The API server does not serve this kind (404 on list).
    NotServed,
}

/// What a cache tells its subscribers besides the objects.
pub trait CacheEvents: Send + Sync + 'static {
    /// An object of this kind was added, changed or deleted.
    fn changed(&self, kind: &Kind, object: &CachedObject);
    /// The kind is served again after it was not (its CRD was installed).
    fn served_again(&self, kind: &Kind);
}

/// Held weakly: a subscriber holds the caches it uses, not the other way
/// round, so a cache nobody uses any more can stop.
type Subscribers = Arc<RwLock<Vec<Weak<dyn CacheEvents>>>>;

pub struct Cache {
    pub kind: Kind,
    objects: Arc<RwLock<Objects>>,
    availability: watch::Receiver<Availability>,
    /// Why the watch failed last, until it lists again.
    last_error: Arc<Mutex<Option<String>>>,
    subscribers: Subscribers,
    task: JoinHandle<()>,
    metrics: Option<Arc<Metrics>>,
    /// The kind's merge semantics, read from the API server's OpenAPI v3
    /// the first time a module that writes by apply needs them.
    schema: tokio::sync::OnceCell<Arc<KindSchema>>,
    client: Client,
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.task.abort();
        tracing::info!(kind = self.kind.name(), api_version = self.kind.resource.api_version, "watch stopped");
        if let Some(metrics) = &self.metrics {
            metrics.watching(&self.kind.resource.api_version, self.kind.name(), false);
        }
    }
}

impl Cache {
    /// The kind's schema, if it has been read.
    pub fn known_schema(&self) -> Option<Arc<KindSchema>> {
        self.schema.get().cloned()
    }

    /// Keeps `schema`, read for this kind with others' (`read_schemas`),
    /// unless one was read already.
    fn keep_schema(&self, schema: Arc<KindSchema>) {
        // Already set: by a read of this kind alone, the same document.
        let _ = self.schema.set(schema);
    }

    /// The kind's schema as the API server publishes it: read once, on
    /// first use (a failed read is tried again by the next caller).
    pub async fn schema(&self) -> Result<Arc<KindSchema>, KindSchemaError> {
        let schema = self
            .schema
            .get_or_try_init(|| async {
                let schemas = kind_schemas::fetch(&self.client, std::slice::from_ref(&self.kind)).await?;
                Ok::<_, KindSchemaError>(schemas.into_iter().next().unwrap_or_else(|| Arc::new(KindSchema::untyped())))
            })
            .await?;
        Ok(schema.clone())
    }

    pub fn spawn(client: &Client, kind: Kind, namespace: Option<&str>, metrics: Option<Arc<Metrics>>) -> Self {
        if let Some(metrics) = &metrics {
            metrics.watching(&kind.resource.api_version, kind.name(), true);
        }
        let objects: Arc<RwLock<Objects>> = Arc::default();
        let (availability_tx, availability) = watch::channel(Availability::Unknown);
        let subscribers: Subscribers = Arc::default();
        let api: kube::Api<CachedObject> = kind.watch_api(client, namespace);
        let task_kind = kind.clone();
        let task_subscribers = subscribers.clone();
        let task_objects = objects.clone();
        let last_error: Arc<Mutex<Option<String>>> = Arc::default();
        let task_last_error = last_error.clone();
        let task = tokio::spawn(async move {
            let subscribers = || {
                let subscribers = task_subscribers.read().unwrap_or_else(PoisonError::into_inner);
                subscribers.iter().filter_map(Weak::upgrade).collect::<Vec<_>>()
            };
            let notify = |object: &CachedObject| {
                for subscriber in subscribers() {
                    subscriber.changed(&task_kind, object);
                }
            };
            let failed = |error: Option<String>| {
                *task_last_error.lock().unwrap_or_else(PoisonError::into_inner) = error;
            };
            let objects = || task_objects.write().unwrap_or_else(PoisonError::into_inner);
            // Compact objects, without managedFields: see CachedObject.
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(object)) => {
                        let object = Arc::new(object);
                        objects().apply(object.clone());
                        notify(&object);
                    }
                    // Listed (at the start, or again after a watch gap):
                    // only what changed since it was held wakes anything.
                    Ok(watcher::Event::InitApply(object)) => {
                        let object = Arc::new(object);
                        let changed = objects().apply_listed(object.clone());
                        if changed {
                            notify(&object);
                        }
                    }
                    Ok(watcher::Event::Delete(object)) => {
                        objects().delete(&key_of(&object));
                        notify(&object);
                    }
                    Ok(watcher::Event::Init) => objects().begin_list(),
                    Ok(watcher::Event::InitDone) => {
                        // Deleted while the watch was down.
                        let gone = objects().end_list();
                        for object in &gone {
                            notify(object);
                        }
                        failed(None);
                        let before = availability_tx.send_replace(Availability::Served);
                        if before == Availability::NotServed {
                            tracing::info!(kind = task_kind.name(), "kind is served now; reconciling every parent");
                            for subscriber in subscribers() {
                                subscriber.served_again(&task_kind);
                            }
                        }
                    }
                    Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404 => {
                        failed(None);
                        let before = availability_tx.send_replace(Availability::NotServed);
                        if before != Availability::NotServed {
                            tracing::warn!(
                                kind = task_kind.name(),
                                api_version = task_kind.resource.api_version,
                                "the API server does not serve this kind (CRD not installed?); running without it until it appears"
                            );
                        }
                    }
                    Err(error) => {
                        tracing::warn!(kind = task_kind.name(), error = %error, "watch failed; retrying with backoff");
                        failed(Some(error.to_string()));
                    }
                }
            }
        });
        tracing::info!(kind = kind.name(), api_version = kind.resource.api_version, "watch started");
        let schema = tokio::sync::OnceCell::new();
        Self { kind, objects, availability, last_error, subscribers, task, metrics, schema, client: client.clone() }
    }

    /// Adds a subscriber to every later change, once however often it
    /// subscribes; it stays subscribed while it lives.
    pub fn subscribe(&self, subscriber: &Arc<dyn CacheEvents>) {
        let mut subscribers = self.subscribers.write().unwrap_or_else(PoisonError::into_inner);
        subscribers.retain(|s| s.strong_count() > 0);
        let subscriber = Arc::downgrade(subscriber);
        if !subscribers.iter().any(|s| Weak::ptr_eq(s, &subscriber)) {
            subscribers.push(subscriber);
        }
    }

    /// Why the watch failed last, while it has not listed since.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn availability(&self) -> Availability {
        *self.availability.borrow()
    }

    /// Until the first list answered (with objects, or with "not served").
    pub async fn wait_until_known(&self) {
        let mut availability = self.availability.clone();
        // Err means the task ended; then there is nothing to wait for.
        let _ = availability.wait_for(|a| *a != Availability::Unknown).await;
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<CachedObject>> {
        self.read().get(namespace, name)
    }

    /// The objects of this kind in `namespace` whose controller is
    /// `owner_uid`, ordered by name.
    pub fn controlled_by(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<CachedObject>> {
        self.read().controlled_by(namespace, owner_uid)
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Reads the schemas of `caches` that have none yet together: the OpenAPI
/// index once and each group version's document once, where reading each
/// kind on its own would read the index and its document per kind (five
/// times the core group's for a module owning five core kinds).
pub async fn read_schemas(caches: &[&Arc<Cache>]) -> Result<(), KindSchemaError> {
    let missing: Vec<&Arc<Cache>> = caches.iter().copied().filter(|cache| cache.known_schema().is_none()).collect();
    let Some(first) = missing.first() else {
        return Ok(());
    };
    let kinds: Vec<Kind> = missing.iter().map(|cache| cache.kind.clone()).collect();
    let schemas = kind_schemas::fetch(&first.client, &kinds).await?;
    for (cache, schema) in missing.iter().zip(schemas) {
        cache.keep_schema(schema);
    }
    Ok(())
}

/// Every cache of the process, one per kind, shared by the modules that use
/// that kind; held here weakly, so a cache stops with its last user.
pub struct Caches {
    client: Client,
    namespace: Option<String>,
    by_kind: Mutex<HashMap<KindKey, Weak<Cache>>>,
    metrics: Option<Arc<Metrics>>,
}

impl Caches {
    pub fn new(client: Client, namespace: Option<String>, metrics: Option<Arc<Metrics>>) -> Self {
        Self { client, namespace, by_kind: Mutex::default(), metrics }
    }

    /// The cache of `kind`: the running one, or one started now.
    pub fn of(&self, kind: &Kind) -> Arc<Cache> {
        let mut by_kind = self.by_kind.lock().unwrap_or_else(PoisonError::into_inner);
        by_kind.retain(|_, cache| cache.strong_count() > 0);
        if let Some(cache) = by_kind.get(&kind.key()).and_then(Weak::upgrade) {
            return cache;
        }
        let cache = Arc::new(Cache::spawn(&self.client, kind.clone(), self.namespace.as_deref(), self.metrics.clone()));
        by_kind.insert(kind.key(), Arc::downgrade(&cache));
        cache
    }

    /// The caches some module uses now.
    pub fn all(&self) -> Vec<Arc<Cache>> {
        self.by_kind.lock().unwrap_or_else(PoisonError::into_inner).values().filter_map(Weak::upgrade).collect()
    }
}
