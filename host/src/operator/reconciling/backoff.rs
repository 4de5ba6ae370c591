//! Per-parent retry delays: 1 s, 2 s, 4 s ... up to 5 minutes, reset by a
//! successful reconcile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::operator::watching::references::ParentKey;

const FIRST: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(300);

#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<ParentKey, u32>>,
}

impl Backoff {
    pub fn next(&self, parent: &ParentKey) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(parent.clone()).or_insert(0);
        let delay = FIRST.saturating_mul(1 << (*count).min(16)).min(MAX);
        *count = count.saturating_add(1);
        delay
    }

    pub fn reset(&self, parent: &ParentKey) {
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_on_success() {
        let backoff = Backoff::default();
        let parent = ("ns".to_owned(), "a".to_owned());
        let delays: Vec<u64> = (0..12).map(|_| backoff.next(&parent).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        backoff.reset(&parent);
        assert_eq!(backoff.next(&parent), FIRST);
        assert_eq!(backoff.next(&("ns".to_owned(), "b".to_owned())), FIRST);
    }
}
