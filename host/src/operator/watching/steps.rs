//! The next step of a reconcile that wrote. A controller written in steps
//! (switch the Service, then scale the old ReplicaSet down) decides its
//! next write from the objects its last one changed; the echoes of its own
//! writes wake no reconcile ([`super::own_writes`]), so without this it
//! would wait for the resync. After a reconcile that wrote children, the
//! parent is reconciled once more as soon as the caches hold every object
//! it wrote: when the answer then asks for nothing, that costs the module
//! calls alone and no request.
//!
//! A module that writes at every step never settles: after
//! `--max-reconcile-steps` reconciles in a row ([`DEFAULT_MAX_STEPS`]) each
//! woken by its own writes, the chain stops (the reconcile says so) and the
//! parent waits for its next change or the resync. A reconcile woken by
//! anything else starts a new chain. With 0, its own writes wake nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use crate::operator::watching::own_writes::ObjectId;

/// How many reconciles in a row may be woken by their own writes, unless
/// `--max-reconcile-steps` says otherwise.
pub const DEFAULT_MAX_STEPS: u32 = 10;

/// namespace, name
pub type ParentKey = (String, String);

pub struct Steps {
    /// Reconciles in a row a parent may be woken by its own writes.
    max: u32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    chains: HashMap<ParentKey, Chain>,
    /// Which parent's next step waits for this object's write to land.
    waiting_on: HashMap<ObjectId, ParentKey>,
}

struct Chain {
    /// The number of the step to come (1 after the first reconcile).
    step: u32,
    /// The written objects whose events have not reached the caches yet.
    awaiting: HashSet<ObjectId>,
}

impl State {
    fn remove(&mut self, parent: &ParentKey) -> Option<Chain> {
        let chain = self.chains.remove(parent)?;
        for id in &chain.awaiting {
            self.waiting_on.remove(id);
        }
        Some(chain)
    }
}

impl Steps {
    pub fn new(max: u32) -> Self {
        Self { max, state: Mutex::default() }
    }

    /// Whether a reconcile that wrote has a next step at all.
    pub fn enabled(&self) -> bool {
        self.max > 0
    }

    pub fn max(&self) -> u32 {
        self.max
    }

    /// Whether a reconcile at `step` that writes is the last one allowed
    /// (never, when no reconcile has a next step).
    pub fn is_last(&self, step: u32) -> bool {
        self.enabled() && step + 1 >= self.max
    }

    /// A reconcile of `parent` starts: its step number. A step when every
    /// write of the one before has landed (that is what woke it), else 0: a
    /// reconcile woken by anything else starts a new chain.
    pub fn begin(&self, parent: &ParentKey) -> u32 {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.chains.is_empty() {
            return 0;
        }
        match state.remove(parent) {
            Some(chain) if chain.awaiting.is_empty() => chain.step,
            _ => 0,
        }
    }

    /// The reconcile of `parent` at `step` wrote `written`: the next step
    /// waits for each to land ([`Steps::landed`]). Call `landed` for those
    /// whose echo is already in (the caller asks `OwnWrites` after this,
    /// so that no echo slips between).
    pub fn wrote(&self, parent: &ParentKey, step: u32, written: &[ObjectId]) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.remove(parent);
        let awaiting: HashSet<ObjectId> = written.iter().cloned().collect();
        for id in &awaiting {
            // Another parent's chain waiting on it (a child taken over)
            // loses it: its own reconcile comes from that event anyway.
            if let Some(other) = state.waiting_on.insert(id.clone(), parent.clone())
                && other != *parent
                && let Some(chain) = state.chains.get_mut(&other)
            {
                chain.awaiting.remove(id);
            }
        }
        state.chains.insert(parent.clone(), Chain { step: step + 1, awaiting });
    }

    /// An event of `id` reached the caches: the parent whose next step it
    /// completes, if any (the last object that step waited for).
    pub fn landed(&self, id: &ObjectId) -> Option<ParentKey> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.waiting_on.is_empty() {
            return None;
        }
        let parent = state.waiting_on.remove(id)?;
        let chain = state.chains.get_mut(&parent)?;
        chain.awaiting.remove(id);
        chain.awaiting.is_empty().then_some(parent)
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.waiting_on.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ObjectId {
        ("/ConfigMap".to_owned(), "ns".to_owned(), name.to_owned())
    }

    fn parent(name: &str) -> ParentKey {
        ("ns".to_owned(), name.to_owned())
    }

    #[test]
    fn the_next_step_comes_once_every_write_has_landed() {
        let steps = Steps::new(DEFAULT_MAX_STEPS);
        let web = parent("web");
        assert_eq!(steps.begin(&web), 0, "a first reconcile");
        steps.wrote(&web, 0, &[id("a"), id("b")]);
        assert_eq!(steps.landed(&id("other")), None, "not one of its writes");
        assert_eq!(steps.landed(&id("a")), None, "b is still to land");
        assert_eq!(steps.landed(&id("b")), Some(web.clone()));
        assert_eq!(steps.landed(&id("b")), None, "woken once");
        assert_eq!(steps.begin(&web), 1, "the step it woke");
        steps.wrote(&web, 1, &[id("a")]);
        assert_eq!(steps.landed(&id("a")), Some(web.clone()));
        assert_eq!(steps.begin(&web), 2);
        // It wrote nothing this time: the chain is over.
        assert_eq!(steps.begin(&web), 0);
        assert_eq!(steps.waiting(), 0);
    }

    #[test]
    fn a_reconcile_woken_by_anything_else_starts_a_new_chain() {
        let steps = Steps::new(DEFAULT_MAX_STEPS);
        let web = parent("web");
        steps.wrote(&web, 4, &[id("a")]);
        // The parent changed before its write landed.
        assert_eq!(steps.begin(&web), 0);
        assert_eq!(steps.waiting(), 0, "its waits are dropped");
        assert_eq!(steps.landed(&id("a")), None);
    }

    #[test]
    fn the_chain_stops_after_max_steps() {
        let steps = Steps::new(10);
        assert!(!steps.is_last(0));
        assert!(!steps.is_last(8));
        assert!(steps.is_last(9));
        assert!(!Steps::new(0).enabled());
        assert!(!Steps::new(0).is_last(0), "no step, so no last one");
    }

    #[test]
    fn an_object_two_parents_wrote_wakes_the_last_writer() {
        let steps = Steps::new(DEFAULT_MAX_STEPS);
        steps.wrote(&parent("one"), 0, &[id("shared"), id("own")]);
        steps.wrote(&parent("two"), 0, &[id("shared")]);
        assert_eq!(steps.landed(&id("shared")), Some(parent("two")));
        assert_eq!(steps.landed(&id("own")), Some(parent("one")), "one no longer waits on the shared object");
    }
}
