//! Whose reconcile runs next when every slot is taken: parents a watch saw
//! change go before parents reconciled only because they were listed (a
//! controller's start-up pass) or are due a resync, as controller-runtime's
//! priority queue orders them. The controller hands every due parent to a
//! reconcile at once; each waits here for one of `slots` permits.
//!
//! A priority, not a second queue: one turn in every [`FAIR_SHARE`] goes to
//! the parent waiting longest without a change, so a steady stream of
//! changes slows the start-up pass down but never stops it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// A parent: its namespace and name.
pub(crate) type ParentKey = (String, String);

/// Of every this many turns given while both kinds wait, one goes to an
/// unchanged parent.
pub(crate) const FAIR_SHARE: u32 = 4;

/// The permits of one module's controller.
pub(crate) struct Permits {
    state: Mutex<State>,
}

struct State {
    free: usize,
    /// No turn is given (the replica may not be leading).
    paused: bool,
    /// Stopping: waiting reconciles give up, none waits from now on.
    closed: bool,
    /// In arrival order.
    waiting: Vec<Waiter>,
    /// Parents with a change not reconciled yet.
    changed: HashMap<ParentKey, Change>,
    next_change: u64,
    /// Turns given to changed parents in a row while unchanged ones waited.
    changes_in_a_row: u32,
}

/// A parent's changes not reconciled yet, as sequence numbers.
#[derive(Clone, Copy)]
struct Change {
    /// The first: the oldest change goes first.
    first: u64,
    /// The last: a reconcile given its turn before it does not cover it.
    last: u64,
}

struct Waiter {
    parent: ParentKey,
    turn: oneshot::Sender<Permit>,
}

/// One slot, for one parent's reconcile; given back when dropped.
pub(crate) struct Permit {
    permits: Arc<Permits>,
    parent: ParentKey,
    /// The last change of the parent when it was given, if any.
    change: Option<u64>,
    /// False only for a permit that never reached its waiter.
    held: bool,
}

/// What a turn was given for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// A change seen by a watch.
    Change,
    /// A listing, a resync, a retry.
    Due,
}

impl Permits {
    /// `slots` reconciles at once; 0: no limit.
    pub(crate) fn new(slots: u16) -> Arc<Self> {
        let free = if slots == 0 { usize::MAX } else { usize::from(slots) };
        Arc::new(Permits {
            state: Mutex::new(State {
                free,
                paused: false,
                closed: false,
                waiting: Vec::new(),
                changed: HashMap::new(),
                next_change: 0,
                changes_in_a_row: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves consistent state: every change is
        // one assignment or one Vec operation.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A watch saw `parent` change: its next turn comes first, whether it
    /// waits already or not yet.
    pub(crate) fn changed(&self, parent: ParentKey) {
        let mut state = self.lock();
        let seen = state.next_change;
        state.next_change += 1;
        state
            .changed
            .entry(parent)
            .and_modify(|change| change.last = seen)
            .or_insert(Change { first: seen, last: seen });
    }

    /// The parent is gone: its change will never be reconciled.
    pub(crate) fn forget(&self, parent: &ParentKey) {
        self.lock().changed.remove(parent);
    }

    /// Stops (true) or resumes giving turns; reconciles running go on.
    pub(crate) fn pause(self: &Arc<Self>, paused: bool) {
        let mut state = self.lock();
        state.paused = paused;
        self.give_turns(&mut state);
    }

    /// Every reconcile waiting, and any asking from now on, gives up.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.waiting.clear();
    }

    /// Waits for `parent`'s turn; `None` once closed.
    pub(crate) async fn turn(self: &Arc<Self>, parent: ParentKey) -> Option<Permit> {
        let receiver = {
            let mut state = self.lock();
            if state.closed {
                return None;
            }
            let (turn, receiver) = oneshot::channel();
            state.waiting.push(Waiter { parent, turn });
            self.give_turns(&mut state);
            receiver
        };
        receiver.await.ok()
    }

    /// Gives free slots to waiters, changed parents first.
    fn give_turns(self: &Arc<Self>, state: &mut State) {
        while state.free > 0 && !state.paused {
            let Some(index) = next(state) else { return };
            let Waiter { parent, turn } = state.waiting.remove(index);
            let change = state.changed.get(&parent).map(|change| change.last);
            let permit = Permit { permits: self.clone(), parent, change, held: true };
            match turn.send(permit) {
                Ok(()) => state.free -= 1,
                // The waiter gave up (its reconcile was dropped).
                Err(mut permit) => permit.held = false,
            }
        }
    }

    fn give_back(self: &Arc<Self>) {
        let mut state = self.lock();
        state.free = state.free.saturating_add(1);
        self.give_turns(&mut state);
    }

    /// Reconciles waiting, and how many of them for a change.
    #[cfg(test)]
    fn waiting(&self) -> (usize, usize) {
        let state = self.lock();
        let changes = state.waiting.iter().filter(|w| state.changed.contains_key(&w.parent)).count();
        (state.waiting.len(), changes)
    }
}

/// The waiter whose turn it is, and counts the turn.
fn next(state: &mut State) -> Option<usize> {
    let oldest_change = state
        .waiting
        .iter()
        .enumerate()
        .filter_map(|(i, w)| state.changed.get(&w.parent).map(|change| (change.first, i)))
        .min()
        .map(|(_, i)| i);
    let oldest_due = state.waiting.iter().position(|w| !state.changed.contains_key(&w.parent));
    match (oldest_change, oldest_due) {
        (Some(change), Some(due)) => {
            if state.changes_in_a_row + 1 >= FAIR_SHARE {
                state.changes_in_a_row = 0;
                Some(due)
            } else {
                state.changes_in_a_row += 1;
                Some(change)
            }
        }
        (Some(change), None) => Some(change),
        (None, due) => {
            state.changes_in_a_row = 0;
            due
        }
    }
}

impl Permit {
    pub(crate) fn why(&self) -> Why {
        if self.change.is_some() { Why::Change } else { Why::Due }
    }

    /// The reconcile succeeded: the change it was given for is done, unless
    /// another came meanwhile.
    pub(crate) fn reconciled(&self) {
        let Some(change) = self.change else { return };
        let mut state = self.permits.lock();
        if state.changed.get(&self.parent).is_some_and(|seen| seen.last == change) {
            state.changed.remove(&self.parent);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.held {
            self.permits.give_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn parent(name: &str) -> ParentKey {
        ("ns".to_owned(), name.to_owned())
    }

    /// Starts waiting for each parent in order, one task each; answers the
    /// order the turns came in.
    async fn wait_all(
        permits: &Arc<Permits>,
        names: &[&str],
    ) -> tokio::sync::mpsc::UnboundedReceiver<(String, Permit)> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let already = permits.waiting().0;
        for (i, name) in names.iter().enumerate() {
            let (waiter, tx, name) = (permits.clone(), tx.clone(), (*name).to_owned());
            tokio::spawn(async move {
                if let Some(permit) = waiter.turn(parent(&name)).await {
                    let _ = tx.send((name, permit));
                }
            });
            // Each waits before the next asks: arrival order is known.
            while permits.waiting().0 < already + i + 1 {
                tokio::task::yield_now().await;
            }
        }
        rx
    }

    #[tokio::test]
    async fn a_changed_parent_goes_before_those_listed_earlier() {
        let permits = Permits::new(1);
        let busy = permits.turn(parent("busy")).await.expect("a free slot");
        let mut turns = wait_all(&permits, &["listed-1", "listed-2", "changed"]).await;
        permits.changed(parent("changed"));
        assert_eq!(permits.waiting(), (3, 1));
        drop(busy);
        let (first, permit) = turns.recv().await.expect("a turn");
        assert_eq!(first, "changed");
        assert_eq!(permit.why(), Why::Change);
        permit.reconciled();
        drop(permit);
        let (second, permit) = turns.recv().await.expect("a turn");
        assert_eq!((second.as_str(), permit.why()), ("listed-1", Why::Due));
    }

    #[tokio::test]
    async fn unchanged_parents_get_one_turn_in_every_fair_share() {
        let permits = Permits::new(1);
        let busy = permits.turn(parent("busy")).await.expect("a free slot");
        let names: Vec<String> = (0..8).map(|i| format!("changed-{i}")).chain(["listed".to_owned()]).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut turns = wait_all(&permits, &names).await;
        for name in &names[..8] {
            permits.changed(parent(name));
        }
        drop(busy);
        let mut order = Vec::new();
        for _ in 0..names.len() {
            let (name, permit) = turns.recv().await.expect("a turn");
            permit.reconciled();
            order.push(name);
        }
        let listed_at = order.iter().position(|n| n == "listed").expect("listed had a turn");
        assert_eq!(listed_at, FAIR_SHARE as usize - 1, "{order:?}");
    }

    #[tokio::test]
    async fn a_change_during_the_reconcile_keeps_the_parent_first() {
        let permits = Permits::new(1);
        permits.changed(parent("a"));
        let permit = permits.turn(parent("a")).await.expect("a free slot");
        // Seen while its reconcile ran: the next reconcile is for it.
        permits.changed(parent("a"));
        permit.reconciled();
        drop(permit);
        let again = permits.turn(parent("a")).await.expect("a free slot");
        assert_eq!(again.why(), Why::Change);
        again.reconciled();
        drop(again);
        let after = permits.turn(parent("a")).await.expect("a free slot");
        assert_eq!(after.why(), Why::Due, "done once reconciled");
    }

    #[tokio::test]
    async fn a_failed_reconcile_keeps_its_change_and_a_deleted_parent_drops_it() {
        let permits = Permits::new(1);
        permits.changed(parent("a"));
        drop(permits.turn(parent("a")).await.expect("a free slot"));
        let retry = permits.turn(parent("a")).await.expect("a free slot");
        assert_eq!(retry.why(), Why::Change, "not reconciled: the retry is still for a change");
        drop(retry);
        permits.forget(&parent("a"));
        assert_eq!(permits.turn(parent("a")).await.expect("a free slot").why(), Why::Due);
    }

    #[tokio::test]
    async fn paused_gives_no_turn_and_closed_sends_every_waiter_away() {
        let permits = Permits::new(2);
        permits.pause(true);
        let mut turns = wait_all(&permits, &["a", "b"]).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(turns.try_recv().is_err(), "no turn while paused");
        permits.pause(false);
        let (_, a) = turns.recv().await.expect("a turn once resumed");
        let (_, b) = turns.recv().await.expect("a turn once resumed");
        let mut waiting = wait_all(&permits, &["c"]).await;
        permits.close();
        drop((a, b));
        assert!(waiting.recv().await.is_none(), "sent away");
        assert!(permits.turn(parent("d")).await.is_none(), "none waits once closed");
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_keeps_no_slot() {
        let permits = Permits::new(1);
        let busy = permits.turn(parent("busy")).await.expect("a free slot");
        let gave_up = tokio::time::timeout(Duration::from_millis(10), permits.turn(parent("gone"))).await;
        assert!(gave_up.is_err());
        drop(busy);
        let next = tokio::time::timeout(Duration::from_secs(1), permits.turn(parent("next"))).await;
        assert!(next.expect("the slot came back").is_some());
    }
}
