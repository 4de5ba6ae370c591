//! The parents waiting (`reach`, 1.3): on the timer their answer asked
//! for, or, while being deleted, on their module's finalizer. The
//! controller's queue holds a timer itself (the action a reconcile returns:
//! one entry per parent, the next answer's replacing it); this keeps which
//! parents wait, for the metrics, and forgets a parent that goes, whose
//! timer then finds nothing to reconcile.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::operator::watching::references::ParentKey;

#[derive(Default)]
pub struct WaitingParents {
    parents: Mutex<HashSet<ParentKey>>,
}

impl WaitingParents {
    /// Whether `parent` waits now (its last answer asked for a timer; its
    /// module is not done finalizing it). Answers how many parents wait
    /// when that changed the count, so the metric is set only then (most
    /// reconciles, of modules with no timers, change nothing).
    pub fn set(&self, parent: &ParentKey, waits: bool) -> Option<usize> {
        let mut parents = self.parents.lock().unwrap_or_else(PoisonError::into_inner);
        let changed =
            if waits { !parents.contains(parent) && parents.insert(parent.clone()) } else { parents.remove(parent) };
        changed.then_some(parents.len())
    }

    /// The parent is gone, or (for a timer) its reconcile failed: its retry
    /// is the next reconcile. As [`Self::set`] to not waiting.
    pub fn forget(&self, parent: &ParentKey) -> Option<usize> {
        self.set(parent, false)
    }
}

/// When the controller reconciles a parent again after a reconcile that
/// applied its answer: at the answer's timer, or the resync, whichever
/// comes first.
pub fn next_reconcile(timer: Option<Duration>, resync_period: Duration) -> Duration {
    timer.map_or(resync_period, |timer| timer.min(resync_period))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_parent_each_answer_replacing_the_last() {
        let timers = WaitingParents::default();
        let (a, b) = (("ns".to_owned(), "a".to_owned()), ("ns".to_owned(), "b".to_owned()));
        assert_eq!(timers.set(&a, true), Some(1));
        assert_eq!(timers.set(&a, true), None, "no change");
        assert_eq!(timers.set(&b, true), Some(2));
        assert_eq!(timers.set(&a, false), Some(1));
        assert_eq!(timers.forget(&b), Some(0));
        assert_eq!(timers.forget(&b), None);
    }

    #[test]
    fn the_resync_comes_first_when_it_is_sooner() {
        let resync = Duration::from_secs(600);
        assert_eq!(next_reconcile(None, resync), resync);
        assert_eq!(next_reconcile(Some(Duration::from_secs(30)), resync), Duration::from_secs(30));
        assert_eq!(next_reconcile(Some(Duration::from_secs(3600)), resync), resync);
    }
}
