//! The LogicModule's status as the leader writes it: what was fetched,
//! whether it verified, what serves, whether it rolled back.

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use super::resource::{CanaryStatus, ProbationStatus, Status, new_condition, rfc3339, same_status, status_of};
use super::{Decided, Follower, api_resource};
use crate::operator::context::Context;
use crate::runtime::logic_module::ModuleSource;

impl Follower {
    /// Writes the resource's status when it changed (the leader only);
    /// answers the resource as written. The count of reconciled parents is
    /// brought up to date only on the poll tick: during a rollout it changes
    /// with every reconcile, and each write would wake this loop again.
    pub(super) async fn report(&self, ctx: &Context, count: bool) -> Option<DynamicObject> {
        let resource = self.resource.as_ref()?;
        let old = status_of(resource);
        let mut new = self.status(resource, &old);
        new.shadow = self.shadow_status(ctx, old.shadow.as_ref(), count);
        if !count && old.reconciled_parents.is_some() {
            new.reconciled_parents = old.reconciled_parents;
        }
        if same_status(&old, &new) {
            return None;
        }
        let api: Api<DynamicObject> = Api::all_with(ctx.identity.operator.clone(), &api_resource());
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
        let kind = active.manifest().parent.kind.clone();
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
            canary: self.swap.canary().map(|canary| CanaryStatus {
                digest: canary.serving.module.digest().to_owned(),
                parents: i64::try_from(canary.parents).unwrap_or(i64::MAX),
                until: rfc3339(canary.until),
            }),
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
                status.plan = match decided_for(&self.decided, &loaded.digest) {
                    Some(Decided::Serving { plan: Some(plan) } | Decided::Awaiting { plan, .. }) => Some(plan.clone()),
                    // Serving since before this process: the plan it went live with.
                    _ => old.plan.clone().filter(|plan| plan.digest == loaded.digest),
                };
                set("Fetched", Some(true), "Pulled", format!("pulled {}", loaded.pinned));
                let decided = decided_for(&self.decided, &loaded.digest);
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
                    (Ok(module), Some(Decided::Serving { plan: Some(plan) } | Decided::Awaiting { plan, .. })) => {
                        let planned = format!("contract {}, planned: {}", module.contract(), plan.line(&kind));
                        set("Verified", Some(true), "Verified", planned)
                    }
                    (Ok(module), Some(Decided::Serving { plan: None })) => {
                        set("Verified", Some(true), "Verified", format!("contract {}", module.contract()))
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
                } else if let Some(canary) = status.canary.as_ref().filter(|c| c.digest == loaded.digest) {
                    let message =
                        format!("it serves {} canary parents until {}; {serving}", canary.parents, canary.until);
                    set("Active", Some(false), "Canary", message);
                } else if let Some(Decided::Awaiting { held_by, .. }) = decided {
                    let message = format!(
                        "{}: set spec.rollout.approvedDigest to {} to roll it out; {serving}",
                        held_by.join("; "),
                        loaded.digest
                    );
                    set("Active", Some(false), "AwaitingApproval", message);
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

/// What was decided for the version `digest`.
fn decided_for<'a>(decided: &'a Option<(String, Decided)>, digest: &str) -> Option<&'a Decided> {
    decided.as_ref().filter(|(d, _)| d == digest).map(|(_, decided)| decided)
}
