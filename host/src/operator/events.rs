//! Kubernetes events on the parent: `Created`, `Updated`, `Deleted` per
//! object, and Warnings for an invalid spec or a failed reconcile; and on a
//! LogicModule, what became of a new module version.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Self { recorder: Recorder::new(client, Reporter { controller: controller.to_owned(), instance }) }
    }

    /// A change to a child. The child is the event's `related` object, which
    /// also keeps the recorder from folding "Created Service" into an earlier
    /// "Created Deployment" as one series.
    pub async fn child_changed(
        &self,
        regarding: &ObjectReference,
        child: ObjectReference,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.publish(regarding, EventType::Normal, reason, action, note, Some(child)).await;
    }

    pub async fn warning(&self, regarding: &ObjectReference, reason: &str, note: String) {
        self.warning_for(regarding, reason, "Reconcile", note).await;
    }

    pub async fn warning_for(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(regarding, EventType::Warning, reason, action, note, None).await;
    }

    pub async fn normal(&self, regarding: &ObjectReference, reason: &str, action: &str, note: String) {
        self.publish(regarding, EventType::Normal, reason, action, note, None).await;
    }

    /// An event that cannot be written is logged, not fatal: events are an
    /// audit trail, not state.
    async fn publish(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
        secondary: Option<ObjectReference>,
    ) {
        // The API server refuses notes over 1 kB.
        let note = truncate(note, 1000);
        let event = Event { type_, reason: reason.to_owned(), note: Some(note), action: action.to_owned(), secondary };
        if let Err(error) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(reason, error = %error, "could not record an event");
        }
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
    #[test]
    fn long_notes_are_cut_on_a_character_boundary() {
        let note = "é".repeat(600);
        let cut = super::truncate(note, 1000);
        assert!(cut.len() <= 1000);
        assert!(cut.ends_with("..."));
        assert_eq!(super::truncate("short".into(), 1000), "short");
    }
}
