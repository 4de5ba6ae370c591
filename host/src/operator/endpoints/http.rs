//! The metrics endpoint and the health probes, each on its own address as
//! kubelet and Prometheus expect. Probes are plain HTTP; /metrics is HTTPS
//! with every request reviewed by the API server (`metrics_auth.rs`,
//! `tls.rs`), or plain HTTP and open when `secure` is `None`. The metrics
//! address also serves `/records` (recorded reconciles as test cases, for
//! `wasm-operator record`), reviewed as /metrics is, for its own path.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::get;
use kube::Client;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::operator::endpoints::metrics::Metrics;
use crate::operator::endpoints::metrics_auth::{self, MetricsAuth, ReviewCache};
use crate::operator::endpoints::tls::{self, Certificates, TlsError};
use crate::operator::recording::export;
use crate::operator::recording::recorder::Records;

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

/// What the endpoints serve.
pub struct Endpoints {
    pub metrics: Arc<Metrics>,
    pub records: Arc<Records>,
    pub readiness: Readiness,
}

/// Serves /metrics and /records (through `client`'s reviews when `secure`)
/// and the probes.
pub async fn serve(
    metrics_address: SocketAddr,
    health_address: SocketAddr,
    endpoints: Endpoints,
    secure: Option<(&SecureMetrics, Client)>,
) -> Result<Servers, ServeError> {
    let Endpoints { metrics, records, readiness } = endpoints;
    let metrics_router = Router::new()
        .route("/metrics", get(metrics_text))
        .with_state(metrics)
        .merge(Router::new().route("/records", get(records_text)).with_state(records));
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

/// `GET /records?module=NAME[&namespace=NS&name=N]`: the module's recorded
/// reconciles (one parent's with namespace and name) as a case file,
/// oldest first; 404 for a module it does not record.
async fn records_text(State(records): State<Arc<Records>>, uri: Uri) -> axum::response::Response {
    let query = RecordsQuery::parse(uri.query().unwrap_or_default());
    let Some(module) = query.module else {
        return (StatusCode::BAD_REQUEST, "give the module: /records?module=NAME[&namespace=NS&name=N]\n")
            .into_response();
    };
    if !records.enabled() {
        return (StatusCode::NOT_FOUND, "recording is off (--record-budget 0)\n").into_response();
    }
    let Some(recorder) = records.get(&module) else {
        let known = records.names().join(", ");
        return (StatusCode::NOT_FOUND, format!("no module {module:?} here (recorded: {known})\n")).into_response();
    };
    let Some(serving) = recorder.serving() else {
        return (StatusCode::NOT_FOUND, format!("module {module:?} serves no version\n")).into_response();
    };
    let parent = query.namespace.zip(query.name);
    // Replaying calls the module: off the async threads.
    let exported = tokio::task::spawn_blocking(move || {
        let held = recorder.records(parent.as_ref().map(|(namespace, name)| (namespace.as_str(), name.as_str())));
        export::export(&held, &serving)
    })
    .await;
    match exported {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, "application/yaml; charset=utf-8")], text).into_response(),
        Ok(Err(error)) => {
            tracing::warn!(module, error = %error, "records: cannot export");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response()
        }
        Err(error) => {
            tracing::warn!(module, error = %error, "records: the export failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n").into_response()
        }
    }
}

/// The query of `/records`: names only (no percent-encoding needed).
#[derive(Debug, Default, PartialEq)]
struct RecordsQuery {
    module: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

impl RecordsQuery {
    fn parse(query: &str) -> Self {
        let mut parsed = RecordsQuery::default();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = Some(value.to_owned()).filter(|v| !v.is_empty());
            match key {
                "module" => parsed.module = value,
                "namespace" => parsed.namespace = value,
                "name" => parsed.name = value,
                _ => {}
            }
        }
        parsed
    }
}

async fn ready(State(readiness): State<Readiness>) -> impl IntoResponse {
    if readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches are not synced yet")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_query_names_a_module_and_maybe_a_parent() {
        let query = RecordsQuery::parse("module=greeting&namespace=team&name=hello&other=1");
        assert_eq!(query.module.as_deref(), Some("greeting"));
        assert_eq!((query.namespace.as_deref(), query.name.as_deref()), (Some("team"), Some("hello")));
        assert_eq!(RecordsQuery::parse(""), RecordsQuery::default());
        assert_eq!(RecordsQuery::parse("module="), RecordsQuery::default());
    }
}
