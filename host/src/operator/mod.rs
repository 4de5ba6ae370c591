//! The operator: a generic host driven by each module's manifest. It learns
//! the parent kind, the owned kinds and the kinds only read from the
//! module, watches them through reflector caches shared by every module of
//! the process, and runs one kube-runtime `Controller` per module over
//! dynamic objects. Every decision about desired state and status comes from
//! the module; this side does the I/O.

mod context;
mod controller;
mod endpoints;
mod errors;
pub mod identity;
pub mod leader;
mod reconciling;
pub mod recording;
mod run;
mod swapping;
mod watching;
mod writing;

// Each concern keeps its files in its own folder; the paths the rest of the
// crate uses stay flat.
pub use context::{Calls, Context, ParentView};
pub use endpoints::{http, metrics, metrics_auth, tls};
pub use errors::{OperatorError, ReconcileError};
pub use reconciling::desired;
use reconciling::{backoff, inputs, reconcile};
pub use run::run;
pub use swapping::{hot_swap, logic_modules, rollout, serving, shadow, swap_plan};
use watching::own_writes;
pub use watching::{cached_object, caches, kinds, objects, references};
use writing::{answers, create_or_update, delete_unwanted, events, status};
pub use writing::{api_requests, compare};

use std::net::SocketAddr;

use leader::LeaderElectionOptions;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Options {
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    pub metrics_address: SocketAddr,
    /// HTTPS and reviewed requests on `metrics_address`; `None`: plain HTTP,
    /// open to anyone who reaches it.
    pub metrics_secure: Option<http::SecureMetrics>,
    pub health_address: SocketAddr,
    pub leader_election: Option<LeaderElectionOptions>,
    /// Parents reconciled at once, per module.
    pub concurrency: u16,
    /// How often an unchanged parent is reconciled anyway (drift the
    /// watches could not see); costs no write when nothing drifted.
    pub resync_period: Duration,
    /// How new module versions are verified, rolled out and rolled back.
    pub swap_policy: hot_swap::SwapPolicy,
    /// Follow each module's LogicModule resource (new versions from an OCI
    /// registry); `None` leaves LogicModules alone.
    pub logic_modules: Option<logic_modules::LogicModuleOptions>,
    /// Bytes of recorded reconciles kept per module (`recording/`); 0
    /// records nothing.
    pub record_budget: u64,
    /// Who each module's writes are made as (`identity/`).
    pub module_identity: identity::ModuleIdentity,
}
