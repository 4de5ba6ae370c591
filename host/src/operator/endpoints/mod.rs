//! Endpoints: the metrics (HTTPS with token and access review, or plain)
//! and the health probes, with the metrics they serve.

pub mod http;
pub mod metric_labels;
pub mod metrics;
pub mod metrics_auth;
pub mod tls;
