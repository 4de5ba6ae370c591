//! Kubernetes events on the parent: `Created`, `Updated`, `Deleted` per
//! object, and Warnings for an invalid spec or a failed reconcile; and on a
//! LogicModule, what became of a new module version.
//!
//! Events are written by a few writer tasks, off the reconcile's path, as
//! client-go's recorder writes them: a reconcile that changed a child goes
//! on at once instead of waiting one more round trip to the API server.
//! Warnings and a LogicModule's events are still waited for, so whoever
//! sees the failure or the swap can also see why.

mod occurrence;
mod series;
mod writer;

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use tokio::sync::{mpsc, oneshot};

use occurrence::{EventType, Occurrence, Pending};
use series::MAX_SERIES;
use writer::{Message, Writer};

/// Tasks writing events. All repeats of one event go to the same writer, in
/// order, so a series' Event is created before it is extended.
const WRITERS: usize = 4;
/// Events waiting per writer. When a writer is this far behind, the next
/// reconcile waits for room: an event is late, never dropped.
const QUEUED_PER_WRITER: usize = 256;

/// Publishes events.k8s.io/v1 Events, folding repeats of the same event
/// (same object, reason, action, related object and type) within six
/// minutes (`series::SERIES_WINDOW`) into a series. Unlike kube-runtime's
/// `Recorder`, whose cache keeps whole Events and is walked on every
/// publish, this keeps a few words per series and does O(1) work per event.
#[derive(Clone)]
pub struct Events {
    writers: Vec<mpsc::Sender<Message>>,
}

impl Events {
    /// Starts the writers; called inside a Tokio runtime. They stop when
    /// the last clone of this is dropped, after writing what was queued.
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        let instance = instance.unwrap_or_else(|| controller.to_owned());
        let writers = (0..WRITERS)
            .map(|_| {
                let (sender, queue) = mpsc::channel(QUEUED_PER_WRITER);
                let writer = Writer::new(client.clone(), controller, &instance, MAX_SERIES / WRITERS);
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex as StdMutex, PoisonError};

    use tokio::sync::Semaphore;

    use super::*;

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
