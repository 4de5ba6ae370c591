//! Each module's client for its writes, checked at start against what its
//! manifest claims, asking again while the API server cannot answer yet.

use std::time::{Duration, Instant};

use kube::Client;

use crate::operator::Options;
use crate::operator::errors::OperatorError;
use crate::operator::identity::ModuleClient;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::slot::ModuleSlot;

/// Each module's client for its writes, once its identity is known to be
/// allowed all its manifest claims: a module that is not is refused here,
/// before anything is watched.
pub(super) async fn identities(
    client: &Client,
    modules: &[ModuleSlot],
    options: &Options,
) -> Result<Vec<ModuleClient>, OperatorError> {
    let mut identities = Vec::with_capacity(modules.len());
    for slot in modules {
        let module = slot.current();
        let identity = options.module_identity.client_for(client, module.name(), options.namespace.as_deref())?;
        check_when_reachable(&identity, &module).await?;
        if let Some(user) = &identity.user {
            tracing::info!(module = module.name(), user, "the module's writes are made as its ServiceAccount");
        }
        identities.push(identity);
    }
    Ok(identities)
}

/// The check of what the module's identity may do, asked again while the
/// API server cannot answer (restarting, unreachable, overloaded), for as
/// long as it takes a control plane to restart: an operator started
/// meanwhile waits for it, as its watches and the Lease do, instead of
/// exiting at once (make soak saw it crash-loop through every restart).
///
/// A denial is asked again too, for a few seconds: an API server that has
/// just restarted answers 403 until its authorizer's caches are filled
/// (make soak saw a replica refused its module so), and a module that truly
/// may not is refused that much later.
async fn check_when_reachable(identity: &ModuleClient, module: &LogicModule) -> Result<(), OperatorError> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(250);
    loop {
        let error = match identity.check(module).await {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        let transient = error.is_transient();
        let limit = if transient { UNREACHABLE_AT_START } else { DENIED_AT_START };
        if started.elapsed() + delay >= limit {
            return Err(OperatorError::Access { module: module.name().to_owned(), source: error });
        }
        let retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        if transient {
            tracing::warn!(
                module = module.name(),
                error = %error,
                retry_in_ms,
                "cannot ask the API server what the module may do yet; asking again"
            );
        } else {
            // What it may not do is said once, when it is final.
            tracing::warn!(
                module = module.name(),
                retry_in_ms,
                "the API server denies what the module needs; asking again, in case its authorizer is still starting"
            );
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// How long a starting operator waits for an API server that cannot answer.
const UNREACHABLE_AT_START: Duration = Duration::from_secs(120);

/// How long a starting operator asks again after a denial.
const DENIED_AT_START: Duration = Duration::from_secs(8);
