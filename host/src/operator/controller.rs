//! One kube-runtime `Controller` per module: its parents' watch, the
//! triggers from owned and read kinds, whose reconcile runs first
//! (`permits`), and how it stops.

mod permits;
mod start_up_pass;

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller, reflector, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{mpsc, watch};

use crate::operator::context::Context;
use crate::operator::errors::ReconcileError;
use crate::operator::reconciling::reconcile;
use crate::operator::watching::cached_object::CachedObject;
use crate::operator::watching::objects::same_version;
use crate::operator::watching::references::ParentKey;
use permits::Permits;
use start_up_pass::StartUpPass;

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
/// owned and read kinds' changes. Every parent due is handed to a reconcile
/// at once, which waits for its turn (`Permits`): `concurrency` run at a
/// time, changed parents first. While `may_reconcile` says false (the lease
/// could not be renewed in time) no reconcile starts.
#[allow(clippy::too_many_arguments)]
pub(super) fn controller_for<Stopped>(
    ctx: Arc<Context>,
    parent_writer: reflector::store::Writer<CachedObject>,
    client: &Client,
    namespace: Option<&str>,
    concurrency: u16,
    parents_rx: mpsc::UnboundedReceiver<ObjectRef<CachedObject>>,
    everything_rx: mpsc::UnboundedReceiver<()>,
    may_reconcile: Option<watch::Receiver<bool>>,
    stopped: impl Fn() -> Stopped + Send + Sync + 'static,
) -> impl Future<Output = ()>
where
    Stopped: Future<Output = ()> + Send + Sync + 'static,
{
    let parent_store = parent_writer.as_reader();
    let in_turn = Arc::new(InTurn {
        permits: Permits::new(concurrency),
        pass: Arc::new(StartUpPass::default()),
        parents: parent_store.clone(),
    });
    let permits = in_turn.permits.clone();
    // Compact parents, without managedFields: see CachedObject.
    let parent_watch = watcher(ctx.parent_kind.watch_api(client, namespace), watcher::Config::default());
    let parents = parent_changes(&ctx, reflector(parent_writer, parent_watch), &in_turn);
    let triggers = triggered(receiver_stream(parents_rx), &in_turn);
    let module = ctx.module_name.clone();
    let controller = Controller::for_stream_with(parents, parent_store.clone(), ctx.parent_kind.resource.clone())
        // Every parent due goes to a reconcile at once, to wait there for
        // its turn: kube-runtime's own limit would leave a change queued
        // behind every parent due before it.
        .with_config(controller::Config::default().concurrency(0))
        .reconcile_on(triggers)
        .reconcile_all_on(receiver_stream(everything_rx))
        .graceful_shutdown_on(stopped())
        .run(move |parent, ctx| reconcile_in_turn(parent, ctx, in_turn.clone()), reconcile::error_policy, ctx)
        .take_until(stopped_before_ready(parent_store, stopped()))
        .for_each(move |result| {
            if let Err(error) = result {
                match error {
                    // Already logged by the error policy.
                    controller::Error::ReconcilerFailed(..) => {}
                    other => tracing::warn!(module, error = %other, "controller"),
                }
            }
            std::future::ready(())
        });
    let stopping = stopped();
    async move {
        tokio::select! {
            () = controller => {}
            () = turns(&permits, may_reconcile, stopping) => {}
        }
        // Stopped with the controller: a reconcile still waiting gives up.
        permits.close();
    }
}

/// The parents' watch events the controller reconciles: a change (an
/// Apply, or a re-list's newer copy) goes first (`Permits::changed`), the
/// first list's parents make the start-up pass. A deleted parent is
/// forgotten.
fn parent_changes(
    ctx: &Arc<Context>,
    events: impl Stream<Item = watcher::Result<watcher::Event<CachedObject>>> + Send + 'static,
    in_turn: &InTurn,
) -> impl Stream<Item = watcher::Result<CachedObject>> + Send + 'static {
    let (forgetting, listing, seen) = (ctx.clone(), in_turn.pass.clone(), in_turn.permits.clone());
    let (forgotten, seen_listed) = (seen.clone(), listing.clone());
    let module = ctx.module_name.clone();
    let listed_against = in_turn.parents.clone();
    let resource = ctx.parent_kind.resource.clone();
    let own_writes = ctx.own_writes.clone();
    let parent_id = ctx.parent_kind.id();
    events
        .inspect_ok(move |event| {
            if let Some(parent) = deleted_parent(event) {
                forgotten.forget(&parent);
                listing.reconciled(&parent, &module);
                forgetting.forget(&parent);
            }
            if matches!(event, watcher::Event::InitDone) {
                listing.list_complete(&module);
            }
        })
        // A re-list (after an API server restart, a 410) returns every
        // parent: only those that changed meanwhile are reconciled. The
        // store swaps in a re-list's objects at its end, so during it the
        // store still holds the copy seen before.
        .try_filter_map(move |event| {
            let changed = match event {
                watcher::Event::Apply(parent) => Some((parent, Reason::Changed)),
                watcher::Event::InitApply(parent) => {
                    let held = listed_against.get(&ObjectRef::from_obj_with(&parent, resource.clone()));
                    listed(held.as_deref(), &parent).map(|why| (parent, why))
                }
                _ => None,
            };
            std::future::ready(Ok(changed))
        })
        // The store has it; a status the reconcile wrote itself wakes nothing.
        .try_filter(move |(parent, _)| {
            let id = (parent_id.clone(), parent.namespace().unwrap_or_default(), parent.name_any());
            let echo = own_writes.is_echo(&id, parent.resource_version().as_deref());
            std::future::ready(!echo)
        })
        .map_ok(move |(parent, why)| {
            match why {
                Reason::Changed => seen.changed(key_of(&parent)),
                Reason::Listed => seen_listed.listed(key_of(&parent)),
            }
            parent
        })
}

/// The parents an owned or read object's change wakes, each remembered as
/// changed (it goes first); a parent already gone has no reconcile to come,
/// so no change to remember.
fn triggered(
    parents: impl Stream<Item = ObjectRef<CachedObject>> + Send + 'static,
    in_turn: &InTurn,
) -> impl Stream<Item = ObjectRef<CachedObject>> + Send + 'static {
    let (permits, held) = (in_turn.permits.clone(), in_turn.parents.clone());
    parents.inspect(move |parent| {
        if held.get(parent).is_some()
            && let Some(namespace) = &parent.namespace
        {
            permits.changed((namespace.clone(), parent.name.clone()));
        }
    })
}

/// Why a parent is reconciled, as its watch event tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    /// An Apply, or a re-list's copy newer than the one held.
    Changed,
    /// The first list: every parent, changed or not.
    Listed,
}

/// Whether a parent listed (`InitApply`) is reconciled, and why: listed
/// anew it is due, listed again at the version held it is not, at another
/// version it changed meanwhile.
fn listed(held: Option<&CachedObject>, parent: &CachedObject) -> Option<Reason> {
    match held {
        None => Some(Reason::Listed),
        Some(held) if !same_version(Some(held), parent) => Some(Reason::Changed),
        Some(_) => None,
    }
}

fn key_of(parent: &CachedObject) -> permits::ParentKey {
    (parent.namespace().unwrap_or_default(), parent.name_any())
}

/// Follows whether this replica may reconcile, pausing the permits while
/// not; once stopped, sends every reconcile still waiting away (the
/// graceful shutdown then waits only for those running). Never resolves
/// before `stopped`.
async fn turns(
    permits: &Arc<Permits>,
    may_reconcile: Option<watch::Receiver<bool>>,
    stopped: impl Future<Output = ()>,
) {
    let following = async {
        let Some(mut may_reconcile) = may_reconcile else { return std::future::pending().await };
        loop {
            permits.pause(!*may_reconcile.borrow_and_update());
            if may_reconcile.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    };
    tokio::select! {
        () = following => {}
        () = stopped => permits.close(),
    }
    std::future::pending::<()>().await;
}

/// What a reconcile waits for its turn with.
struct InTurn {
    permits: Arc<Permits>,
    pass: Arc<StartUpPass>,
    parents: reflector::Store<CachedObject>,
}

/// A reconcile once its turn comes, of the parent as the store holds it
/// then (it may have changed while it waited; gone, nothing is done).
async fn reconcile_in_turn(
    parent: Arc<CachedObject>,
    ctx: Arc<Context>,
    in_turn: Arc<InTurn>,
) -> Result<Action, ReconcileError> {
    let key = key_of(&parent);
    let Some(permit) = in_turn.permits.turn(key.clone()).await else {
        // Stopping: never started; the next leader lists it.
        return Ok(Action::await_change());
    };
    let reference = ObjectRef::from_obj_with(parent.as_ref(), ctx.parent_kind.resource.clone());
    let Some(parent) = in_turn.parents.get(&reference) else {
        in_turn.pass.reconciled(&key, &ctx.module_name);
        return Ok(Action::await_change());
    };
    tracing::trace!(module = ctx.module_name, name = key.1, why = ?permit.why(), "reconcile's turn");
    let result = reconcile::reconcile(parent, ctx.clone()).await;
    if result.is_ok() {
        permit.reconciled();
    }
    in_turn.pass.reconciled(&key, &ctx.module_name);
    result
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
    fn the_first_list_is_due_and_a_relist_changed_only_where_newer() {
        assert_eq!(listed(None, &at_version(Some("7"))), Some(Reason::Listed));
        assert_eq!(listed(Some(&at_version(Some("7"))), &at_version(Some("7"))), None);
        assert_eq!(listed(Some(&at_version(Some("7"))), &at_version(Some("8"))), Some(Reason::Changed));
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
