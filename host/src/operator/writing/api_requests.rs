//! A tower layer on the API client that counts requests by verb, so the
//! metrics (and the end-to-end benchmark) show what the operator costs the
//! API server.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request};
use tower::{Layer, Service};

use crate::operator::endpoints::metrics::Metrics;

#[derive(Clone)]
pub struct CountRequestsLayer {
    metrics: Arc<Metrics>,
}

impl CountRequestsLayer {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for CountRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountRequests { inner, metrics: self.metrics.clone() }
    }
}

#[derive(Clone)]
pub struct CountRequests<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B> Service<Request<B>> for CountRequests<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.metrics.api_request(verb(request.method(), request.uri().query()));
        self.inner.call(request)
    }
}

/// The verb as the API server's audit log names it (a GET is `get` or
/// `list`; without the plural we cannot tell them apart here, so both are `read`).
fn verb(method: &Method, query: Option<&str>) -> &'static str {
    let watching = query.is_some_and(|q| q.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"));
    match *method {
        Method::GET if watching => "watch",
        Method::GET => "read",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_watches_are_told_apart() {
        assert_eq!(verb(&Method::GET, Some("watch=true&resourceVersion=1")), "watch");
        assert_eq!(verb(&Method::GET, Some("limit=500")), "read");
        assert_eq!(verb(&Method::GET, None), "read");
        assert_eq!(verb(&Method::PUT, None), "update");
        assert_eq!(verb(&Method::PATCH, None), "patch");
        assert_eq!(verb(&Method::POST, None), "create");
        assert_eq!(verb(&Method::DELETE, None), "delete");
    }
}
