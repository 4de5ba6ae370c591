//! The metrics endpoint's certificate (`--metrics-secure`): `tls.crt` and
//! `tls.key` from `--metrics-cert-dir`, read again when either changes on
//! disk, or a self-signed one made at start when no directory is given (as
//! controller-runtime does; Prometheus then skips verification).
//!
//! A change is noticed on the next TLS connection: each one looks at both
//! files' inode, size and modification time (following symlinks, so a
//! Kubernetes Secret volume's swap of its `..data` link counts as a change).
//! A pair that cannot be loaded (half written, key and certificate not
//! matching) is logged and the previous certificate kept.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// A client that connects and never finishes its handshake is let go.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{key} does not go with {cert}: {source}")]
    Key { cert: PathBuf, key: PathBuf, source: rustls::Error },
    #[error("making a self-signed certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    #[error("loading the self-signed certificate: {0}")]
    SelfSignedKey(rustls::Error),
    #[error("TLS settings: {0}")]
    Settings(rustls::Error),
}

/// What identifies a file's content without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    modified_ns: i128,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let metadata = std::fs::metadata(path).ok()?;
        Some(Stamp {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.size(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec()),
        })
    }
}

/// The certificate served now, and where it came from.
pub struct Certificates {
    current: ArcSwap<CertifiedKey>,
    provider: Arc<CryptoProvider>,
    /// `None`: self-signed, never reloaded.
    dir: Option<PathBuf>,
    /// The files' stamps when last looked at (loaded or not).
    seen: Mutex<Option<(Stamp, Stamp)>>,
}

impl fmt::Debug for Certificates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificates").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl Certificates {
    /// The pair in `dir`, or a self-signed certificate for `localhost` and
    /// this host's name when `dir` is `None`. Fails when the pair cannot be
    /// loaded now (a later bad pair only keeps the previous one).
    pub fn load(dir: Option<&Path>) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (current, seen) = match dir {
            Some(dir) => {
                let stamps = stamps(dir);
                (load_pair(dir, &provider)?, stamps)
            }
            None => (self_signed(&provider)?, None),
        };
        Ok(Arc::new(Certificates {
            current: ArcSwap::from_pointee(current),
            provider,
            dir: dir.map(Path::to_path_buf),
            seen: Mutex::new(seen),
        }))
    }

    /// Reads the pair again if either file changed since last looked at.
    pub fn refresh(&self) {
        let Some(dir) = &self.dir else { return };
        let stamps = stamps(dir);
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if *seen == stamps {
                return;
            }
            *seen = stamps;
        }
        match load_pair(dir, &self.provider) {
            Ok(pair) => {
                self.current.store(Arc::new(pair));
                tracing::info!(dir = %dir.display(), "metrics certificate reloaded");
            }
            Err(error) => {
                tracing::warn!(dir = %dir.display(), error = %error, "metrics certificate not reloaded; serving the previous one");
            }
        }
    }

    /// The end-entity certificate served now (DER).
    pub fn current(&self) -> Option<CertificateDer<'static>> {
        self.current.load().cert.first().cloned()
    }

    /// TLS settings serving whatever certificate is current.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Settings)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Serves `router` over HTTPS (HTTP/1.1) on every connection `listener`
/// accepts, each handshake with the certificate current then. Runs until
/// aborted.
pub async fn serve(listener: TcpListener, config: Arc<ServerConfig>, certificates: Arc<Certificates>, router: Router) {
    let acceptor = TlsAcceptor::from(config);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, say: wait rather than spin.
                tracing::warn!(error = %error, "metrics: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let certificates = certificates.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            certificates.refresh();
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, error = %error, "metrics: TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "metrics: TLS handshake timed out");
                    return;
                }
            };
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%peer, error = %error, "metrics: connection ended with an error");
            }
        });
    }
}

fn stamps(dir: &Path) -> Option<(Stamp, Stamp)> {
    Some((Stamp::of(&dir.join(CERT_FILE))?, Stamp::of(&dir.join(KEY_FILE))?))
}

fn load_pair(dir: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let cert_path = dir.join(CERT_FILE);
    let key_path = dir.join(KEY_FILE);
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Read { path: cert_path.clone(), source })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: cert_path });
    }
    let key =
        PrivateKeyDer::from_pem_file(&key_path).map_err(|source| TlsError::Read { path: key_path.clone(), source })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| TlsError::Key {
        cert: cert_path,
        key: key_path,
        source,
    })
}

fn self_signed(provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let mut names = vec!["localhost".to_owned()];
    if let Ok(host) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let host = host.trim();
        if !host.is_empty() && host != "localhost" {
            names.push(host.to_owned());
        }
    }
    let generated = rcgen::generate_simple_self_signed(names)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    CertifiedKey::from_der(vec![generated.cert.der().clone()], key, provider).map_err(TlsError::SelfSignedKey)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path) -> CertificateDer<'static> {
        let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        std::fs::write(dir.join(CERT_FILE), generated.cert.pem()).expect("writing tls.crt");
        std::fs::write(dir.join(KEY_FILE), generated.signing_key.serialize_pem()).expect("writing tls.key");
        generated.cert.der().clone()
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasm-operator-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        dir
    }

    #[test]
    fn a_changed_pair_is_served_and_a_broken_one_keeps_the_last() {
        let dir = temp_dir("reload");
        let first = write_pair(&dir);
        let certificates = Certificates::load(Some(&dir)).expect("loads");
        assert_eq!(certificates.current(), Some(first.clone()));
        certificates.refresh();
        assert_eq!(certificates.current(), Some(first.clone()), "unchanged files: the same certificate");

        let second = write_pair(&dir);
        certificates.refresh();
        assert_eq!(certificates.current(), Some(second.clone()));

        // Only the certificate replaced: the key does not match it.
        let third = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        std::fs::write(dir.join(CERT_FILE), third.cert.pem()).expect("writing tls.crt");
        certificates.refresh();
        assert_eq!(certificates.current(), Some(second), "a mismatched pair is not served");
        std::fs::remove_dir_all(&dir).expect("cleaning up");
    }

    #[test]
    fn a_missing_or_mismatched_pair_fails_at_start() {
        let dir = temp_dir("missing");
        assert!(matches!(Certificates::load(Some(&dir)), Err(TlsError::Read { .. })));
        write_pair(&dir);
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        std::fs::write(dir.join(KEY_FILE), other.signing_key.serialize_pem()).expect("writing tls.key");
        assert!(matches!(Certificates::load(Some(&dir)), Err(TlsError::Key { .. })), "a key of another certificate");
        std::fs::remove_dir_all(&dir).expect("cleaning up");
    }

    #[test]
    fn without_a_directory_a_self_signed_certificate() {
        let certificates = Certificates::load(None).expect("a self-signed certificate");
        assert!(certificates.current().is_some());
        certificates.server_config().expect("TLS settings");
    }
}
