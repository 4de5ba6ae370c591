//! The timers parents' answers asked for (`reach`, 1.3): at most one per
//! parent. The controller's queue holds the timer itself (the action a
//! reconcile returns: one entry per parent, the next answer's replacing
//! it); this keeps which parents have one, for the metric, and forgets a
//! parent that goes, whose timer then finds nothing to reconcile.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::operator::watching::references::ParentKey;

#[derive(Default)]
pub struct Timers {
    parents: Mutex<HashSet<ParentKey>>,
}

impl Timers {
    /// What `parent`'s last answer asked for: a timer, or none. Answers how
    /// many parents have one now.
    pub fn answered(&self, parent: &ParentKey, timer: Option<Duration>) -> usize {
        let mut parents = self.parents.lock().unwrap_or_else(PoisonError::into_inner);
        if timer.is_some() {
            parents.insert(parent.clone());
        } else {
            parents.remove(parent);
        }
        parents.len()
    }

    /// The parent is gone, or its reconcile failed (its retry is the next
    /// reconcile): its timer with it. Answers how many parents have one.
    pub fn forget(&self, parent: &ParentKey) -> usize {
        let mut parents = self.parents.lock().unwrap_or_else(PoisonError::into_inner);
        parents.remove(parent);
        parents.len()
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
    fn one_timer_per_parent_each_answer_replacing_the_last() {
        let timers = Timers::default();
        let (a, b) = (("ns".to_owned(), "a".to_owned()), ("ns".to_owned(), "b".to_owned()));
        let second = Some(Duration::from_secs(1));
        assert_eq!(timers.answered(&a, second), 1);
        assert_eq!(timers.answered(&a, Some(Duration::from_secs(5))), 1);
        assert_eq!(timers.answered(&b, second), 2);
        assert_eq!(timers.answered(&a, None), 1);
        assert_eq!(timers.forget(&b), 0);
        assert_eq!(timers.forget(&b), 0);
    }

    #[test]
    fn the_resync_comes_first_when_it_is_sooner() {
        let resync = Duration::from_secs(600);
        assert_eq!(next_reconcile(None, resync), resync);
        assert_eq!(next_reconcile(Some(Duration::from_secs(30)), resync), Duration::from_secs(30));
        assert_eq!(next_reconcile(Some(Duration::from_secs(3600)), resync), resync);
    }
}
