//! A LogicModule's `spec.shadow` on the leader: the candidate pulled
//! (pinned, and signed when the spec asks for signatures), compiled and
//! checked against the serving version's parent kind, then run beside it
//! for `duration` (`shadow.rs`); what it found in `status.shadow`, and an
//! event when its window ends. A failover or a restart keeps the rest of
//! the window (`status.shadow.until`) and does not run an ended one again.

use std::sync::Arc;
use std::time::SystemTime;

use kube::api::DynamicObject;

use super::resource::{ShadowSpec, ShadowStatus, rfc3339, spec_of, status_of};
use super::{Follower, fetch_reason, object_reference};
use crate::operator::context::Context;
use crate::operator::swapping::precheck::Prechecked;
use crate::operator::swapping::shadow_run;
use crate::runtime::logic_module::ModuleSource;
use crate::runtime::oci::Pulled;

/// The shadow the follower started for a spec, or why it could not.
pub(super) struct ShadowFollow {
    spec: ShadowSpec,
    outcome: Result<Started, (&'static str, String)>,
}

struct Started {
    reference: String,
    digest: String,
    until: SystemTime,
}

impl Follower {
    /// On the leader: starts, replaces or stops the shadow as `resource`'s
    /// spec asks, and reports the end of its window. A shadow that could not
    /// start (a pull failed, say) is tried again when `look_again` (the poll
    /// tick).
    pub(super) async fn follow_shadow(&mut self, ctx: &Arc<Context>, resource: &DynamicObject, look_again: bool) {
        let wanted = spec_of(resource).shadow;
        let failed = self.shadow.as_ref().is_some_and(|s| s.outcome.is_err());
        if self.shadow.as_ref().map(|s| &s.spec) != wanted.as_ref() || (failed && look_again) {
            shadow_run::stop(ctx);
            self.shadow = None;
            if let Some(spec) = wanted {
                let outcome = self.start_shadow(ctx, resource, &spec).await;
                if let Err((reason, message)) = &outcome {
                    tracing::warn!(module = self.name, image = spec.image, reason, message, "cannot shadow");
                }
                self.shadow = Some(ShadowFollow { spec, outcome });
            }
        }
        let Some(ShadowFollow { outcome: Ok(started), .. }) = &self.shadow else { return };
        let Some(ended) = ctx.swap.shadow_ended().filter(|e| e.digest == started.digest) else { return };
        if self.reported_shadow_end.as_deref() == Some(started.digest.as_str()) {
            return;
        }
        let report = &ended.report;
        let mut note = format!(
            "{} ran beside {} on {} reconciles: {} parents differ",
            ended.reference,
            ctx.module.current().manifest().version,
            report.reconciles,
            report.differing_parents
        );
        if let Some(first) = report.differences.first() {
            note.push_str(&format!(
                "; first {}: {} {} {} {}",
                first.parent, first.change, first.kind, first.name, first.field
            ));
        }
        ctx.events.normal(&object_reference(resource), "ShadowEnded", "Shadow", note).await;
        self.reported_shadow_end = Some(started.digest.clone());
    }

    async fn start_shadow(
        &self,
        ctx: &Arc<Context>,
        resource: &DynamicObject,
        spec: &ShadowSpec,
    ) -> Result<Started, (&'static str, String)> {
        let duration = crate::duration::parse_duration(&spec.duration)
            .map_err(|error| ("InvalidShadow", format!("spec.shadow.duration: {error}")))?;
        let Pulled { bytes, pinned, .. } =
            self.options.registry.pull(&spec.image, false).await.map_err(|e| (fetch_reason(&e), e.to_string()))?;
        self.check_signature(&spec_of(resource), &pinned).await.map_err(|r| (r.reason, r.message))?;
        let swap = self.swap.clone();
        let engine = self.slot.current().engine().clone();
        let source = ModuleSource::Registry(pinned.clone());
        let module = tokio::task::spawn_blocking(move || swap.load(&engine, source, &bytes, false))
            .await
            .map_err(|panic| ("VerificationStopped", format!("loading stopped: {panic}")))?
            .map_err(|refusal| (refusal.reason, refusal.message))?;
        Prechecked::new(&ctx.module.current(), &module).kinds.map_err(|r| (r.reason, r.message))?;
        let digest = module.digest().to_owned();
        // The rest of a window from before a failover or a restart.
        let before = status_of(resource).shadow.filter(|s| s.digest.as_deref() == Some(digest.as_str()));
        let until = before
            .as_ref()
            .and_then(|s| s.until.as_deref())
            .and_then(|until| until.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map_or_else(|| SystemTime::now() + duration, SystemTime::from);
        if before.is_some_and(|s| s.ended) || until <= SystemTime::now() {
            tracing::info!(module = self.name, reference = pinned, "the shadow's window ended before: not run again");
        } else {
            shadow_run::start(ctx, module, pinned.clone(), until).await.map_err(|why| ("WatchFailed", why))?;
        }
        Ok(Started { reference: pinned, digest, until })
    }

    /// `status.shadow` now; `old` for the counts between poll ticks (`count`
    /// false), as for `reconciledParents`.
    pub(super) fn shadow_status(&self, ctx: &Context, old: Option<&ShadowStatus>, count: bool) -> Option<ShadowStatus> {
        let follow = self.shadow.as_ref()?;
        let started = match &follow.outcome {
            Err((reason, message)) => {
                return Some(ShadowStatus { error: Some(format!("{reason}: {message}")), ..ShadowStatus::default() });
            }
            Ok(started) => started,
        };
        let mut status = ShadowStatus {
            reference: Some(started.reference.clone()),
            digest: Some(started.digest.clone()),
            until: Some(rfc3339(started.until)),
            ..ShadowStatus::default()
        };
        let old = old.filter(|o| o.digest == status.digest);
        if let Some(running) = ctx.swap.shadow().filter(|s| s.serving.module.digest() == started.digest) {
            status.report = match old {
                Some(old) if !count => old.report.clone(),
                _ => running.report(),
            };
        } else if let Some(ended) = ctx.swap.shadow_ended().filter(|e| e.digest == started.digest) {
            status.ended = true;
            status.report = ended.report;
        } else if let Some(old) = old {
            // Ended before this process took over.
            status.ended = old.ended;
            status.report = old.report.clone();
        } else {
            status.ended = true;
        }
        Some(status)
    }
}
