//! Leader election on a coordination.k8s.io Lease, as client-go does it:
//! a replica takes the lease when it is free or its holder stopped renewing
//! for a lease duration (measured on this replica's own clock, never by
//! comparing timestamps across machines), renews it every retry period, and
//! steps down (the process exits) if it cannot renew within the renew
//! deadline. Two replicas therefore never reconcile at once.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

#[derive(Clone, Debug)]
pub struct LeaderElectionOptions {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElectionOptions {
    /// client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: String, lease_name: String, identity: String) -> Self {
        Self {
            namespace,
            lease_name,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lost the leader lease {namespace}/{name}: {why}")]
    Lost { namespace: String, name: String, why: String },
}

/// What this replica last saw of the lease, and when it saw it change.
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    seen_at: Instant,
}

pub struct LeaderElection {
    api: Api<Lease>,
    options: LeaderElectionOptions,
    observed: Option<Observed>,
}

impl LeaderElection {
    pub fn new(client: Client, options: LeaderElectionOptions) -> Self {
        Self { api: Api::namespaced(client, &options.namespace), options, observed: None }
    }

    pub fn identity(&self) -> &str {
        &self.options.identity
    }

    /// Waits until this replica holds the lease.
    pub async fn acquire(&mut self) {
        let mut waiting_logged = false;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(
                        lease = self.options.lease_name,
                        identity = self.options.identity,
                        "became the leader"
                    );
                    return;
                }
                Ok(false) => {
                    if !waiting_logged {
                        let holder = self.observed.as_ref().and_then(|o| o.holder.clone()).unwrap_or_default();
                        tracing::info!(
                            lease = self.options.lease_name,
                            holder,
                            "another replica is the leader; waiting"
                        );
                        waiting_logged = true;
                    }
                }
                Err(error) => {
                    tracing::warn!(lease = self.options.lease_name, error = %error, "could not read or take the lease")
                }
            }
            tokio::time::sleep(self.options.retry_period).await;
        }
    }

    /// Renews the lease until renewal fails for longer than the renew
    /// deadline, or another replica holds it. Never returns otherwise.
    pub async fn keep(&mut self) -> LeaderError {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.options.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => return self.lost("another replica holds the lease".into()),
                Err(error) if last_renewed.elapsed() >= self.options.renew_deadline => {
                    return self.lost(format!("no renewal within {:?}: {error}", self.options.renew_deadline));
                }
                Err(error) => {
                    tracing::warn!(lease = self.options.lease_name, error = %error, "renewing the lease failed; retrying")
                }
            }
        }
    }

    /// Gives the lease up (on shutdown), so a standby takes over at once
    /// instead of after a lease duration.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.options.lease_name).await else { return };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        match self.api.replace(&self.options.lease_name, &PostParams::default(), &lease).await {
            Ok(_) => tracing::info!(lease = self.options.lease_name, "released the leader lease"),
            Err(error) => {
                tracing::warn!(lease = self.options.lease_name, error = %error, "could not release the lease")
            }
        }
    }

    fn lost(&self, why: String) -> LeaderError {
        LeaderError::Lost { namespace: self.options.namespace.clone(), name: self.options.lease_name.clone(), why }
    }

    /// One round: take the lease if it is free or expired, renew it if ours.
    /// `Ok(false)`: someone else holds it (or won a race for it).
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let duration_seconds = i32::try_from(self.options.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.options.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.options.lease_name.clone()),
                    namespace: Some(self.options.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.options.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return conflict_means_false(self.api.create(&PostParams::default(), &lease).await);
        };

        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let changed = self.observed.as_ref().is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time);
        if changed {
            self.observed =
                Some(Observed { holder: holder.clone(), renew_time: spec.renew_time.clone(), seen_at: Instant::now() });
        }
        let ours = holder.as_deref() == Some(self.options.identity.as_str());
        if !ours && holder.is_some() {
            let their_duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.options.lease_duration, Duration::from_secs);
            let seen_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.seen_at);
            if seen_at.elapsed() < their_duration {
                return Ok(false);
            }
        }
        if !ours {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.options.identity.clone());
        spec.lease_duration_seconds = Some(duration_seconds);
        spec.renew_time = Some(now);
        // The resourceVersion we read makes this a compare-and-swap.
        conflict_means_false(self.api.replace(&self.options.lease_name, &PostParams::default(), &lease).await)
    }
}

fn conflict_means_false(result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}
