//! The metrics endpoint and the health probes, each on its own address as
//! kubelet and Prometheus expect. Probes are plain HTTP; /metrics is HTTPS
//! with every request reviewed by the API server (`metrics_auth.rs`,
//! `tls.rs`), or plain HTTP and open when `secure` is `None`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::get;
use kube::Client;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::operator::metrics::Metrics;
use crate::operator::metrics_auth::{self, MetricsAuth, ReviewCache};
use crate::operator::tls::{self, Certificates, TlsError};

/// /metrics over HTTPS for authenticated and authorized clients only
/// (`--metrics-secure`, the default of the binaries).
#[derive(Clone, Debug, Default)]
pub struct SecureMetrics {
    /// Holds `tls.crt` and `tls.key`, read again when they change; `None`:
    /// a self-signed certificate made at start.
    pub cert_dir: Option<PathBuf>,
    pub review_cache: ReviewCache,
}

/// Ready once every cache has answered its first list.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("binding {address}: {source}")]
pub struct BindError {
    address: SocketAddr,
    source: std::io::Error,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("the metrics certificate: {0}")]
    Tls(#[from] TlsError),
}

pub struct Servers {
    pub metrics_address: SocketAddr,
    pub health_address: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Serves /metrics (through `client`'s reviews when `secure`) and the probes.
pub async fn serve(
    metrics_address: SocketAddr,
    health_address: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    secure: Option<(&SecureMetrics, Client)>,
) -> Result<Servers, ServeError> {
    let metrics_router = Router::new().route("/metrics", get(metrics_text)).with_state(metrics);
    let health_router =
        Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready)).with_state(readiness);
    let scheme = if secure.is_some() { "https" } else { "http" };
    let (metrics_address, metrics_task) = match secure {
        Some((settings, client)) => {
            let certificates = Certificates::load(settings.cert_dir.as_deref())?;
            let auth = Arc::new(MetricsAuth::new(client, settings.review_cache.clone()));
            let router = metrics_router.layer(middleware::from_fn_with_state(auth, metrics_auth::authorize));
            let listener = bind(metrics_address).await?;
            let bound = listener.local_addr().map_err(|source| BindError { address: metrics_address, source })?;
            (bound, tokio::spawn(tls::serve(listener, certificates.server_config()?, certificates, router)))
        }
        None => spawn(metrics_address, metrics_router).await?,
    };
    let (health_address, health_task) = spawn(health_address, health_router).await?;
    tracing::info!(%metrics_address, %health_address, metrics_scheme = scheme, "serving /metrics, /healthz and /readyz");
    Ok(Servers { metrics_address, health_address, tasks: vec![metrics_task, health_task] })
}

async fn bind(address: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(address).await.map_err(|source| BindError { address, source })
}

async fn spawn(address: SocketAddr, router: Router) -> Result<(SocketAddr, JoinHandle<()>), BindError> {
    let listener = bind(address).await?;
    let bound = listener.local_addr().map_err(|source| BindError { address, source })?;
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%bound, error = %error, "HTTP server stopped");
        }
    });
    Ok((bound, task))
}

async fn metrics_text(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], metrics.encode())
}

async fn ready(State(readiness): State<Readiness>) -> impl IntoResponse {
    if readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches are not synced yet")
    }
}
