//! One reflector cache per owned and read kind. Reconciles read current
//! objects from here, never with a GET; each change is handed to a callback
//! that maps it to the parents to reconcile.
//!
//! A kind whose CRD is not installed (a ServiceMonitor without the
//! Prometheus operator) is `NotServed`: the operator runs without it, and the
//! watcher keeps retrying, so the kind is picked up when its CRD appears.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::kinds::Kind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// The first list has not answered yet.
    Unknown,
    Served,
    /// The API server does not serve this kind (404 on list).
    NotServed,
}

/// What a cache tells its owner besides the objects.
pub trait CacheEvents: Send + Sync + 'static {
    /// An object of this kind was added, changed or deleted.
    fn changed(&self, kind: &Kind, object: &DynamicObject);
    /// The kind is served again after it was not (its CRD was installed).
    fn served_again(&self, kind: &Kind);
}

pub struct Cache {
    pub kind: Kind,
    store: Store<DynamicObject>,
    availability: watch::Receiver<Availability>,
    task: JoinHandle<()>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cache {
    pub fn spawn(client: &Client, kind: Kind, namespace: Option<&str>, events: Arc<dyn CacheEvents>) -> Self {
        let writer = reflector::store::Writer::new(kind.resource.clone());
        let store = writer.as_reader();
        let (availability_tx, availability) = watch::channel(Availability::Unknown);
        let api = kind.watch_api(client, namespace);
        let task_kind = kind.clone();
        let task = tokio::spawn(async move {
            // managedFields are most of an object's bytes and no reconcile
            // reads them; an update without them keeps the server's.
            let objects = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|object: &mut DynamicObject| object.metadata.managed_fields = None);
            let stream = reflector::reflector(writer, objects);
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => events.changed(&task_kind, &object),
                    // A re-list after a watch gap: any of these may have changed.
                    Ok(watcher::Event::InitApply(object)) => events.changed(&task_kind, &object),
                    Ok(watcher::Event::Init) => {}
                    Ok(watcher::Event::InitDone) => {
                        let before = availability_tx.send_replace(Availability::Served);
                        if before == Availability::NotServed {
                            tracing::info!(kind = task_kind.name(), "kind is served now; reconciling every parent");
                            events.served_again(&task_kind);
                        }
                    }
                    Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404 => {
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
                        tracing::warn!(kind = task_kind.name(), error = %error, "watch failed; retrying with backoff")
                    }
                }
            }
        });
        Self { kind, store, availability, task }
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

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        self.store.get(&ObjectRef::new_with(name, self.kind.resource.clone()).within(namespace))
    }

    /// The object of this kind in `namespace` whose controller is `owner_uid`.
    pub fn controlled_by(&self, namespace: &str, owner_uid: &str) -> Option<Arc<DynamicObject>> {
        self.store.find(|object| {
            object.namespace().as_deref() == Some(namespace)
                && object.owner_references().iter().any(|r| r.controller == Some(true) && r.uid == owner_uid)
        })
    }

    pub fn len(&self) -> usize {
        self.store.len()
    }

    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }
}
