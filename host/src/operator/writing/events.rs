//! Kubernetes events on the parent: `Created`, `Updated`, `Deleted` per
//! object, and Warnings for an invalid spec or a failed reconcile; and on a
//! LogicModule, what became of a new module version.
//!
//! Events are written by a few writer tasks, off the reconcile's path, as
//! client-go's recorder writes them: a reconcile that changed a child goes
//! on at once instead of waiting one more round trip to the API server.
//! Warnings and a LogicModule's events are still waited for, so whoever
//! sees the failure or the swap can also see why.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Client, Resource};
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

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
/// Tasks writing events. All repeats of one event go to the same writer, in
/// order, so a series' Event is created before it is extended.
const WRITERS: usize = 4;
/// Events waiting per writer. When a writer is this far behind, the next
/// reconcile waits for room: an event is late, never dropped.
const QUEUED_PER_WRITER: usize = 256;

/// Publishes events.k8s.io/v1 Events, folding repeats of the same event
/// (same object, reason, action, related object and type) within
/// [`SERIES_WINDOW`] into a series. Unlike kube-runtime's `Recorder`, whose
/// cache keeps whole Events and is walked on every publish, this keeps a
/// few words per series and does O(1) work per event.
#[derive(Clone)]
pub struct Events {
    writers: Vec<mpsc::Sender<Message>>,
}

enum Message {
    /// An event to write, and who waits for it to be written.
    Publish(Box<Pending>, Option<oneshot::Sender<()>>),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// Writes one share of the events, in the order they came, and remembers
/// the series they make.
struct Writer {
    client: Client,
    controller: String,
    instance: String,
    series: SeriesCache,
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
    /// Starts the writers; called inside a Tokio runtime. They stop when
    /// the last clone of this is dropped, after writing what was queued.
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        let instance = instance.unwrap_or_else(|| controller.to_owned());
        let writers = (0..WRITERS)
            .map(|_| {
                let (sender, queue) = mpsc::channel(QUEUED_PER_WRITER);
                let writer = Writer {
                    client: client.clone(),
                    controller: controller.to_owned(),
                    instance: instance.clone(),
                    series: SeriesCache::default(),
                };
                tokio::spawn(writer.run(queue));
                sender
            })
            .collect();
        Self { writers }
    }

    /// A change to a child, queued: the reconcile does not wait for it.
    /// The child is the event's `related` object, which also keeps "Created
    /// Service" from folding into an earlier "Created Deployment" as one
    /// series.
    pub async fn child_changed(
        &self,
        regarding: &ObjectReference,
        child: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let what = Occurrence::new(regarding, EventType::Normal, reason, action, Some(child));
        self.queue(Pending::now(what, note), None).await;
    }

    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.warning_for(regarding, reason, "Reconcile", note).await;
    }

    /// A Warning, returned from once it is written (or could not be).
    pub async fn warning_for(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        let what = Occurrence::new(regarding, EventType::Warning, reason, action, None);
        self.written(Pending::now(what, note)).await;
    }

    /// A Normal event, returned from once it is written (or could not be).
    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        let what = Occurrence::new(regarding, EventType::Normal, reason, action, None);
        self.written(Pending::now(what, note)).await;
    }

    /// Waits, at most `within`, until every event queued so far is written:
    /// at shutdown, so a stopping operator leaves its last events behind.
    pub async fn flush(&self, within: Duration) {
        let flushed = futures::future::join_all(self.writers.iter().map(|writer| async move {
            let (done, flushed) = oneshot::channel();
            if writer.send(Message::Flush(done)).await.is_ok() {
                // A writer that stopped has nothing left to write.
                let _ = flushed.await;
            }
        }));
        if tokio::time::timeout(within, flushed).await.is_err() {
            tracing::warn!(?within, "some events queued at shutdown were not written in time");
        }
    }

    async fn written(&self, pending: Pending) {
        let (done, written) = oneshot::channel();
        self.queue(pending, Some(done)).await;
        // Dropped unanswered only if the writer stopped, which it logged.
        let _ = written.await;
    }

    async fn queue(&self, pending: Pending, done: Option<oneshot::Sender<()>>) {
        // The key's remainder is below WRITERS, so it fits any usize.
        let writer = &self.writers[(pending.key % WRITERS as u64) as usize];
        if writer.send(Message::Publish(Box::new(pending), done)).await.is_err() {
            tracing::warn!("could not record an event: its writer has stopped");
        }
    }
}

impl Writer {
    async fn run(mut self, mut queue: mpsc::Receiver<Message>) {
        while let Some(message) = queue.recv().await {
            match message {
                Message::Publish(pending, done) => {
                    self.publish(*pending).await;
                    if let Some(done) = done {
                        // Whoever waited may have stopped waiting.
                        let _ = done.send(());
                    }
                }
                Message::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    /// An event that cannot be written is logged, not fatal: events are an
    /// audit trail, not state.
    async fn publish(&mut self, pending: Pending) {
        self.series.expire(pending.seen, MAX_SERIES / WRITERS);
        let reason = pending.what.reason.clone();
        let result = match self.series.repeat(pending.key, pending.seen) {
            Some((namespace, name, count)) => self.extend_series(&namespace, &name, count, pending.at).await,
            None => {
                // Cluster-scoped objects' events go to `default`, as kubectl looks for them.
                let namespace = pending.what.regarding.namespace.clone().unwrap_or_else(|| "default".to_owned());
                let (key, seen) = (pending.key, pending.seen);
                let event = self.event(pending, &namespace);
                let created = self.create(&namespace, &event).await;
                if let (Ok(()), Some(name)) = (&created, event.metadata.name) {
                    self.series.started(key, namespace, name, seen);
                }
                created
            }
        };
        if let Err(error) = result {
            tracing::warn!(reason, error = %error, "could not record an event");
        }
    }

    async fn extend_series(
        &self,
        namespace: &str,
        name: &str,
        count: i32,
        at: jiff::Timestamp,
    ) -> Result<(), kube::Error> {
        let patch = json!({ "series": EventSeries { count, last_observed_time: MicroTime(at) } });
        let request = Request::new(Event::url_path(&(), Some(namespace)))
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .map_err(kube::Error::BuildRequest)?;
        self.send(request, "patch").await
    }

    async fn create(&self, namespace: &str, event: &Event) -> Result<(), kube::Error> {
        let body = serde_json::to_vec(event).map_err(kube::Error::SerdeError)?;
        let request = Request::new(Event::url_path(&(), Some(namespace)))
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        self.send(request, "create").await
    }

    /// Sends a write; its answer, the Event as written, is skipped unread:
    /// nothing here reads it back.
    async fn send(&self, mut request: http::Request<Vec<u8>>, verb: &'static str) -> Result<(), kube::Error> {
        request.extensions_mut().insert(verb);
        self.client.request::<IgnoredAny>(request).await.map(drop)
    }

    fn event(&self, pending: Pending, namespace: &str) -> Event {
        let Pending { what, note, at, .. } = pending;
        let regarding_name = what.regarding.name.as_deref().unwrap_or(&self.controller);
        Event {
            action: Some(what.action),
            // The API server refuses notes over 1 kB.
            note: Some(truncate(note, 1000)),
            event_time: Some(MicroTime(at)),
            metadata: ObjectMeta {
                namespace: Some(namespace.to_owned()),
                name: Some(format!("{regarding_name}.{:x}", at.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reason: Some(what.reason),
            regarding: Some(what.regarding),
            related: what.related,
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(what.type_.as_str().to_owned()),
            ..Event::default()
        }
    }
}

/// An event waiting for its writer, with when it happened.
struct Pending {
    what: Occurrence,
    note: String,
    /// Its series.
    key: u64,
    at: jiff::Timestamp,
    seen: Instant,
}

impl Pending {
    fn now(what: Occurrence, note: String) -> Self {
        Self { key: what.series_key(), what, note, at: jiff::Timestamp::now(), seen: Instant::now() }
    }
}

/// What happened, to what: everything of an event but its note and time.
struct Occurrence {
    regarding: ObjectReference,
    type_: EventType,
    reason: String,
    action: String,
    related: Option<ObjectReference>,
}

impl Occurrence {
    fn new(
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        related: Option<ObjectReference>,
    ) -> Self {
        Self { regarding: regarding.clone(), type_, reason: reason.to_owned(), action: action.to_owned(), related }
    }

    /// What makes two events one series: all of the occurrence (the note
    /// may differ, as in client-go).
    fn series_key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let identity = |reference: &ObjectReference, hasher: &mut DefaultHasher| {
            (&reference.api_version, &reference.kind, &reference.namespace, &reference.name, &reference.uid)
                .hash(hasher);
        };
        identity(&self.regarding, &mut hasher);
        (self.type_, &self.reason, &self.action).hash(&mut hasher);
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
    use std::sync::{Arc, Mutex as StdMutex, PoisonError};

    use tokio::sync::Semaphore;

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
            Occurrence::new(&parent, EventType::Normal, reason, "Create", related.cloned()).series_key()
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

    /// Method, path and the kind of the body's `related` object (if any).
    type Request = (String, String, Option<String>);

    /// A client whose API server records each request and answers it,
    /// echoing its body, once `gate` lets it.
    fn recording_client(gate: Arc<Semaphore>) -> (Client, Arc<StdMutex<Vec<Request>>>) {
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (gate, log) = (gate.clone(), log.clone());
            async move {
                let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
                let body = request.into_body().collect_bytes().await?;
                let related = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|event| event["related"]["kind"].as_str().map(str::to_owned));
                log.lock().unwrap_or_else(PoisonError::into_inner).push((method, path, related));
                let _pass = gate.acquire().await;
                Ok::<_, kube::Error>(http::Response::new(kube::client::Body::from(body)))
            }
        });
        (Client::new(service, "default"), seen)
    }

    fn reference(kind: &str, name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some(kind.into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        }
    }

    #[tokio::test]
    async fn a_child_change_is_not_waited_for_but_a_warning_is() {
        let gate = Arc::new(Semaphore::new(0));
        let (client, seen) = recording_client(gate.clone());
        let events = Events::new(client, "memcached-operator", None);
        let parent = reference("Memcached", "web");
        let created = events.child_changed(&parent, reference("Service", "web"), "Created", "Create", "n".into());
        tokio::time::timeout(Duration::from_secs(5), created)
            .await
            .expect("a child's event is queued while the API server has not answered");

        let warning = events.warning(&parent, "ReconcileFailed", "why".into());
        let mut warning = std::pin::pin!(warning);
        let early = tokio::time::timeout(Duration::from_millis(300), &mut warning).await;
        assert!(early.is_err(), "a Warning is waited for until it is written");
        gate.add_permits(10);
        tokio::time::timeout(Duration::from_secs(5), warning).await.expect("written once the API server answers");
        events.flush(Duration::from_secs(5)).await;
        let methods: Vec<String> =
            seen.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(method, ..)| method.clone()).collect();
        assert_eq!(methods, ["POST", "POST"], "both events were written");
    }

    #[tokio::test]
    async fn queued_repeats_extend_the_series_their_first_event_created() {
        let (client, seen) = recording_client(Arc::new(Semaphore::new(1000)));
        let events = Events::new(client, "memcached-operator", None);
        let parent = reference("Memcached", "web");
        for _ in 0..3 {
            events.child_changed(&parent, reference("Deployment", "web"), "Updated", "Update", "n".into()).await;
        }
        events.child_changed(&parent, reference("Service", "web"), "Updated", "Update", "n".into()).await;
        events.flush(Duration::from_secs(5)).await;

        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let posts = |kind: &str| {
            seen.iter().filter(|(method, _, related)| method == "POST" && related.as_deref() == Some(kind)).count()
        };
        assert_eq!((posts("Deployment"), posts("Service")), (1, 1), "one Event per series: {seen:?}");
        let patches: Vec<usize> = (0..seen.len()).filter(|&i| seen[i].0 == "PATCH").collect();
        assert_eq!(patches.len(), 2, "the two repeats extend the series: {seen:?}");
        assert!(patches.iter().all(|&i| seen[i].1.starts_with("/apis/events.k8s.io/v1/namespaces/ns/events/web.")));
        let created = seen.iter().position(|(_, _, related)| related.as_deref() == Some("Deployment"));
        assert!(created < patches.first().copied(), "the series' Event is created before it is extended: {seen:?}");
    }
}
