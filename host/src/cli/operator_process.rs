//! The operator as a process runs it (`run`, and `dev` on a local
//! cluster): its log, its API client, its options from the flags, and the
//! signals that stop it.

use std::sync::Arc;

use anyhow::{Context, Result, bail};

use crate::cli::args::{Flavor, LogFormat, ModuleIdentityArg, RunArgs};
use crate::operator::endpoints::http::SecureMetrics;
use crate::operator::endpoints::metrics::Metrics;
use crate::operator::endpoints::metrics_auth::ReviewCache;
use crate::operator::identity::ModuleIdentity;
use crate::operator::leader::LeaderElectionOptions;
use crate::operator::swapping::logic_modules::LogicModuleOptions;
use crate::operator::swapping::swap_state::SwapPolicy;
use crate::operator::watching::steps::DEFAULT_MAX_STEPS;
use crate::operator::writing::api_requests::CountRequestsLayer;
use crate::operator::{self, Options};
use crate::runtime::logic_module::{LogicModule, ModuleSource};
use crate::runtime::slot::ModuleSlot;

pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only on a terminal: not in a log file or a collector's pipe.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).init(),
        LogFormat::Text => builder.init(),
    }
}

/// `--max-reconcile-steps` when not given: none for the built-in module
/// alone (the Memcached module settles in one step: its next step would
/// only cost module calls), else `DEFAULT_MAX_STEPS`.
fn default_steps(flavor: &Flavor, modules: &[LogicModule]) -> u32 {
    let builtin_alone = match (flavor.builtin, modules) {
        (Some(builtin), [module]) => module.name() == builtin.name,
        _ => false,
    };
    if builtin_alone { 0 } else { DEFAULT_MAX_STEPS }
}

/// `run`'s operator on `modules` until `shutdown` (`wasm-operator dev` runs
/// it too, with its own shutdown).
pub async fn run_operator(
    flavor: &Flavor,
    modules: Vec<LogicModule>,
    args: RunArgs,
    allow_precompiled: bool,
    default_identity: ModuleIdentityArg,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    if !args.metrics_secure && args.metrics_cert_dir.is_some() {
        bail!("--metrics-cert-dir needs --metrics-secure=true (plain HTTP uses no certificate)");
    }
    let metrics = Arc::new(Metrics::default());
    let config =
        kube::Config::infer().await.context("finding the cluster (in-cluster, KUBECONFIG or ~/.kube/config)")?;
    let client = kube::client::ClientBuilder::try_from(config)
        .context("building the API client")?
        .with_layer(&CountRequestsLayer::new(metrics.clone()))
        .build();
    let leader_election = args.leader_elect.then(|| {
        let namespace = args.leader_election_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
        let lease = args.leader_election_id.clone().unwrap_or_else(|| flavor.binary.to_owned());
        LeaderElectionOptions::new(namespace, lease, identity())
    });
    let options = Options {
        namespace: args.namespace,
        metrics_address: args.metrics_bind_address,
        metrics_secure: args
            .metrics_secure
            .then(|| SecureMetrics { cert_dir: args.metrics_cert_dir.clone(), review_cache: ReviewCache::default() }),
        health_address: args.health_probe_bind_address,
        leader_election,
        concurrency: args.concurrency,
        module_call_concurrency: args.module_call_concurrency,
        max_reconcile_steps: args.max_reconcile_steps.unwrap_or_else(|| default_steps(flavor, &modules)),
        resync_period: args.resync_period,
        swap_policy: SwapPolicy {
            dry_run_failures_allowed: args.swap_dry_run_failures_allowed,
            rollback_failures_allowed: args.swap_rollback_failures_allowed,
            watch_window: args.swap_watch_window,
            rollout_per_second: args.swap_rollout_per_second,
            poll_interval: args.module_poll_interval,
            cache_sync_timeout: args.swap_cache_sync_timeout,
        },
        logic_modules: if args.logic_modules {
            Some(LogicModuleOptions {
                registry: Arc::new(args.registry.registry()?),
                poll_interval: args.registry_poll_interval,
            })
        } else {
            None
        },
        record_budget: args.record_budget,
        module_identity: match args.module_identity.unwrap_or(default_identity) {
            ModuleIdentityArg::Operator => ModuleIdentity::Operator,
            ModuleIdentityArg::ServiceAccount => ModuleIdentity::ServiceAccounts {
                namespace: args
                    .module_identity_namespace
                    .clone()
                    .unwrap_or_else(|| client.default_namespace().to_owned()),
                prefix: args.module_identity_prefix.clone(),
            },
        },
    };
    let slots = modules
        .into_iter()
        .map(|module| match module.source() {
            ModuleSource::File(path) if args.watch_modules => {
                let path = path.clone();
                ModuleSlot::watching(module, path, allow_precompiled)
            }
            _ => ModuleSlot::new(module),
        })
        .collect();
    operator::run::run(client, slots, metrics, options, shutdown).await.context("the operator stopped")
}

/// This replica's name in the Lease: the pod's name in a cluster, else
/// host and process, so two local processes differ too.
fn identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME") {
        return pod;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}_{}", std::process::id())
}

/// SIGTERM (kubelet) or SIGINT (a terminal).
pub async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
