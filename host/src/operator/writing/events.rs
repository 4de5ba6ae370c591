//! Kubernetes events on the parent: `Created`, `Updated`, `Deleted` per
//! object, and Warnings for an invalid spec or a failed reconcile; and on a
//! LogicModule, what became of a new module version.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// How long a repeat of an event extends the earlier one's series instead
/// of making a new Event (client-go and kube-runtime use 6 minutes).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Most series remembered; past it the oldest is forgotten early (its next
/// repeat then makes a new Event), so memory stays bounded at any scale.
const MAX_SERIES: usize = 50_000;

/// Publishes events.k8s.io/v1 Events, folding repeats of the same event
/// (same object, reason, action, related object and type) within
/// [`SERIES_WINDOW`] into a series. Unlike kube-runtime's `Recorder`, whose
/// cache keeps whole Events and is walked on every publish, this keeps a
/// few words per series and does O(1) work per event.
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    series: Mutex<SeriesCache>,
}

/// The Event a series lives in, and how often it happened.
struct Series {
    namespace: String,
    name: String,
    count: i32,
    last: Instant,
}

#[derive(Default)]
struct SeriesCache {
    by_key: HashMap<u64, Series>,
    /// Keys by when they last happened, oldest first; an entry whose time
    /// no longer matches its series is stale and skipped.
    order: VecDeque<(Instant, u64)>,
}

impl SeriesCache {
    /// Forgets series older than the window, or the oldest beyond `max`.
    fn expire(&mut self, now: Instant, max: usize) {
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
    fn repeat(&mut self, key: u64, now: Instant) -> Option<(String, String, i32)> {
        let series = self.by_key.get_mut(&key)?;
        series.count += 1;
        series.last = now;
        self.order.push_back((now, key));
        Some((series.namespace.clone(), series.name.clone(), series.count))
    }

    fn started(&mut self, key: u64, namespace: String, name: String, now: Instant) {
        self.by_key.insert(key, Series { namespace, name, count: 1, last: now });
        self.order.push_back((now, key));
    }
}

impl Events {
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: instance.unwrap_or_else(|| controller.to_owned()),
            series: Mutex::default(),
        }
    }

    /// A change to a child. The child is the event's `related` object, which
    /// also keeps "Created Service" from folding into an earlier "Created
    /// Deployment" as one series.
    pub async fn child_changed(
        &self,
        regarding: &ObjectReference,
        child: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let what = Occurrence { regarding, type_: EventType::Normal, reason, action, related: Some(child) };
        self.publish(what, note).await;
    }

    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.warning_for(regarding, reason, "Reconcile", note).await;
    }

    pub async fn warning_for(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(Occurrence { regarding, type_: EventType::Warning, reason, action, related: None }, note).await;
    }

    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(Occurrence { regarding, type_: EventType::Normal, reason, action, related: None }, note).await;
    }

    /// An event that cannot be written is logged, not fatal: events are an
    /// audit trail, not state.
    async fn publish(&self, what: Occurrence<'_>, note: String) {
        let key = what.series_key();
        let reason = what.reason;
        let now = Instant::now();
        let repeat = {
            let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
            series.expire(now, MAX_SERIES);
            series.repeat(key, now)
        };
        let result = match repeat {
            Some((namespace, name, count)) => self.extend_series(&namespace, &name, count).await,
            None => {
                // Cluster-scoped objects' events go to `default`, as kubectl looks for them.
                let namespace = what.regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
                let event = self.event(what, note, &namespace);
                let created = Api::<Event>::namespaced(self.client.clone(), &namespace)
                    .create(&PostParams::default(), &event)
                    .await;
                if let (Ok(_), Some(name)) = (&created, event.metadata.name) {
                    self.series.lock().unwrap_or_else(PoisonError::into_inner).started(key, namespace, name, now);
                }
                created.map(drop)
            }
        };
        if let Err(error) = result {
            tracing::warn!(reason, error = %error, "could not record an event");
        }
    }

    async fn extend_series(&self, namespace: &str, name: &str, count: i32) -> Result<(), kube::Error> {
        let patch = json!({ "series": EventSeries { count, last_observed_time: MicroTime(jiff::Timestamp::now()) } });
        Api::<Event>::namespaced(self.client.clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    fn event(&self, what: Occurrence<'_>, note: String, namespace: &str) -> Event {
        let now = jiff::Timestamp::now();
        let regarding_name = what.regarding.name.as_deref().unwrap_or(&self.controller);
        Event {
            action: Some(what.action.to_owned()),
            reason: Some(what.reason.to_owned()),
            // The API server refuses notes over 1 kB.
            note: Some(truncate(note, 1000)),
            event_time: Some(MicroTime(now)),
            regarding: Some(what.regarding.clone()),
            related: what.related,
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(format!("{regarding_name}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(what.type_.as_str().to_owned()),
            ..Event::default()
        }
    }
}

/// What happened, to what: everything of an event but its note.
struct Occurrence<'a> {
    regarding: &'a ObjectReference,
    type_: EventType,
    reason: &'a str,
    action: &'a str,
    related: Option<ObjectReference>,
}

impl Occurrence<'_> {
    /// What makes two events one series: all of the occurrence (the note
    /// may differ, as in client-go).
    fn series_key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let identity = |reference: &ObjectReference, hasher: &mut DefaultHasher| {
            (&reference.api_version, &reference.kind, &reference.namespace, &reference.name, &reference.uid)
                .hash(hasher);
        };
        identity(self.regarding, &mut hasher);
        (self.type_, self.reason, self.action).hash(&mut hasher);
        if let Some(related) = &self.related {
            identity(related, &mut hasher);
        }
        hasher.finish()
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max.saturating_sub(3);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
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

    #[test]
    fn the_related_object_and_reason_make_separate_series() {
        let reference = |kind: &str, name: &str| ObjectReference {
            kind: Some(kind.into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        let parent = reference("Memcached", "web");
        let key = |reason, related: Option<&ObjectReference>| {
            let related = related.cloned();
            Occurrence { regarding: &parent, type_: EventType::Normal, reason, action: "Create", related }.series_key()
        };
        let deployment = reference("Deployment", "web");
        let service = reference("Service", "web");
        assert_eq!(key("Created", Some(&deployment)), key("Created", Some(&deployment)));
        assert_ne!(key("Created", Some(&deployment)), key("Created", Some(&service)));
        assert_ne!(key("Created", Some(&deployment)), key("Updated", Some(&deployment)));
        assert_ne!(key("Created", None), key("Created", Some(&deployment)));
    }

    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(600);
        let cut = super::truncate(note, 1000);
        assert!(cut.len() <= 1000);
        assert!(cut.ends_with("..."));
        assert_eq!(super::truncate("short".into(), 1000), "short");
    }
}
