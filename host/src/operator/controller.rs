//! One kube-runtime `Controller` per module: its parents' watch, the
//! triggers from owned and read kinds, and how it stops.

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller, reflector, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::mpsc;

use crate::operator::cached_object::CachedObject;
use crate::operator::objects::same_version;
use crate::operator::references::ParentKey;
use crate::operator::{Context, reconcile};

/// The parent a watch event says was deleted. A CR without finalizers is
/// never reconciled once gone, so this is where its bookkeeping is dropped.
fn deleted_parent(event: &watcher::Event<CachedObject>) -> Option<ParentKey> {
    match event {
        watcher::Event::Delete(parent) => Some((parent.namespace()?, parent.name_any())),
        _ => None,
    }
}

fn receiver_stream<T: Send + 'static>(
    mut receiver: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// One module's controller: its parent watch (as `Controller::new_with`
/// builds it, plus forgetting deleted parents), triggered also by its
/// owned and read kinds' changes.
#[allow(clippy::too_many_arguments)]
pub(super) fn controller_for<Stopped>(
    ctx: Arc<Context>,
    parent_writer: reflector::store::Writer<CachedObject>,
    client: &Client,
    namespace: Option<&str>,
    concurrency: u16,
    parents_rx: mpsc::UnboundedReceiver<ObjectRef<CachedObject>>,
    everything_rx: mpsc::UnboundedReceiver<()>,
    stopped: impl Fn() -> Stopped + Send + Sync + 'static,
) -> impl Future<Output = ()>
where
    Stopped: Future<Output = ()> + Send + Sync + 'static,
{
    let parent_kind = ctx.parent_kind.clone();
    let parent_store = parent_writer.as_reader();
    let parent_store_for_stop = parent_store.clone();
    let forgetting = ctx.clone();
    let own_writes = ctx.own_writes.clone();
    let parent_id = parent_kind.id();
    // Compact parents, without managedFields: see CachedObject.
    let parent_watch = watcher(parent_kind.watch_api(client, namespace), watcher::Config::default());
    let listed_against = parent_store.clone();
    let resource = parent_kind.resource.clone();
    let parents = reflector(parent_writer, parent_watch)
        .inspect_ok(move |event| {
            if let Some(parent) = deleted_parent(event) {
                forgetting.forget(&parent);
            }
        })
        // A re-list (after an API server restart, a 410) returns every
        // parent: only those that changed meanwhile are reconciled. The
        // store swaps in a re-list's objects at its end, so during it the
        // store still holds the copy seen before.
        .try_filter_map(move |event| {
            let changed = match event {
                watcher::Event::Apply(parent) => Some(parent),
                watcher::Event::InitApply(parent) => {
                    let held = listed_against.get(&ObjectRef::from_obj_with(&parent, resource.clone()));
                    (!same_version(held.as_deref(), &parent)).then_some(parent)
                }
                _ => None,
            };
            std::future::ready(Ok(changed))
        })
        // The store has it; a status the reconcile wrote itself wakes nothing.
        .try_filter(move |parent| {
            let id = (parent_id.clone(), parent.namespace().unwrap_or_default(), parent.name_any());
            let echo = own_writes.is_echo(&id, parent.resource_version().as_deref());
            std::future::ready(!echo)
        });
    let module = ctx.module_name.clone();
    Controller::for_stream_with(parents, parent_store, parent_kind.resource.clone())
        .with_config(controller::Config::default().concurrency(concurrency))
        .reconcile_on(receiver_stream(parents_rx))
        .reconcile_all_on(receiver_stream(everything_rx))
        .graceful_shutdown_on(stopped())
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .take_until(stopped_before_ready(parent_store_for_stop, stopped()))
        .for_each(move |result| {
            if let Err(error) = result {
                match error {
                    // Already logged by the error policy.
                    controller::Error::ReconcilerFailed(..) => {}
                    other => tracing::warn!(module, error = %other, "controller"),
                }
            }
            std::future::ready(())
        })
}

/// Resolves when `stopped` does before the parents' first list is complete:
/// then the controller must stop at once. A graceful shutdown would wait
/// for ever, as kube-runtime's runner holds every reconcile until that
/// list, which the shutdown itself cuts off; nothing has been reconciled
/// yet, so nothing is cut short. Once the list is in, it never resolves and
/// the graceful shutdown lets reconciles in flight finish.
async fn stopped_before_ready(parents: reflector::Store<CachedObject>, stopped: impl Future<Output = ()>) {
    stopped.await;
    if parents.wait_until_ready().now_or_never().is_none() {
        tracing::info!("stopping before the first list of the parents was complete: nothing to finish");
        return;
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(namespace: Option<&str>) -> CachedObject {
        let metadata = match namespace {
            Some(namespace) => serde_json::json!({"name": "cache", "namespace": namespace}),
            None => serde_json::json!({"name": "cache"}),
        };
        serde_json::from_str(&serde_json::json!({"metadata": metadata}).to_string()).expect("an object")
    }

    fn at_version(resource_version: Option<&str>) -> CachedObject {
        let metadata = serde_json::json!({"name": "cache", "namespace": "ns", "resourceVersion": resource_version});
        serde_json::from_str(&serde_json::json!({"metadata": metadata}).to_string()).expect("an object")
    }

    #[test]
    fn a_parent_listed_again_at_the_version_held_is_unchanged() {
        let held = at_version(Some("7"));
        assert!(same_version(Some(&held), &at_version(Some("7"))));
        assert!(!same_version(Some(&held), &at_version(Some("8"))), "changed meanwhile");
        assert!(!same_version(None, &at_version(Some("7"))), "new");
        assert!(!same_version(Some(&at_version(None)), &at_version(None)), "no version: cannot tell");
    }

    #[test]
    fn only_a_deletion_forgets_a_parent() {
        let key = Some(("team-a".to_owned(), "cache".to_owned()));
        assert_eq!(deleted_parent(&watcher::Event::Delete(parent(Some("team-a")))), key);
        assert_eq!(deleted_parent(&watcher::Event::Apply(parent(Some("team-a")))), None);
        assert_eq!(deleted_parent(&watcher::Event::InitApply(parent(Some("team-a")))), None);
        assert_eq!(deleted_parent(&watcher::Event::InitDone), None);
        // Parents are namespaced; a deletion without a namespace names none.
        assert_eq!(deleted_parent(&watcher::Event::Delete(parent(None))), None);
    }
}
