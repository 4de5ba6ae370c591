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

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::Context;
use super::hot_swap::{self, Offered, Prechecked, PreviousVersion, Refusal, Rollback, SwapState, Takeover};
use crate::modules::oci::{OciError, Pulled, Registry};
use crate::modules::signature::{self, PublicKey};
use crate::modules::{LogicModule, ModuleEngine, ModuleSlot, ModuleSource};

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

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub allow_tag: bool,
    /// When set, only an image signed with this key is loaded.
    #[serde(default)]
    pub verification: Option<Verification>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// A cosign public key, PEM (cosign.pub).
    pub public_key: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_reference: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconciled_parents: Option<i64>,
    /// While the serving version is on probation; written as null after, so
    /// a merge patch removes it.
    #[serde(default)]
    pub probation: Option<ProbationStatus>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// The serving version's probation: what it would roll back to, and until when.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProbationStatus {
    pub previous_digest: String,
    /// Where the previous version can be pulled (none for a version built
    /// in or given as a file: every replica has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_reference: Option<String>,
    /// When the watch window closes (RFC 3339).
    pub until: String,
}

impl ProbationStatus {
    /// When the window closes, if that is readable.
    fn until(&self) -> Option<SystemTime> {
        let until: k8s_openapi::jiff::Timestamp = self.until.parse().ok()?;
        Some(SystemTime::from(until))
    }
}

fn rfc3339(time: SystemTime) -> String {
    let time = k8s_openapi::jiff::Timestamp::try_from(time).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn spec_of(resource: &DynamicObject) -> Spec {
    resource.data.get("spec").and_then(|spec| serde_json::from_value(spec.clone()).ok()).unwrap_or_default()
}

fn status_of(resource: &DynamicObject) -> Status {
    resource.data.get("status").and_then(|status| serde_json::from_value(status.clone()).ok()).unwrap_or_default()
}

fn condition<'a>(status: &'a Status, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// The version a module's LogicModule says was serving, pulled, checked
/// against the digest it had and loaded, with its probation when its watch
/// window is still open (the version to roll back to: `given`, the module
/// the operator was started with, or pulled); `None` when there is no
/// resource, it names no serving version, or it cannot be had now (logged:
/// the module then starts on `given`).
pub async fn serving_version(client: &Client, registry: &Registry, given: &Arc<LogicModule>) -> Option<Takeover> {
    let module = given.name();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource());
    let resource = match api.get_opt(module).await {
        Ok(resource) => resource?,
        Err(error) => {
            tracing::warn!(module, error = %error, "cannot read the module's LogicModule (is its CRD installed? deploy/logic-modules/)");
            return None;
        }
    };
    let status = status_of(&resource);
    let verification = spec_of(&resource).verification;
    let (reference, digest) = (status.active_reference?, status.active_digest?);
    let loaded = pull_verified(registry, given.engine(), &reference, &digest, verification.as_ref()).await;
    let serving = match loaded {
        Ok(loaded) => {
            tracing::info!(module, reference, digest, "starting on the version the LogicModule says was serving");
            Arc::new(loaded)
        }
        Err(error) => {
            tracing::warn!(
                module,
                reference,
                error,
                "cannot load the version the LogicModule says was serving; starting on the given module"
            );
            return None;
        }
    };
    let probation = match status.probation.as_ref().filter(|p| p.until().is_some_and(|t| t > SystemTime::now())) {
        Some(probation) if probation.previous_digest == given.digest() => {
            Some(PreviousVersion { module: given.clone(), until: probation.until()? })
        }
        Some(probation) => match &probation.previous_reference {
            Some(previous) => {
                match pull_verified(
                    registry,
                    given.engine(),
                    previous,
                    &probation.previous_digest,
                    verification.as_ref(),
                )
                .await
                {
                    Ok(module) => Some(PreviousVersion { module: Arc::new(module), until: probation.until()? }),
                    Err(error) => {
                        tracing::warn!(
                            module,
                            previous,
                            error,
                            "cannot load the version to roll back to; no rollback window"
                        );
                        None
                    }
                }
            }
            None => None,
        },
        None => None,
    };
    Some(Takeover { module: serving, probation })
}

/// The module at `reference`, pulled, checked to be `digest` (and signed by
/// the spec's key, when it names one) and compiled.
async fn pull_verified(
    registry: &Registry,
    engine: &ModuleEngine,
    reference: &str,
    digest: &str,
    verification: Option<&Verification>,
) -> Result<LogicModule, String> {
    let pulled = pull_checked(registry, reference, digest, verification).await?;
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || {
        LogicModule::from_bytes(&engine, ModuleSource::Registry(pulled.pinned), &pulled.bytes, false)
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The module at `reference`, pulled and checked to be `digest` (and signed
/// by the spec's key, when it names one).
async fn pull_checked(
    registry: &Registry,
    reference: &str,
    digest: &str,
    verification: Option<&Verification>,
) -> Result<Pulled, String> {
    let pulled = registry.pull(reference, false).await.map_err(|e| e.to_string())?;
    if pulled.digest != digest {
        return Err(format!("it is {}, not the {digest} that served", pulled.digest));
    }
    if let Some(verification) = verification {
        let key = PublicKey::from_pem(&verification.public_key).map_err(|e| e.to_string())?;
        registry.verify_signed(&pulled.pinned, &key).await.map_err(|e| e.to_string())?;
    }
    Ok(pulled)
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
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decided {
    /// Serving (swapped in now, or already the active version).
    Serving {
        dry_run: Option<usize>,
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
        let Some(Fetched { outcome: Ok(loaded), .. }) = self.fetched.as_ref() else { return };
        if look_again
            && matches!(&self.decided, Some((digest, Decided::Refused(refusal))) if *digest == loaded.digest && refusal.reason == "WatchFailed")
        {
            // Its kinds could not be listed (RBAC not granted yet, say):
            // offer it again, as a fixed role lets it through.
            self.decided = None;
        }
        if self.decided.as_ref().is_some_and(|(digest, _)| *digest == loaded.digest) {
            return;
        }
        let decided = match &loaded.module {
            Err(refusal) => {
                hot_swap::refused(ctx, refusal.clone());
                Decided::Refused(refusal.clone())
            }
            Ok(module) => match self.rolled_back_before(resource, &loaded.digest) {
                Some(why) => Decided::RolledBack(why),
                None => match hot_swap::offer_loaded(ctx, module.clone(), loaded.prechecked.clone()).await {
                    Offered::Unchanged => Decided::Serving { dry_run: None },
                    Offered::Swapped { dry_run } => Decided::Serving { dry_run: Some(dry_run) },
                    Offered::Refused(refusal) => Decided::Refused(refusal),
                },
            },
        };
        let regarding = object_reference(resource);
        match &decided {
            Decided::Serving { dry_run: Some(parents) } => {
                let note = format!("{} serves now (dry run over {parents} parents)", loaded.pinned);
                ctx.events.normal(&regarding, "Swapped", "Swap", note).await;
            }
            Decided::Refused(refusal) => {
                let note = format!("{} refused: {}", loaded.pinned, refusal.message);
                ctx.events.warning_for(&regarding, refusal.reason, "Verify", note).await;
            }
            Decided::Serving { dry_run: None } | Decided::RolledBack(_) => {}
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

    /// On a standby: the version the leader serves, as the resource's
    /// status says, kept to take over with when this replica holds it
    /// compiled, with its probation (the version to roll back to, held
    /// compiled too); answers it (or this replica's own when not held).
    async fn follow_the_leader(&mut self, resource: &DynamicObject) -> Arc<LogicModule> {
        let own = self.slot.current();
        let status = status_of(resource);
        let Some(digest) = status.active_digest else { return own };
        let held = if digest == own.digest() { None } else { self.swap.held(&digest) };
        let news = self.leader_serves.as_deref() != Some(digest.as_str());
        if news && digest != own.digest() {
            match &held {
                Some(_) => tracing::info!(
                    module = self.name,
                    digest,
                    "the leader serves a version held compiled here; a takeover starts on it"
                ),
                None => tracing::warn!(
                    module = self.name,
                    digest,
                    own = own.digest(),
                    "the leader serves a version this replica does not hold compiled; a takeover starts on its own and then offers the LogicModule's"
                ),
            }
        }
        self.leader_serves = Some(digest.clone());
        let serves = held.clone().unwrap_or_else(|| own.clone());
        let probation = match status.probation {
            Some(probation) if serves.digest() == digest => self.previous_version(resource, &probation).await,
            _ => None,
        };
        self.swap.serve_on_takeover(Some(Takeover { module: serves.clone(), probation }));
        serves
    }

    /// On a standby: the version the leader's probation would roll back
    /// to, held compiled (pulled and compiled now if it is not).
    async fn previous_version(
        &mut self,
        resource: &DynamicObject,
        probation: &ProbationStatus,
    ) -> Option<PreviousVersion> {
        let until = probation.until().filter(|until| *until > SystemTime::now())?;
        let digest = &probation.previous_digest;
        if let Some(module) = self.swap.held(digest) {
            return Some(PreviousVersion { module, until });
        }
        let reference = probation.previous_reference.as_ref()?;
        if self.previous_unavailable.as_ref() == Some(digest) {
            return None;
        }
        let verification = spec_of(resource).verification;
        let pulled = pull_checked(&self.options.registry, reference, digest, verification.as_ref()).await;
        let loaded = match pulled {
            Ok(Pulled { bytes, pinned, .. }) => {
                let (swap, engine) = (self.swap.clone(), self.slot.current().engine().clone());
                tokio::task::spawn_blocking(move || {
                    swap.load(&engine, ModuleSource::Registry(pinned), &bytes, false).map_err(|r| r.message)
                })
                .await
                .unwrap_or_else(|panic| Err(format!("loading stopped: {panic}")))
            }
            Err(error) => Err(error),
        };
        match loaded {
            Ok(module) => {
                tracing::info!(
                    module = self.name,
                    reference,
                    "compiled ahead the version the leader's probation would roll back to"
                );
                Some(PreviousVersion { module, until })
            }
            Err(error) => {
                tracing::warn!(
                    module = self.name,
                    reference,
                    error,
                    "cannot hold the version the leader's probation would roll back to; a takeover keeps no rollback window"
                );
                self.previous_unavailable = Some(digest.clone());
                None
            }
        }
    }

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

    /// Writes the resource's status when it changed (the leader only);
    /// answers the resource as written. The count of reconciled parents is
    /// brought up to date only on the poll tick: during a rollout it changes
    /// with every reconcile, and each write would wake this loop again.
    async fn report(&self, ctx: &Context, count: bool) -> Option<DynamicObject> {
        let resource = self.resource.as_ref()?;
        let old = status_of(resource);
        let mut new = self.status(resource, &old);
        if !count && old.reconciled_parents.is_some() {
            new.reconciled_parents = old.reconciled_parents;
        }
        if same_status(&old, &new) {
            return None;
        }
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &api_resource());
        let patch = serde_json::json!({ "status": new });
        let params = PatchParams { field_manager: Some(ctx.field_manager.clone()), ..PatchParams::default() };
        match api.patch_status(&resource.name_any(), &params, &Patch::Merge(&patch)).await {
            Ok(written) => Some(written),
            Err(error) => {
                tracing::warn!(module = self.name, error = %error, "cannot write the LogicModule's status");
                None
            }
        }
    }

    fn status(&self, resource: &DynamicObject, old: &Status) -> Status {
        let generation = resource.metadata.generation;
        let active = self.slot.current();
        let rollback = self.swap.last_rollback();
        let mut status = Status {
            observed_generation: generation,
            active_digest: Some(active.digest().to_owned()),
            active_version: Some(active.manifest().version.clone()),
            reconciled_parents: i64::try_from(self.swap.reconciled_parents(active.digest())).ok(),
            probation: self.swap.probation().filter(|p| p.digest == active.digest()).map(|p| ProbationStatus {
                previous_digest: p.previous.digest().to_owned(),
                previous_reference: match p.previous.source() {
                    ModuleSource::Registry(reference) => Some(reference.clone()),
                    _ => None,
                },
                until: rfc3339(p.until),
            }),
            // Where the serving bytes can be pulled again (a restart comes
            // up on them): the registry they came from, or the fetched
            // reference when that holds the very same bytes.
            active_reference: match active.source() {
                ModuleSource::Registry(reference) => Some(reference.clone()),
                _ => match self.fetched.as_ref().map(|f| &f.outcome) {
                    Some(Ok(loaded)) if loaded.digest == active.digest() => Some(loaded.pinned.clone()),
                    _ => None,
                },
            },
            ..Status::default()
        };
        let serving = format!("{} ({}) serves", active.manifest().version, active.digest());
        let mut conditions = Vec::new();
        let mut set = |type_: &str, ok: Option<bool>, reason: &str, message: String| {
            let status = match ok {
                Some(true) => "True",
                Some(false) => "False",
                None => "Unknown",
            };
            conditions.push(new_condition(old, type_, status, reason, message, generation));
        };
        match self.fetched.as_ref().map(|f| &f.outcome) {
            None => {
                set("Fetched", None, "Pending", "not fetched yet".into());
                set("Verified", None, "Pending", "not fetched yet".into());
                set("Active", Some(false), "Pending", serving);
                set("RolledBack", Some(false), "NoRollback", String::new());
            }
            Some(Err((reason, message))) => {
                set("Fetched", Some(false), reason, message.clone());
                set("Verified", None, "NotFetched", "nothing to verify".into());
                set("Active", Some(false), "NotFetched", serving);
                set("RolledBack", Some(false), "NoRollback", String::new());
            }
            Some(Ok(loaded)) => {
                status.reference = Some(loaded.pinned.clone());
                status.digest = Some(loaded.digest.clone());
                set("Fetched", Some(true), "Pulled", format!("pulled {}", loaded.pinned));
                let decided = self.decided.as_ref().filter(|(digest, _)| *digest == loaded.digest).map(|(_, d)| d);
                let rolled_back =
                    rollback.as_ref().filter(|r| r.from == loaded.digest).map(|r| r.reason.clone()).or_else(|| {
                        match decided {
                            Some(Decided::RolledBack(why)) => Some(why.clone()),
                            _ => None,
                        }
                    });
                match (&loaded.module, decided) {
                    (Err(refusal), _) | (Ok(_), Some(Decided::Refused(refusal))) => {
                        set("Verified", Some(false), refusal.reason, refusal.message.clone())
                    }
                    (Ok(module), Some(Decided::Serving { dry_run })) => {
                        let checked = dry_run.map_or_else(String::new, |n| format!(", a dry run over {n} parents"));
                        set("Verified", Some(true), "Verified", format!("contract {}{checked}", module.contract()))
                    }
                    (Ok(module), Some(Decided::RolledBack(_))) => {
                        set("Verified", Some(true), "Verified", format!("contract {}", module.contract()))
                    }
                    (Ok(_), None) => set("Verified", None, "Pending", "verifying".into()),
                }
                if active.digest() == loaded.digest {
                    set("Active", Some(true), "Serving", serving);
                } else if rolled_back.is_some() {
                    set("Active", Some(false), "RolledBack", serving);
                } else if matches!(decided, Some(Decided::Refused(_))) || loaded.module.is_err() {
                    set("Active", Some(false), "Refused", serving);
                } else {
                    set("Active", Some(false), "Pending", serving);
                }
                match rolled_back {
                    Some(why) => set("RolledBack", Some(true), "RolledBack", why),
                    None => set("RolledBack", Some(false), "NoRollback", String::new()),
                }
            }
        }
        status.conditions = conditions;
        status
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
            message = refusal.message,
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

/// A condition as it stands now, keeping its transition time when only the
/// message changed.
fn new_condition(
    old: &Status,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Condition {
    let last_transition_time = match condition(old, type_) {
        Some(before) if before.status == status => before.last_transition_time.clone(),
        _ => Time(k8s_openapi::jiff::Timestamp::now()),
    };
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Equal but for when the conditions were computed.
fn same_status(old: &Status, new: &Status) -> bool {
    let without_times = |status: &Status| {
        let mut status = status.clone();
        for condition in &mut status.conditions {
            condition.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        }
        status
    };
    without_times(old) == without_times(new)
}

fn object_reference(resource: &DynamicObject) -> ObjectReference {
    resource.object_ref(&api_resource())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition_of(status: &str, reason: &str) -> Condition {
        Condition {
            type_: "Active".into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let old = Status { conditions: vec![condition_of("True", "Serving")], ..Status::default() };
        let same = new_condition(&old, "Active", "True", "Serving", "v2 serves".into(), Some(2));
        assert_eq!(same.last_transition_time, Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let flipped = new_condition(&old, "Active", "False", "RolledBack", String::new(), Some(2));
        assert_ne!(flipped.last_transition_time, Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    }

    #[test]
    fn statuses_differing_only_in_times_are_the_same() {
        let old = Status { conditions: vec![condition_of("True", "Serving")], ..Status::default() };
        let mut new = old.clone();
        new.conditions[0].last_transition_time = Time(k8s_openapi::jiff::Timestamp::now());
        assert!(same_status(&old, &new));
        new.conditions[0].reason = "Refused".into();
        assert!(!same_status(&old, &new));
    }

    #[test]
    fn a_probation_is_written_while_it_runs_and_removed_after() {
        let until = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let running = Status {
            probation: Some(ProbationStatus {
                previous_digest: "sha256:aa".into(),
                previous_reference: None,
                until: rfc3339(until),
            }),
            ..Status::default()
        };
        let written = serde_json::to_value(&running).expect("a status");
        assert_eq!(
            written["probation"],
            serde_json::json!({"previousDigest": "sha256:aa", "until": "2027-01-15T08:00:00Z"})
        );
        let read: Status = serde_json::from_value(written).expect("read back");
        assert_eq!(read.probation.and_then(|p| p.until()), Some(until));
        // Null, not absent: in a merge patch, null removes the field.
        let over = serde_json::to_value(Status::default()).expect("a status");
        assert_eq!(over.get("probation"), Some(&serde_json::Value::Null));
        let unreadable = ProbationStatus { until: "soon".into(), ..ProbationStatus::default() };
        assert_eq!(unreadable.until(), None);
    }

    #[test]
    fn a_spec_reads_its_defaults() {
        let resource: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
            "metadata": {"name": "greeting"},
            "spec": {"image": "127.0.0.1:5000/m@sha256:00"}
        }))
        .expect("a LogicModule");
        assert_eq!(
            spec_of(&resource),
            Spec { image: "127.0.0.1:5000/m@sha256:00".into(), allow_tag: false, verification: None }
        );
    }
}
