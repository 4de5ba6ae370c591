//! The series events fold into: which Event each repeat extends, and how
//! often it happened, kept a few words per series and forgotten by age and
//! number, so memory stays bounded at any scale.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a repeat of an event extends the earlier one's series instead
/// of making a new Event (client-go and kube-runtime use 6 minutes).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Most series remembered; past it the oldest is forgotten early (its next
/// repeat then makes a new Event), so memory stays bounded at any scale.
pub(super) const MAX_SERIES: usize = 50_000;

/// The Event a series lives in, and how often it happened.
struct Series {
    namespace: String,
    name: String,
    count: i32,
    last: Instant,
}

#[derive(Default)]
pub(super) struct SeriesCache {
    by_key: HashMap<u64, Series>,
    /// Keys by when they last happened, oldest first; an entry whose time
    /// no longer matches its series is stale and skipped.
    order: VecDeque<(Instant, u64)>,
}

impl SeriesCache {
    /// Forgets series older than the window, or the oldest beyond `max`.
    pub(super) fn expire(&mut self, now: Instant, max: usize) {
        while let Some(&(at, key)) = self.order.front() {
            let current = self.by_key.get(&key).is_some_and(|s| s.last == at);
            if current && now.duration_since(at) < SERIES_WINDOW && self.by_key.len() <= max {
                break;
            }
            self.order.pop_front();
            if current {
                self.by_key.remove(&key);
            }
        }
    }

    /// The next count of `key`'s series and its Event, if it has one.
    pub(super) fn repeat(&mut self, key: u64, now: Instant) -> Option<(String, String, i32)> {
        let series = self.by_key.get_mut(&key)?;
        series.count += 1;
        series.last = now;
        self.order.push_back((now, key));
        Some((series.namespace.clone(), series.name.clone(), series.count))
    }

    pub(super) fn started(&mut self, key: u64, namespace: String, name: String, now: Instant) {
        self.by_key.insert(key, Series { namespace, name, count: 1, last: now });
        self.order.push_back((now, key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_fold_repeats_and_expire_by_age_and_number() {
        let mut cache = SeriesCache::default();
        let start = Instant::now();
        assert_eq!(cache.repeat(1, start), None, "a first event starts no series by itself");
        cache.started(1, "ns".into(), "web.1".into(), start);
        cache.started(2, "ns".into(), "web.2".into(), start);
        let later = start + Duration::from_secs(60);
        assert_eq!(cache.repeat(1, later), Some(("ns".into(), "web.1".into(), 2)));
        assert_eq!(cache.repeat(1, later), Some(("ns".into(), "web.1".into(), 3)));

        // Past the window after its last repeat, a series is forgotten.
        cache.expire(start + SERIES_WINDOW + Duration::from_secs(1), MAX_SERIES);
        assert!(!cache.by_key.contains_key(&2), "2 was last seen at the start");
        assert!(cache.by_key.contains_key(&1), "1 was repeated a minute later");
        cache.expire(later + SERIES_WINDOW, MAX_SERIES);
        assert!(cache.by_key.is_empty());
        assert!(cache.order.is_empty(), "stale order entries go too");

        // Over the limit, the oldest go first.
        for key in 0..10 {
            cache.started(key, "ns".into(), format!("e.{key}"), start + Duration::from_millis(key));
        }
        cache.expire(start + Duration::from_secs(1), 4);
        let mut kept: Vec<u64> = cache.by_key.keys().copied().collect();
        kept.sort_unstable();
        assert_eq!(kept, [6, 7, 8, 9]);
    }
}
