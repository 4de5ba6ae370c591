//! Leader election on a coordination.k8s.io Lease, as client-go does it:
//! a replica takes the lease when it is free or its holder stopped renewing
//! for a lease duration (measured on this replica's own clock, never by
//! comparing timestamps across machines), and renews it every retry period.
//! A leader that cannot renew within the renew deadline (shorter than the
//! lease) stops starting reconciles, so two replicas never reconcile at
//! once, but keeps trying: renewed in time (a short connection fault) it
//! goes on leading without a restart; it steps down (the process exits)
//! only once another replica holds the lease. A standby watches the lease,
//! so one released on a clean stop is taken at once.

use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

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
    /// The holder's lease duration.
    duration: Duration,
}

impl Observed {
    /// How long until another holder's lease runs out, unrenewed.
    fn expires_in(&self) -> Option<Duration> {
        self.holder.as_ref()?;
        Some(self.duration.saturating_sub(self.seen_at.elapsed()))
    }
}

pub struct LeaderElection {
    api: Api<Lease>,
    options: LeaderElectionOptions,
    observed: Option<Observed>,
    /// True while this replica leads with its lease renewed within the
    /// renew deadline.
    may_reconcile: watch::Sender<bool>,
    /// When the round that took the lease was sent.
    renewed_at: Option<Instant>,
}

/// One round's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    /// This replica holds the lease (took or renewed it).
    Held,
    /// Another replica holds it.
    Other,
    /// The lease changed between reading and writing it: ask again.
    Raced,
}

/// Looked at this long after another holder's lease runs out: its expiry
/// is measured from when this replica saw its last renewal.
const EXPIRY_MARGIN: Duration = Duration::from_millis(50);

/// How often a leader whose renewal failed asks again: a few times within
/// the renew deadline, whatever the retry period.
fn retry_after_failure(options: &LeaderElectionOptions) -> Duration {
    (options.renew_deadline / 10)
        .clamp(Duration::from_millis(100), options.retry_period.max(Duration::from_millis(100)))
}

impl LeaderElection {
    pub fn new(client: Client, options: LeaderElectionOptions) -> Self {
        let (may_reconcile, _) = watch::channel(false);
        Self {
            api: Api::namespaced(client, &options.namespace),
            options,
            observed: None,
            may_reconcile,
            renewed_at: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.options.identity
    }

    /// Follows whether this replica may start reconciles: true from taking
    /// the lease while each renewal comes within the renew deadline of the
    /// one before.
    pub fn may_reconcile(&self) -> watch::Receiver<bool> {
        self.may_reconcile.subscribe()
    }

    /// Waits until this replica holds the lease. Between rounds it waits a
    /// retry period, or less when the lease changes (a leader released it).
    pub async fn acquire(&mut self) {
        let mut waiting_logged = false;
        let lease_changes = watcher(
            self.api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={}", self.options.lease_name)),
        )
        .default_backoff();
        let mut lease_changes = std::pin::pin!(lease_changes);
        loop {
            let started = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(Round::Held) => {
                    tracing::info!(
                        lease = self.options.lease_name,
                        identity = self.options.identity,
                        "became the leader"
                    );
                    self.may_reconcile.send_replace(true);
                    self.renewed_at = Some(started);
                    return;
                }
                Ok(Round::Raced) => continue,
                Ok(Round::Other) => {
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
            // Whatever the watch says (a change, an error), it is only a
            // reason to look again sooner; so is the lease running out.
            let expires_in = self.observed.as_ref().and_then(Observed::expires_in).map(|d| d + EXPIRY_MARGIN);
            let wait = expires_in.map_or(self.options.retry_period, |d| d.min(self.options.retry_period));
            if let Ok(Some(_)) = tokio::time::timeout(wait, lease_changes.next()).await {
                // One look for events that came together (a watch's start).
                while let Some(Some(_)) = lease_changes.next().now_or_never() {}
            }
        }
    }

    /// Renews the lease until another replica holds it; never returns
    /// otherwise. While renewal fails for longer than the renew deadline
    /// no reconcile starts (`may_reconcile`), and renewal goes on: renewed
    /// again before another replica took the lease, this replica leads on.
    pub async fn keep(&mut self) -> LeaderError {
        // When the last renewal that succeeded was sent: the lease's renew
        // time is no earlier, so no replica can take it before this plus
        // a lease duration.
        let mut renewed_at = self.renewed_at.take().unwrap_or_else(Instant::now);
        let mut pause = self.options.retry_period;
        loop {
            tokio::time::sleep(pause).await;
            let sent = Instant::now();
            let leading = *self.may_reconcile.borrow();
            // An attempt can hang on a connection that never answers: the
            // deadline holds even then.
            let limit = if leading {
                (renewed_at + self.options.renew_deadline).saturating_duration_since(sent)
            } else {
                self.options.retry_period
            };
            let outcome = tokio::time::timeout(limit, self.try_acquire_or_renew()).await;
            let error = match outcome {
                Ok(Ok(Round::Held)) => {
                    renewed_at = sent;
                    pause = self.options.retry_period;
                    if !leading {
                        tracing::info!(
                            lease = self.options.lease_name,
                            "renewed the lease again before another replica took it; reconciling again"
                        );
                        self.may_reconcile.send_replace(true);
                    }
                    continue;
                }
                Ok(Ok(Round::Other)) => {
                    self.may_reconcile.send_replace(false);
                    return self.lost("another replica holds the lease".into());
                }
                Ok(Ok(Round::Raced)) => {
                    // Read again at once: a renewal that timed out here may
                    // have been written after all.
                    pause = Duration::ZERO;
                    continue;
                }
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("no answer within {limit:?}"),
            };
            pause = retry_after_failure(&self.options);
            if leading && renewed_at.elapsed() >= self.options.renew_deadline {
                self.may_reconcile.send_replace(false);
                tracing::error!(
                    lease = self.options.lease_name,
                    error,
                    renew_deadline_ms = millis(self.options.renew_deadline),
                    "no renewal within the renew deadline: starting no reconcile until the lease is renewed, or another replica takes it"
                );
            } else if leading {
                tracing::warn!(
                    lease = self.options.lease_name,
                    error,
                    since_renewed_ms = millis(renewed_at.elapsed()),
                    "renewing the lease failed; retrying"
                );
            } else {
                tracing::debug!(lease = self.options.lease_name, error, "renewing the lease failed again");
            }
        }
    }

    /// Gives the lease up (on shutdown), so a standby takes over at once
    /// instead of after a lease duration.
    pub async fn release(&mut self) {
        self.may_reconcile.send_replace(false);
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
    async fn try_acquire_or_renew(&mut self) -> Result<Round, kube::Error> {
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
            return conflict_means_raced(self.api.create(&PostParams::default(), &lease).await);
        };

        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let their_duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.options.lease_duration, Duration::from_secs);
        let changed = self.observed.as_ref().is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time);
        if changed {
            self.observed = Some(Observed {
                holder: holder.clone(),
                renew_time: spec.renew_time.clone(),
                seen_at: Instant::now(),
                duration: their_duration,
            });
        }
        let ours = holder.as_deref() == Some(self.options.identity.as_str());
        if !ours && holder.is_some() {
            let seen_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.seen_at);
            if seen_at.elapsed() < their_duration {
                return Ok(Round::Other);
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
        conflict_means_raced(self.api.replace(&self.options.lease_name, &PostParams::default(), &lease).await)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn conflict_means_raced(result: Result<Lease, kube::Error>) -> Result<Round, kube::Error> {
    match result {
        Ok(_) => Ok(Round::Held),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Raced),
        Err(error) => Err(error),
    }
}
