//! The writes reconciles make themselves. Each comes back a moment later as
//! a watch event; reconciling the parent again for it would only find what
//! the reconcile has just written, so it is recognised by its
//! resourceVersion and dropped. Any other change to the object (another
//! resourceVersion) triggers a reconcile as before.
//!
//! The echo may arrive before the write's answer does. So a write is
//! announced before it is sent: events for that object meanwhile are held,
//! and the answer decides: its own version is dropped, any other version
//! (someone else's change) asks for a reconcile then. Entries live from a
//! write to its echo, at most one per object. A write whose answer was lost
//! may have been applied: until the object's next event the status is
//! compared with the server's, not the cache's, so its retry does not
//! write the same again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// kind (`group/Kind`), namespace, name
pub type ObjectId = (String, String, String);

enum Expected {
    /// A write is on its way; the versions seen meanwhile wait for its answer.
    Pending { seen: Vec<String> },
    /// Written at this version; its echo is still to come.
    Written(String),
    /// Sent, but its answer was lost (a connection cut, a cancelled
    /// reconcile): it may have been applied, and the cache may not show it
    /// yet. Until the object's next event, or `UNSURE_FOR`.
    MaybeWritten(Instant),
}

/// How long a write whose answer was lost counts as maybe applied when no
/// event for its object comes.
const UNSURE_FOR: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct OwnWrites {
    expected: Mutex<HashMap<ObjectId, Expected>>,
}

/// What the answer to a write means for the events held meanwhile.
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    /// Nothing, or only the write's own echo.
    Nothing,
    /// Someone else's change: the parent needs another reconcile.
    OtherChanges,
}

impl OwnWrites {
    /// A write to `id` is about to be sent.
    pub fn writing(&self, id: &ObjectId) {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        expected.insert(id.clone(), Expected::Pending { seen: Vec::new() });
    }

    /// The write to `id` was answered: the object is now at
    /// `resource_version`, or (`None`) the API server refused it.
    pub fn answered(&self, id: &ObjectId, resource_version: Option<&str>) -> Held {
        self.settle(id, resource_version, false)
    }

    /// The write to `id` got no answer (the connection failed, or the
    /// reconcile was cancelled): it may have been applied.
    pub fn unanswered(&self, id: &ObjectId) -> Held {
        self.settle(id, None, true)
    }

    fn settle(&self, id: &ObjectId, resource_version: Option<&str>, maybe_applied: bool) -> Held {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = match expected.remove(id) {
            Some(Expected::Pending { seen }) => seen,
            // Announced by another write, or superseded: nothing held here.
            Some(other @ (Expected::Written(_) | Expected::MaybeWritten(_))) => {
                expected.insert(id.clone(), other);
                return Held::Nothing;
            }
            None => Vec::new(),
        };
        let Some(resource_version) = resource_version else {
            if maybe_applied {
                expected.insert(id.clone(), Expected::MaybeWritten(Instant::now()));
            }
            return if seen.is_empty() { Held::Nothing } else { Held::OtherChanges };
        };
        if !seen.iter().any(|version| version == resource_version) {
            // The echo is still to come.
            expected.insert(id.clone(), Expected::Written(resource_version.to_owned()));
        }
        if seen.iter().any(|version| version != resource_version) { Held::OtherChanges } else { Held::Nothing }
    }

    /// Whether this watch event should wake no reconcile now: the echo of a
    /// write, or an event held until a write's answer decides.
    pub fn is_echo(&self, id: &ObjectId, resource_version: Option<&str>) -> bool {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        if expected.is_empty() {
            return false;
        }
        match (expected.get_mut(id), resource_version) {
            (Some(Expected::Pending { seen }), Some(version)) => {
                seen.push(version.to_owned());
                true
            }
            (Some(Expected::Written(written)), Some(version)) => {
                let echo = written == version;
                // Either way the entry is done: a later version supersedes it.
                expected.remove(id);
                echo
            }
            // Our write, if it landed, or a later change: the cache has it
            // now, and a reconcile compares.
            (Some(Expected::MaybeWritten(_)), Some(_)) => {
                expected.remove(id);
                false
            }
            _ => false,
        }
    }

    /// Whether a write to `id` was made (or may have been applied) whose
    /// echo has not reached the cache yet (the cache may not show it).
    pub fn awaiting_echo(&self, id: &ObjectId) -> bool {
        let mut expected = self.expected.lock().unwrap_or_else(PoisonError::into_inner);
        match expected.get(id) {
            Some(Expected::MaybeWritten(since)) if since.elapsed() >= UNSURE_FOR => {
                expected.remove(id);
                false
            }
            entry => entry.is_some(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.expected.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, name: &str) -> ObjectId {
        (kind.to_owned(), "ns".to_owned(), name.to_owned())
    }

    #[test]
    fn the_echo_after_the_answer_is_dropped_once_and_nothing_else_is() {
        let writes = OwnWrites::default();
        let web = id("apps/Deployment", "web");
        writes.writing(&web);
        assert_eq!(writes.answered(&web, Some("10")), Held::Nothing);
        assert!(!writes.is_echo(&id("apps/Deployment", "other"), Some("10")), "another object");
        assert!(!writes.is_echo(&id("/Service", "web"), Some("10")), "another kind");
        assert!(writes.is_echo(&web, Some("10")));
        assert!(!writes.is_echo(&web, Some("10")), "an echo is dropped once");
        assert_eq!(writes.len(), 0);

        // Someone else changed it before our echo arrived: that change counts.
        writes.writing(&web);
        assert_eq!(writes.answered(&web, Some("12")), Held::Nothing);
        assert!(!writes.is_echo(&web, Some("13")));
        assert_eq!(writes.len(), 0, "a later version supersedes the entry");
    }

    #[test]
    fn events_before_the_answer_are_held_and_the_answer_decides() {
        let writes = OwnWrites::default();
        let web = id("apps/Deployment", "web");

        // The echo first: held, then recognised; nothing is left behind.
        writes.writing(&web);
        assert!(writes.is_echo(&web, Some("10")));
        assert_eq!(writes.answered(&web, Some("10")), Held::Nothing);
        assert_eq!(writes.len(), 0);

        // Someone else's change held while ours was on its way: reconcile.
        writes.writing(&web);
        assert!(writes.is_echo(&web, Some("11")));
        assert_eq!(writes.answered(&web, Some("12")), Held::OtherChanges);
        assert!(writes.is_echo(&web, Some("12")), "our own echo is still expected");

        // A failed write releases what it held.
        writes.writing(&web);
        assert_eq!(writes.answered(&web, None), Held::Nothing);
        writes.writing(&web);
        assert!(writes.is_echo(&web, Some("14")));
        assert_eq!(writes.answered(&web, None), Held::OtherChanges);
        assert_eq!(writes.len(), 0);
        assert!(!writes.awaiting_echo(&web), "refused by the server: nothing to wait for");
    }

    #[test]
    fn a_write_whose_answer_was_lost_may_have_landed_until_an_event_shows() {
        let writes = OwnWrites::default();
        let web = id("apps/Deployment", "web");
        writes.writing(&web);
        assert_eq!(writes.unanswered(&web), Held::Nothing);
        // The cache may not show it yet: compare with the server, not the cache.
        assert!(writes.awaiting_echo(&web));
        // Its event (or any later one) wakes a reconcile, which compares.
        assert!(!writes.is_echo(&web, Some("20")));
        assert!(!writes.awaiting_echo(&web));
        assert_eq!(writes.len(), 0);

        // Events held while it was on its way still count.
        writes.writing(&web);
        assert!(writes.is_echo(&web, Some("21")));
        assert_eq!(writes.unanswered(&web), Held::OtherChanges);
        assert!(writes.awaiting_echo(&web));

        // No event ever: it stops counting after UNSURE_FOR.
        let mut expected = writes.expected.lock().unwrap_or_else(PoisonError::into_inner);
        expected.insert(web.clone(), Expected::MaybeWritten(Instant::now() - UNSURE_FOR));
        drop(expected);
        assert!(!writes.awaiting_echo(&web));
        assert_eq!(writes.len(), 0);
    }
}
