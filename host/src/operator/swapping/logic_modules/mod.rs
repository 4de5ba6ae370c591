//! LogicModule resources (deploy/logic-modules/): which version of a module
//! this process serves, named by an OCI reference. A LogicModule is named
//! after the module (its manifest's `name`); one follower per module of the
//! process follows the LogicModule of that name.
//!
//! - On every replica, leading or not, a new spec is pulled, compiled ahead
//!   (kept by digest) and checked as far as no cluster state is needed (the
//!   contract, the kinds against the serving version), so a failover or a
//!   swap costs the leader no compile. A standby also keeps the version the
//!   leader serves (the resource's `status.activeDigest`) ready to take
//!   over with, so the new leader reconciles nothing on an older one.
//! - On the leader it is offered for a verified swap (`hot_swap`), and the
//!   resource's status and events say what became of it.
//! - At start a module comes up on the version its resource says was
//!   serving (`status.activeReference`, verified when it went live); a
//!   newer spec is then offered like any other.
//! - While a version that went live recently is on probation, the status
//!   says so (`status.probation`: the version it would roll back to and
//!   when its watch window closes). A standby holds that previous version
//!   compiled too, and a new leader or a restarted operator keeps the rest
//!   of the window: a failover does not end a rollback window early.
//! - The leader's verification plans the version against the serving one
//!   (`status.plan`, and in the `Swapped`, `Canary` or `AwaitingApproval`
//!   event). `spec.rollout` may hold it (`Active` False, `AwaitingApproval`)
//!   until `spec.rollout.approvedDigest` names its digest, or serve it to a
//!   canary for the watch window first (`status.canary`). A canary does not
//!   survive a failover or a restart: the next leader comes up on the
//!   version serving the other parents, plans again and starts a new canary.
//! - `spec.shadow` runs a candidate beside the serving version for a while,
//!   writing nothing (`shadow_follow`), and reports where they differ.

mod report;
mod resource;
mod shadow_follow;
pub(crate) mod takeover;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::operator::context::Context;
use crate::operator::swapping::hot_swap::{self, Offered};
use crate::operator::swapping::precheck::Prechecked;
use crate::operator::swapping::rollout::SwapPlan;
use crate::operator::swapping::swap_state::{Refusal, Rollback, SwapState};
use crate::runtime::logic_module::{LogicModule, ModuleSource};
use crate::runtime::oci::{OciError, Pulled, Registry};
use crate::runtime::signature::{self, PublicKey};
use crate::runtime::slot::ModuleSlot;
use resource::{RolloutSpec, Spec};
use resource::{condition, object_reference, spec_of, status_of};

pub const GROUP: &str = "wasm-operator.c5c3.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "LogicModule";
pub const PLURAL: &str = "logicmodules";

pub fn api_resource() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.into(),
        plural: PLURAL.into(),
    }
}

/// Where LogicModules' modules come from.
#[derive(Clone)]
pub struct LogicModuleOptions {
    pub registry: Arc<Registry>,
    /// How often a failed pull is retried and a tag (`allowTag`) resolved again.
    pub poll_interval: Duration,
}

impl std::fmt::Debug for LogicModuleOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogicModuleOptions").field("poll_interval", &self.poll_interval).finish_non_exhaustive()
    }
}

/// What was pulled for a spec, and whether it loaded.
struct Fetched {
    spec: Spec,
    outcome: Result<Loaded, (&'static str, String)>,
}

struct Loaded {
    pinned: String,
    digest: String,
    module: Result<Arc<LogicModule>, Refusal>,
    /// The checks that need no cluster state, against the serving version.
    prechecked: Option<Prechecked>,
}

/// What the leader did with a fetched version.
#[derive(Clone, Debug, PartialEq)]
enum Decided {
    /// Serving (swapped in now after its plan, or already the active
    /// version), or serving its canary.
    Serving {
        plan: Option<SwapPlan>,
    },
    /// Verified and planned, and held by the rollout's gates: why, and the
    /// rollout it was held under (a changed one decides again).
    Awaiting {
        plan: SwapPlan,
        held_by: Vec<String>,
        rollout: RolloutSpec,
    },
    Refused(Refusal),
    /// Rolled back before (by this process or a previous leader), so not
    /// offered again for this spec: reason and message.
    RolledBack(String),
}

/// Follows the LogicModule named `slot`'s module until the task is dropped.
/// `leading` carries the module's context once this replica leads.
pub async fn follow(
    client: Client,
    slot: ModuleSlot,
    swap: Arc<SwapState>,
    options: LogicModuleOptions,
    mut leading: watch::Receiver<Option<Arc<Context>>>,
) {
    let name = slot.current().name().to_owned();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut resources = std::pin::pin!(watcher(api.clone(), config).default_backoff().applied_objects());
    let mut changes = swap.subscribe();
    let mut tick = tokio::time::interval(options.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    swap.count_reconciled_parents();
    // A rollback from before this follower started is not news.
    let reported_rollback = swap.last_rollback();
    let mut follower = Follower {
        name,
        slot,
        swap,
        options,
        resource: None,
        fetched: None,
        decided: None,
        reported_rollback,
        leader_serves: None,
        previous_unavailable: None,
        shadow: None,
        reported_shadow_end: None,
    };
    loop {
        let mut look_again = false;
        tokio::select! {
            event = resources.next() => match event {
                Some(Ok(resource)) => follower.resource = Some(resource),
                Some(Err(error)) => {
                    tracing::warn!(module = follower.name, error = %error, "watching the module's LogicModule (is its CRD installed? deploy/logic-modules/)");
                    continue;
                }
                None => return,
            },
            _ = tick.tick() => look_again = true,
            changed = leading.changed() => if changed.is_err() { return },
            changed = changes.changed() => if changed.is_err() { return },
        }
        let ctx = leading.borrow().clone();
        follower.step(ctx.as_ref(), look_again).await;
        if let Some(ctx) = ctx.as_ref()
            && let Some(written) = follower.report(ctx, look_again).await
        {
            follower.resource = Some(written);
        }
    }
}

struct Follower {
    name: String,
    slot: ModuleSlot,
    swap: Arc<SwapState>,
    options: LogicModuleOptions,
    /// The LogicModule as last seen (or as written by us).
    resource: Option<DynamicObject>,
    fetched: Option<Fetched>,
    /// What the leader decided for the fetched digest.
    decided: Option<(String, Decided)>,
    /// The last rollback an event was written for.
    reported_rollback: Option<Rollback>,
    /// On a standby: the digest the leader was last seen serving.
    leader_serves: Option<String>,
    /// On a standby: a version to roll back to that could not be pulled
    /// (not tried again).
    previous_unavailable: Option<String>,
    /// On the leader: the shadow `spec.shadow` asked for.
    shadow: Option<shadow_follow::ShadowFollow>,
    /// The digest whose shadow's end an event was written for.
    reported_shadow_end: Option<String>,
}

impl Follower {
    async fn step(&mut self, ctx: Option<&Arc<Context>>, look_again: bool) {
        let Some(resource) = self.resource.clone() else { return };
        let resource = &resource;
        let spec = spec_of(resource);
        let stale = match &self.fetched {
            None => true,
            Some(fetched) if fetched.spec != spec => true,
            // A failed pull is tried again, and a tag resolved again; an
            // image refused for its signature may have been signed since.
            Some(fetched) => look_again && (fetched.outcome.is_err() || spec.allow_tag || unsigned(fetched)),
        };
        let serving = match ctx {
            Some(ctx) => ctx.module.current(),
            None => self.follow_the_leader(resource).await,
        };
        if stale {
            let fetched = self.fetch(spec, &serving).await;
            if self
                .fetched
                .as_ref()
                .is_some_and(|old| unsigned(old) && (old.spec != fetched.spec || !unsigned(&fetched)))
            {
                // A signature refusal holds for its spec's key and the
                // signatures then: decide again.
                self.decided = None;
            }
            self.fetched = Some(fetched);
        } else if ctx.is_none() {
            self.precheck_again(&serving);
        }
        let Some(ctx) = ctx else { return };
        let rollback = self.swap.last_rollback();
        if rollback != self.reported_rollback {
            if let Some(rollback) = &rollback {
                let note = format!("{} rolled back to {}: {}", rollback.from, rollback.to, rollback.reason);
                ctx.events.warning_for(&object_reference(resource), "RolledBack", "Rollback", note).await;
            }
            self.reported_rollback = rollback;
        }
        self.follow_shadow(ctx, resource, look_again).await;
        let Some(Fetched { outcome: Ok(loaded), .. }) = self.fetched.as_ref() else { return };
        if look_again
            && matches!(&self.decided, Some((digest, Decided::Refused(refusal))) if *digest == loaded.digest && refusal.reason == "WatchFailed")
        {
            // Its kinds could not be listed (RBAC not granted yet, say):
            // offer it again, as a fixed role lets it through.
            self.decided = None;
        }
        let rollout_spec = self.fetched.as_ref().map(|f| f.spec.rollout.clone()).unwrap_or_default();
        if matches!(&self.decided, Some((digest, Decided::Awaiting { rollout, .. })) if *digest == loaded.digest && *rollout != rollout_spec)
        {
            // Approved, or its gates changed: verify and plan again.
            self.decided = None;
        }
        if self.decided.as_ref().is_some_and(|(digest, _)| *digest == loaded.digest) {
            return;
        }
        let decided = match (&loaded.module, rollout_spec.rollout()) {
            (Err(refusal), _) => {
                hot_swap::refused(ctx, refusal.clone());
                Decided::Refused(refusal.clone())
            }
            (Ok(_), Err(error)) => {
                let refusal = Refusal { reason: "InvalidRollout", message: error.to_string() };
                hot_swap::refused(ctx, refusal.clone());
                Decided::Refused(refusal)
            }
            (Ok(module), Ok(rollout)) => match self.rolled_back_before(resource, &loaded.digest) {
                Some(why) => Decided::RolledBack(why),
                None => match hot_swap::offer_loaded(ctx, module.clone(), loaded.prechecked.clone(), &rollout).await {
                    Offered::Unchanged => Decided::Serving { plan: None },
                    Offered::Swapped { plan } | Offered::Canary { plan, .. } => Decided::Serving { plan: Some(plan) },
                    Offered::AwaitingApproval { plan, held_by } => {
                        Decided::Awaiting { plan, held_by, rollout: rollout_spec.clone() }
                    }
                    Offered::Refused(refusal) => Decided::Refused(refusal),
                },
            },
        };
        let regarding = object_reference(resource);
        let kind = ctx.parent_kind.name();
        match &decided {
            Decided::Serving { plan: Some(plan) } => match self.swap.canary() {
                Some(canary) if canary.serving.module.digest() == loaded.digest => {
                    let note = format!(
                        "{} serves a canary, {} ({} parents), until {}; plan: {}",
                        loaded.pinned,
                        canary.selection.describe(),
                        canary.parents,
                        resource::rfc3339(canary.until),
                        plan.line(kind)
                    );
                    ctx.events.normal(&regarding, "Canary", "Swap", note).await;
                }
                _ => {
                    let note = format!("{} serves now; plan: {}", loaded.pinned, plan.line(kind));
                    ctx.events.normal(&regarding, "Swapped", "Swap", note).await;
                }
            },
            Decided::Awaiting { plan, held_by, .. } => {
                let note = format!(
                    "{} awaits approval ({}); plan: {}; approve it with spec.rollout.approvedDigest: {}",
                    loaded.pinned,
                    held_by.join("; "),
                    plan.line(kind),
                    loaded.digest
                );
                ctx.events.normal(&regarding, "AwaitingApproval", "Verify", note).await;
            }
            Decided::Refused(refusal) => {
                let note = format!("{} refused: {}", loaded.pinned, refusal.message);
                ctx.events.warning_for(&regarding, refusal.reason, "Verify", note).await;
            }
            Decided::Serving { plan: None } | Decided::RolledBack(_) => {}
        }
        self.decided = Some((loaded.digest.clone(), decided));
    }

    /// Whether the resource's status says `digest` was rolled back for its
    /// current spec (by a previous leader, say): then it is not offered
    /// again until the spec changes.
    fn rolled_back_before(&self, resource: &DynamicObject, digest: &str) -> Option<String> {
        let status = status_of(resource);
        let rolled_back = condition(&status, "RolledBack")?;
        let current = status.observed_generation == resource.metadata.generation
            && status.digest.as_deref() == Some(digest)
            && rolled_back.status == "True";
        current.then(|| rolled_back.message.clone())
    }
}

impl Follower {
    /// On a standby whose leader now serves another version: the checks
    /// without cluster state again, against that version.
    fn precheck_again(&mut self, serving: &LogicModule) {
        let Some(Fetched { outcome: Ok(loaded), .. }) = self.fetched.as_mut() else { return };
        let Ok(module) = &loaded.module else { return };
        if loaded.prechecked.as_ref().is_some_and(|p| p.against == serving.digest()) {
            return;
        }
        let prechecked = Prechecked::new(serving, module);
        log_prechecked(&self.name, &loaded.pinned, module, &prechecked);
        loaded.prechecked = Some(prechecked);
    }

    /// When `spec` names a public key: that the image `pinned` carries a
    /// cosign signature by it, checked before its bytes are compiled.
    async fn check_signature(&self, spec: &Spec, pinned: &str) -> Result<(), Refusal> {
        let Some(verification) = &spec.verification else { return Ok(()) };
        let checked = match PublicKey::from_pem(&verification.public_key) {
            Ok(key) => self.options.registry.verify_signed(pinned, &key).await,
            Err(error) => Err(error),
        };
        checked.map_err(|error| {
            tracing::warn!(module = self.name, reference = pinned, error = %error, "refusing a module version: its signature does not check");
            Refusal { reason: error.reason(), message: error.to_string() }
        })
    }

    /// Pulls and compiles what `spec` names and checks it against `serving`
    /// as far as that needs no cluster state (on any replica: a standby
    /// compiles and checks ahead).
    async fn fetch(&self, spec: Spec, serving: &LogicModule) -> Fetched {
        let pulled = self.options.registry.pull(&spec.image, spec.allow_tag).await;
        let outcome = match pulled {
            Err(error) => {
                tracing::warn!(module = self.name, image = spec.image, error = %error, "cannot fetch the module the LogicModule names");
                Err((fetch_reason(&error), error.to_string()))
            }
            Ok(Pulled { bytes, pinned, digest }) => {
                tracing::info!(module = self.name, reference = pinned, digest, "fetched a module version");
                let swap = self.swap.clone();
                let engine = self.slot.current().engine().clone();
                let source = ModuleSource::Registry(pinned.clone());
                let signed = self.check_signature(&spec, &pinned).await;
                let module = tokio::task::spawn_blocking(move || {
                    signed.and_then(|()| swap.load(&engine, source, &bytes, false))
                })
                .await
                .unwrap_or_else(|panic| {
                    Err(Refusal { reason: "VerificationStopped", message: format!("loading stopped: {panic}") })
                });
                let prechecked = module.as_ref().ok().map(|module| {
                    let prechecked = Prechecked::new(serving, module);
                    log_prechecked(&self.name, &pinned, module, &prechecked);
                    prechecked
                });
                Ok(Loaded { pinned, digest, module, prechecked })
            }
        };
        Fetched { spec, outcome }
    }
}

/// What the checks without cluster state said of a fetched version; the
/// dry run, which needs the parents, is left to the leader.
fn log_prechecked(name: &str, pinned: &str, module: &LogicModule, prechecked: &Prechecked) {
    if prechecked.against == module.digest() {
        // The serving version itself: nothing to say.
        return;
    }
    match &prechecked.kinds {
        Ok(()) => tracing::info!(
            module = name,
            reference = pinned,
            contract = module.contract(),
            serving = prechecked.against,
            "checked ahead: contract and kinds fit; the leader's dry run remains"
        ),
        Err(refusal) => tracing::warn!(
            module = name,
            reference = pinned,
            serving = prechecked.against,
            reason = refusal.reason,
            problem = refusal.message,
            "compiled ahead, but the leader will refuse it"
        ),
    }
}

/// Whether the fetched version was refused for its signature.
fn unsigned(fetched: &Fetched) -> bool {
    matches!(&fetched.outcome, Ok(Loaded { module: Err(refusal), .. }) if signature::REASONS.contains(&refusal.reason))
}

fn fetch_reason(error: &OciError) -> &'static str {
    match error {
        OciError::BadReference { .. } => "BadReference",
        OciError::TagWithoutDigest { .. } => "TagWithoutDigest",
        OciError::Pull { .. } | OciError::Push { .. } => "PullFailed",
        OciError::NotAWasmArtifact { .. } => "NotAWasmArtifact",
        OciError::TooLarge { .. } => "TooLarge",
        OciError::DigestMismatch { .. } => "DigestMismatch",
    }
}
