//! Taking over a module's serving version: at start, the version the
//! LogicModule says was serving (and its rollback window); on a standby, the
//! version the leader serves, held compiled for a failover.

use std::sync::Arc;
use std::time::SystemTime;

use kube::Client;
use kube::api::{Api, DynamicObject};

use super::resource::{ProbationStatus, Verification, spec_of, status_of};
use super::{Follower, api_resource};
use crate::operator::swapping::swap_state::{PreviousVersion, Takeover};
use crate::runtime::engine::ModuleEngine;
use crate::runtime::logic_module::{LogicModule, ModuleSource};
use crate::runtime::oci::{Pulled, Registry};
use crate::runtime::signature::PublicKey;

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
pub(super) async fn pull_verified(
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
pub(super) async fn pull_checked(
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

impl Follower {
    /// On a standby: the version the leader serves, as the resource's
    /// status says, kept to take over with when this replica holds it
    /// compiled, with its probation (the version to roll back to, held
    /// compiled too); answers it (or this replica's own when not held).
    pub(super) async fn follow_the_leader(&mut self, resource: &DynamicObject) -> Arc<LogicModule> {
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
}
