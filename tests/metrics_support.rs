//! Scraping the operator's /metrics as Prometheus does: HTTPS accepting any
//! certificate (`insecureSkipVerify`) and telling which one it was shown, or
//! plain HTTP; a ServiceAccount's bearer token from the TokenRequest API; a
//! binding to deploy/'s `metrics-reader` ClusterRole.

#![allow(dead_code)]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// What an HTTP(S) GET got back.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// The server's certificate (DER), over HTTPS.
    pub certificate: Option<Vec<u8>>,
}

/// The SHA-256 of a DER certificate, in hex.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect()
}

/// Accepts any certificate, remembering it.
#[derive(Debug)]
struct AcceptAny {
    seen: Mutex<Option<Vec<u8>>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

fn io_error(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(error.to_string())
}

/// GET `path` over HTTPS with an optional bearer token.
pub async fn https_get(address: &str, path: &str, token: Option<&str>) -> std::io::Result<Reply> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(AcceptAny { seen: Mutex::new(None), provider: provider.clone() });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(io_error)?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    let stream = TcpStream::connect(address).await?;
    let name = ServerName::try_from("localhost").map_err(io_error)?;
    let connect = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, stream);
    let mut stream = tokio::time::timeout(Duration::from_secs(10), connect).await.map_err(io_error)??;
    let (status, body) = exchange(&mut stream, address, path, token).await?;
    let certificate = verifier.seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    Ok(Reply { status, body, certificate })
}

/// GET `path` over plain HTTP. A server speaking TLS there answers no HTTP:
/// an error, or status 0.
pub async fn http_get(address: &str, path: &str, token: Option<&str>) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(address).await?;
    let (status, body) = exchange(&mut stream, address, path, token).await?;
    Ok(Reply { status, body, certificate: None })
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    address: &str,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let authorization = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut response = Vec::new();
    let read =
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await.map_err(io_error)?;
    // A TLS peer closing without close_notify: what was read counts.
    if let Err(error) = read
        && (response.is_empty() || error.kind() != std::io::ErrorKind::UnexpectedEof)
    {
        return Err(error);
    }
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = if response.starts_with("HTTP/1.") {
        response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    } else {
        0
    };
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

/// Creates the ServiceAccount `name` (if missing) and returns a fresh
/// token for it (an hour long), as a projected token would be.
pub async fn service_account_token(admin: &Client, namespace: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    if accounts.get_opt(name).await.expect("reading a ServiceAccount").is_none() {
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("a ServiceAccount");
        accounts.create(&PostParams::default(), &account).await.expect("creating a ServiceAccount");
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let answered: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .expect("a token from the TokenRequest API");
    answered.status.and_then(|status| status.token).expect("a token in the TokenRequest's status")
}

/// deploy/'s metrics-reader ClusterRole, applied, and bound to the
/// ServiceAccount `namespace/name` by a ClusterRoleBinding `binding`.
pub async fn bind_metrics_reader(plane: &control_plane::ControlPlane, binding: &str, namespace: &str, name: &str) {
    bind_cluster_role(plane, "deploy/rbac/metrics_reader_role.yaml", binding, namespace, name).await;
}

/// The ClusterRole of `role_file` (relative to the repository), applied,
/// and bound to the ServiceAccount `namespace/name` by a ClusterRoleBinding
/// `binding`.
pub async fn bind_cluster_role(
    plane: &control_plane::ControlPlane,
    role_file: &str,
    binding: &str,
    namespace: &str,
    name: &str,
) {
    let role = memcached_tests::yaml_file(&control_plane::repo_root().join(role_file)).remove(0);
    plane.apply_yaml(&role.to_string()).await.expect("applying a ClusterRole");
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    });
    plane.apply_yaml(&binding.to_string()).await.expect("binding a ClusterRole");
}

/// Whether the API server lets the ServiceAccount `namespace/name` get /metrics now.
pub async fn may_read_metrics(admin: &Client, namespace: &str, name: &str) -> bool {
    may_get(admin, namespace, name, "/metrics").await
}

/// Whether the API server lets the ServiceAccount `namespace/name` get the
/// non-resource URL `path` now.
pub async fn may_get(admin: &Client, namespace: &str, name: &str, path: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{name}")),
            groups: Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]),
            non_resource_attributes: Some(NonResourceAttributes { path: Some(path.into()), verb: Some("get".into()) }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .ok()
        .and_then(|r| r.status)
        .is_some_and(|s| s.allowed)
}
