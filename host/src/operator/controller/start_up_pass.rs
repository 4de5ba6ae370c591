//! The controller's start-up pass: every parent of its first list
//! reconciled once. Said in the log when it ends, with how long it took,
//! so what a change waited on can be read from the log (the soak does).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Instant;

use super::permits::ParentKey;

#[derive(Default)]
pub(crate) struct StartUpPass {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// From the first parent listed.
    started: Option<Instant>,
    /// The first list is complete.
    listed: bool,
    /// Parents of the first list not reconciled yet.
    left: HashSet<ParentKey>,
    total: usize,
    /// Said once.
    done: bool,
}

impl StartUpPass {
    /// A parent of the first list.
    pub(crate) fn listed(&self, parent: ParentKey) {
        let mut state = self.lock();
        if state.listed {
            return;
        }
        state.started.get_or_insert_with(Instant::now);
        if state.left.insert(parent) {
            state.total += 1;
        }
    }

    /// The first list is complete.
    pub(crate) fn list_complete(&self, module: &str) {
        let mut state = self.lock();
        state.listed = true;
        state.finish_if_done(module);
    }

    /// A reconcile of `parent` ran (whatever its outcome), or it is gone.
    pub(crate) fn reconciled(&self, parent: &ParentKey, module: &str) {
        let mut state = self.lock();
        if state.left.remove(parent) {
            state.finish_if_done(module);
        }
    }

    /// Whether the pass has ended.
    #[cfg(test)]
    fn done(&self) -> bool {
        self.lock().done
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn finish_if_done(&mut self, module: &str) {
        if self.done || !self.listed || !self.left.is_empty() {
            return;
        }
        self.done = true;
        let took_ms = self.started.map_or(0, |s| u64::try_from(s.elapsed().as_millis()).unwrap_or(u64::MAX));
        tracing::info!(module, parents = self.total, took_ms, "start-up pass done");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(name: &str) -> ParentKey {
        ("ns".to_owned(), name.to_owned())
    }

    #[test]
    fn ends_once_every_parent_of_the_first_list_was_reconciled() {
        let pass = StartUpPass::default();
        pass.listed(parent("a"));
        pass.listed(parent("b"));
        pass.reconciled(&parent("a"), "m");
        pass.reconciled(&parent("b"), "m");
        assert!(!pass.done(), "the list is not complete yet");
        pass.listed(parent("c"));
        pass.list_complete("m");
        assert!(!pass.done());
        // A parent listed later (a re-list) is no part of it.
        pass.listed(parent("d"));
        pass.reconciled(&parent("c"), "m");
        assert!(pass.done());
    }

    #[test]
    fn an_empty_first_list_is_a_pass_done_at_once() {
        let pass = StartUpPass::default();
        pass.list_complete("m");
        assert!(pass.done());
    }
}
