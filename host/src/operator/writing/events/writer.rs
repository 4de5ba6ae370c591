//! A writer task: one share of the events, written in the order they came
//! (a series' Event created before it is extended), each repeat within a
//! series' window written as a patch of its count.

use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Request;
use kube::{Client, Resource};
use serde::de::IgnoredAny;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::occurrence::Pending;
use super::series::SeriesCache;
use crate::runtime::module_log::cut;

pub(super) enum Message {
    /// An event to write, and who waits for it to be written.
    Publish(Box<Pending>, Option<oneshot::Sender<()>>),
    /// Answered once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// Writes one share of the events, in the order they came, and remembers
/// the series they make.
pub(super) struct Writer {
    client: Client,
    controller: String,
    instance: String,
    series: SeriesCache,
    /// Most series it remembers.
    max_series: usize,
}

impl Writer {
    pub(super) fn new(client: Client, controller: &str, instance: &str, max_series: usize) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: instance.to_owned(),
            series: SeriesCache::default(),
            max_series,
        }
    }

    pub(super) async fn run(mut self, mut queue: mpsc::Receiver<Message>) {
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
        self.series.expire(pending.seen, self.max_series);
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
            note: Some(cut(note, 1000)),
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
