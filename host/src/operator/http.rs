//! The metrics endpoint and the health probes, each on its own address as
//! kubelet and Prometheus expect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::metrics::Metrics;

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

pub async fn serve(
    metrics_address: SocketAddr,
    health_address: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
) -> Result<Servers, BindError> {
    let metrics_router = Router::new().route("/metrics", get(metrics_text)).with_state(metrics);
    let health_router =
        Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready)).with_state(readiness);
    let (metrics_address, metrics_task) = spawn(metrics_address, metrics_router).await?;
    let (health_address, health_task) = spawn(health_address, health_router).await?;
    tracing::info!(%metrics_address, %health_address, "serving /metrics, /healthz and /readyz");
    Ok(Servers { metrics_address, health_address, tasks: vec![metrics_task, health_task] })
}

async fn spawn(address: SocketAddr, router: Router) -> Result<(SocketAddr, JoinHandle<()>), BindError> {
    let listener = TcpListener::bind(address).await.map_err(|source| BindError { address, source })?;
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
