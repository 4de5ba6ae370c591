//! The operator: a generic host driven by each module's manifest. It learns
//! the parent kind, the owned kinds and the kinds only read from the
//! module, watches them through reflector caches shared by every module of
//! the process, and runs one kube-runtime `Controller` per module over
//! dynamic objects. Every decision about desired state and status comes from
//! the module; this side does the I/O.

pub mod context;
mod controller;
pub mod endpoints;
pub mod errors;
pub mod identity;
pub mod leader;
mod reconciling;
pub mod recording;
pub mod run;
pub mod swapping;
pub mod watching;
pub mod writing;

use std::net::SocketAddr;

use crate::operator::leader::LeaderElectionOptions;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Options {
    /// Watch one namespace; `None` watches all.
    pub namespace: Option<String>,
    pub metrics_address: SocketAddr,
    /// HTTPS and reviewed requests on `metrics_address`; `None`: plain HTTP,
    /// open to anyone who reaches it.
    pub metrics_secure: Option<endpoints::http::SecureMetrics>,
    pub health_address: SocketAddr,
    pub leader_election: Option<LeaderElectionOptions>,
    /// Parents reconciled at once, per module.
    pub concurrency: u16,
    /// Calls into one module running at once, off the async workers
    /// (`runtime/call_pool.rs`).
    pub module_call_concurrency: usize,
    /// Reconciles in a row a parent is woken by its own writes landing
    /// (`watching/steps.rs`); 0: its own writes wake nothing.
    pub max_reconcile_steps: u32,
    /// How often an unchanged parent is reconciled anyway (drift the
    /// watches could not see); costs no write when nothing drifted.
    pub resync_period: Duration,
    /// How new module versions are verified, rolled out and rolled back.
    pub swap_policy: swapping::swap_state::SwapPolicy,
    /// Follow each module's LogicModule resource (new versions from an OCI
    /// registry); `None` leaves LogicModules alone.
    pub logic_modules: Option<swapping::logic_modules::LogicModuleOptions>,
    /// Bytes of recorded reconciles kept per module (`recording/`); 0
    /// records nothing.
    pub record_budget: u64,
    /// Who each module's writes are made as (`identity/`).
    pub module_identity: identity::ModuleIdentity,
}
