//! Who may read /metrics (`--metrics-secure`), decided by the API server as
//! controller-runtime's `filters.WithAuthenticationAndAuthorization` does:
//! the request's bearer token goes to a TokenReview (authentication.k8s.io/v1),
//! the user it names to a SubjectAccessReview (authorization.k8s.io/v1) for
//! the non-resource URL and the request's verb (`get` on `/metrics`, which
//! the `metrics-reader` ClusterRole grants). No token or a token the API
//! server rejects: 401; a user not allowed: 403; neither says why.
//!
//! Both answers are cached for a while, keyed by a SHA-256 of the token
//! (resp. of the review's spec), in maps of bounded size, so a Prometheus
//! scraping every few seconds costs two API calls per TTL, not per scrape.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// How long review answers are kept, and how many.
#[derive(Clone, Debug)]
pub struct ReviewCache {
    /// A token the TokenReview accepted (controller-runtime: 1 min).
    pub authenticated_ttl: Duration,
    /// A token it rejected.
    pub unauthenticated_ttl: Duration,
    /// A SubjectAccessReview that allowed (controller-runtime: 5 min).
    pub allowed_ttl: Duration,
    /// One that did not (controller-runtime: 30 s).
    pub denied_ttl: Duration,
    /// Entries per cache; the soonest to expire go first when full.
    pub max_entries: usize,
}

impl Default for ReviewCache {
    /// Shorter than controller-runtime's for an allowed user, so a removed
    /// binding or a revoked token stops scraping within a minute.
    fn default() -> Self {
        ReviewCache {
            authenticated_ttl: Duration::from_secs(60),
            unauthenticated_ttl: Duration::from_secs(10),
            allowed_ttl: Duration::from_secs(60),
            denied_ttl: Duration::from_secs(10),
            max_entries: 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("creating a TokenReview: {0}")]
    TokenReview(#[source] Box<kube::Error>),
    #[error("creating a SubjectAccessReview: {0}")]
    AccessReview(#[source] Box<kube::Error>),
    #[error("the API server answered a {0} without a status")]
    NoStatus(&'static str),
}

/// What a request may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No bearer token, or one the API server does not accept: 401.
    Unauthenticated,
    /// A user the API server does not allow: 403.
    Forbidden,
}

type Key = [u8; 32];

/// A map whose entries expire, holding at most `max` of them.
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
    max: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> TtlCache<K, V> {
    fn new(max: usize) -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()), max }
    }

    fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() || self.max == 0 {
            return;
        }
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.max && !entries.contains_key(&key) {
            entries.retain(|_, (expires, _)| *expires > now);
        }
        while entries.len() >= self.max && !entries.contains_key(&key) {
            // Full of live entries: drop the one that would expire first.
            let Some(soonest) = entries.iter().min_by_key(|(_, (expires, _))| *expires).map(|(k, _)| k.clone()) else {
                break;
            };
            entries.remove(&soonest);
        }
        entries.insert(key, (now + ttl, value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// Asks the API server who a token is and what it may do, and remembers.
pub struct MetricsAuth {
    client: Client,
    settings: ReviewCache,
    /// token hash -> the user, or `None` for a rejected token
    users: TtlCache<Key, Option<UserInfo>>,
    /// review spec hash -> allowed
    decisions: TtlCache<Key, bool>,
}

impl MetricsAuth {
    pub fn new(client: Client, settings: ReviewCache) -> Self {
        let max = settings.max_entries;
        MetricsAuth { client, settings, users: TtlCache::new(max), decisions: TtlCache::new(max) }
    }

    /// Whether a request with this bearer token may `verb` the `path`.
    pub async fn decide(&self, token: Option<&str>, verb: &str, path: &str) -> Result<Decision, ReviewError> {
        let Some(token) = token else { return Ok(Decision::Unauthenticated) };
        let Some(user) = self.user(token).await? else { return Ok(Decision::Unauthenticated) };
        let spec = SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some(verb.to_owned()),
            }),
            resource_attributes: None,
        };
        let key = match serde_json::to_vec(&spec) {
            Ok(bytes) => hash(&bytes),
            // Cannot happen for these types; decide without the cache.
            Err(_) => return self.access_review(spec).await.map(decision),
        };
        if let Some(allowed) = self.decisions.get(&key) {
            return Ok(decision(allowed));
        }
        let allowed = self.access_review(spec).await?;
        let ttl = if allowed { self.settings.allowed_ttl } else { self.settings.denied_ttl };
        self.decisions.insert(key, allowed, ttl);
        Ok(decision(allowed))
    }

    async fn user(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        let key = hash(token.as_bytes());
        if let Some(user) = self.users.get(&key) {
            return Ok(user);
        }
        let review = TokenReview {
            spec: TokenReviewSpec { token: token.to_owned(), audiences: None },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError::TokenReview(Box::new(e)))?;
        let status = reviewed.status.ok_or(ReviewError::NoStatus("TokenReview"))?;
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => Some(user),
            _ => {
                tracing::debug!(error = status.error.as_deref().unwrap_or(""), "metrics: a token was not accepted");
                None
            }
        };
        let ttl = if user.is_some() { self.settings.authenticated_ttl } else { self.settings.unauthenticated_ttl };
        self.users.insert(key, user.clone(), ttl);
        Ok(user)
    }

    async fn access_review(&self, spec: SubjectAccessReviewSpec) -> Result<bool, ReviewError> {
        let user = spec.user.clone().unwrap_or_default();
        let review = SubjectAccessReview { spec, ..SubjectAccessReview::default() };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| ReviewError::AccessReview(Box::new(e)))?;
        let status = reviewed.status.ok_or(ReviewError::NoStatus("SubjectAccessReview"))?;
        if !status.allowed {
            tracing::debug!(user, reason = status.reason.as_deref().unwrap_or(""), "metrics: a user was not allowed");
        }
        Ok(status.allowed)
    }
}

fn decision(allowed: bool) -> Decision {
    if allowed { Decision::Allowed } else { Decision::Forbidden }
}

fn hash(bytes: &[u8]) -> Key {
    Sha256::digest(bytes).into()
}

/// The token of an `Authorization: Bearer <token>` header, as Kubernetes
/// reads it (the scheme in any case, a non-empty token).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// axum middleware: lets a request through only when the API server allows
/// it; answers 401, 403 or (the reviews failing) 500 with no detail.
pub async fn authorize(State(auth): State<Arc<MetricsAuth>>, request: Request, next: Next) -> Response {
    let verb = request.method().as_str().to_ascii_lowercase();
    let path = request.uri().path().to_owned();
    match auth.decide(bearer_token(request.headers()), &verb, &path).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response(),
        Ok(Decision::Forbidden) => (StatusCode::FORBIDDEN, "Forbidden\n").into_response(),
        Err(error) => {
            tracing::warn!(error = %error, path, "metrics: cannot review a request");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_tokens_are_read_as_kubernetes_reads_them() {
        let read = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).expect("a header value"));
            bearer_token(&headers).map(str::to_owned)
        };
        assert_eq!(read("Bearer abc"), Some("abc".to_owned()));
        assert_eq!(read("bearer abc"), Some("abc".to_owned()));
        assert_eq!(read("  Bearer abc  "), Some("abc".to_owned()));
        assert_eq!(read("Bearer abc extra"), Some("abc".to_owned()));
        assert_eq!(read("Basic abc"), None);
        assert_eq!(read("Bearer"), None);
        assert_eq!(read("Bearer  "), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let cache = TtlCache::new(3);
        cache.insert(1, "one", Duration::from_secs(60));
        assert_eq!(cache.get(&1), Some("one"));
        cache.insert(2, "short", Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(cache.get(&2), None, "expired");
        cache.insert(3, "zero", Duration::ZERO);
        assert_eq!(cache.get(&3), None, "a zero TTL caches nothing");

        for key in 10..20 {
            cache.insert(key, "many", Duration::from_secs(60 + key));
        }
        assert_eq!(cache.len(), 3);
        // The ones that expire last stay.
        assert_eq!(cache.get(&19), Some("many"));
        assert_eq!(cache.get(&18), Some("many"));
        assert_eq!(cache.get(&17), Some("many"));
        assert_eq!(cache.get(&1), None);
    }
}
