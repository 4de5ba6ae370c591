//! Logic modules in OCI registries, in the CNCF wasm artifact layout: an
//! image manifest whose config is `application/vnd.wasm.config.v0+json` and
//! whose one layer is the component, `application/wasm`. A pull is pinned by
//! the manifest's digest (checked by the client against the manifest's
//! bytes), and the layer's bytes are checked against the digest the
//! manifest names, so what runs is exactly what was pushed. A module's
//! cosign signatures (`signature`) are read from the same repository.

use std::collections::BTreeMap;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::logic_module::digest;
use super::signature::{PublicKey, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, SignatureError, SignedPayload};

pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The largest module a pull accepts, before downloading it. The Memcached
/// component is ~1 MiB, a Python one ~40 MiB.
pub const MAX_MODULE_BYTES: i64 = 128 << 20;
/// The largest signature payload read (cosign's are a few hundred bytes).
const MAX_PAYLOAD_BYTES: i64 = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("{reference:?} is not an OCI reference: {error}")]
    BadReference { reference: String, error: oci_client::ParseError },
    #[error(
        "{reference} names a tag, not a digest: pin it as {reference}@sha256:<digest> (`wasm-operator push` prints it), or allow tags explicitly"
    )]
    TagWithoutDigest { reference: String },
    #[error("pulling {reference}: {error}")]
    Pull { reference: String, error: oci_client::errors::OciDistributionError },
    #[error("{reference} is not a wasm logic module artifact: {problem}")]
    NotAWasmArtifact { reference: String, problem: String },
    #[error("{reference}: the module is {size} bytes, more than the {MAX_MODULE_BYTES} a module may have")]
    TooLarge { reference: String, size: i64 },
    #[error("{reference}: bytes that hash to {actual}, not the {expected} they were named by")]
    DigestMismatch { reference: String, expected: String, actual: String },
    #[error("pushing {reference}: {error}")]
    Push { reference: String, error: oci_client::errors::OciDistributionError },
}

/// How registries are reached.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Registries (`host:port`) spoken to over plain HTTP; every other one
    /// over HTTPS. An operator-wide decision, never a resource's.
    pub insecure: Vec<String>,
    /// Credentials per registry host; anonymous for the others.
    pub credentials: BTreeMap<String, (String, String)>,
}

/// A pulled module: its bytes, verified, and where exactly they came from.
#[derive(Clone, Debug)]
pub struct Pulled {
    pub bytes: Vec<u8>,
    /// The reference pinned to the manifest's digest (a tag resolved).
    pub pinned: String,
    /// `sha256:<hex>` of the component's bytes (what the host calls the
    /// module's digest).
    pub digest: String,
}

/// A client for the registries modules come from.
pub struct Registry {
    client: Client,
    options: RegistryOptions,
}

impl Registry {
    pub fn new(options: RegistryOptions) -> Self {
        // reqwest is built without a crypto provider of its own: use ring,
        // as kube does. Installing twice is harmless (the first one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if options.insecure.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(options.insecure.clone())
        };
        let client = Client::new(ClientConfig { protocol, ..ClientConfig::default() });
        Self { client, options }
    }

    fn auth(&self, reference: &Reference) -> RegistryAuth {
        match self.options.credentials.get(reference.resolve_registry()) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    /// Pulls the module `reference` names. A reference without a digest is
    /// refused unless `allow_tag` (then the tag is resolved to a digest).
    pub async fn pull(&self, reference: &str, allow_tag: bool) -> Result<Pulled, OciError> {
        let parsed = parse(reference)?;
        if parsed.digest().is_none() && !allow_tag {
            return Err(OciError::TagWithoutDigest { reference: reference.to_owned() });
        }
        let pull_error = |error| pull_error(reference, error);
        let (raw, manifest_digest) = self
            .client
            .pull_manifest_raw(&parsed, &self.auth(&parsed), &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(pull_error)?;
        let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|error| OciError::NotAWasmArtifact {
            reference: reference.to_owned(),
            problem: format!("its manifest is not an OCI image manifest: {error}"),
        })?;
        let layer = wasm_layer(&manifest)
            .map_err(|problem| OciError::NotAWasmArtifact { reference: reference.to_owned(), problem })?;
        if layer.size > MAX_MODULE_BYTES {
            return Err(OciError::TooLarge { reference: reference.to_owned(), size: layer.size });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
        self.client.pull_blob(&parsed, layer, &mut bytes).await.map_err(pull_error)?;
        let layer_digest = digest(&bytes);
        if layer_digest != layer.digest {
            return Err(OciError::DigestMismatch {
                reference: reference.to_owned(),
                expected: layer.digest.clone(),
                actual: layer_digest,
            });
        }
        Ok(Pulled { bytes, pinned: pinned(&parsed, &manifest_digest), digest: layer_digest })
    }

    /// Checks that the image `pinned` (a reference pinned by its manifest's
    /// digest, as [`Pulled::pinned`]) carries a cosign signature by `key`.
    pub async fn verify_signed(&self, pinned: &str, key: &PublicKey) -> Result<(), SignatureError> {
        let fetch = |error| SignatureError::Fetch { reference: pinned.to_owned(), error: Box::new(error) };
        let parsed = parse(pinned).map_err(fetch)?;
        let Some(manifest_digest) = parsed.digest() else {
            return Err(fetch(OciError::TagWithoutDigest { reference: pinned.to_owned() }));
        };
        let signatures = self.signatures(&parsed, manifest_digest).await.map_err(fetch)?;
        key.verify(pinned, manifest_digest, &signatures)
    }

    /// The simple-signing layers under the signature tag of
    /// `manifest_digest` in `image`'s repository; none when there is no
    /// such tag.
    async fn signatures(&self, image: &Reference, manifest_digest: &str) -> Result<Vec<SignedPayload>, OciError> {
        let tag = super::signature::signature_tag(manifest_digest);
        let reference = Reference::with_tag(image.registry().to_owned(), image.repository().to_owned(), tag);
        let name = reference.whole();
        let auth = self.auth(&reference);
        // cosign writes an OCI manifest; older versions a Docker v2 one.
        let accepted = [OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE];
        let raw = match self.client.pull_manifest_raw(&reference, &auth, &accepted).await {
            Ok((raw, _)) => raw,
            Err(error) if not_found(&error) => return Ok(Vec::new()),
            Err(error) => return Err(pull_error(&name, error)),
        };
        let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|error| OciError::NotAWasmArtifact {
            reference: name.clone(),
            problem: format!("its manifest is not an OCI image manifest: {error}"),
        })?;
        let mut signatures = Vec::new();
        for layer in manifest.layers.iter().filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE) {
            if layer.size > MAX_PAYLOAD_BYTES {
                return Err(OciError::TooLarge { reference: name, size: layer.size });
            }
            let mut payload = Vec::new();
            self.client.pull_blob(&reference, layer, &mut payload).await.map_err(|e| pull_error(&name, e))?;
            if digest(&payload) != layer.digest {
                return Err(OciError::DigestMismatch {
                    reference: name,
                    expected: layer.digest.clone(),
                    actual: digest(&payload),
                });
            }
            let signature = layer.annotations.as_ref().and_then(|a| a.get(SIGNATURE_ANNOTATION)).cloned();
            signatures.push(SignedPayload { payload, signature });
        }
        Ok(signatures)
    }

    /// Publishes `component` at `reference` (a tag or a repository) and
    /// answers the reference pinned by the manifest's digest.
    pub async fn push(&self, component: Vec<u8>, reference: &str) -> Result<String, OciError> {
        let parsed = parse(reference)?;
        let layer_digest = digest(&component);
        // The CNCF wasm config: what the layer is, for tools that look.
        let config = serde_json::json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer_digest],
        });
        let config = Config::new(config.to_string().into_bytes(), WASM_CONFIG_MEDIA_TYPE.to_owned(), None);
        let layer = ImageLayer::new(component, WASM_LAYER_MEDIA_TYPE.to_owned(), None);
        let push_error = |error| OciError::Push { reference: reference.to_owned(), error };
        let auth = self.auth(&parsed);
        self.client.push(&parsed, &[layer], config, &auth, None).await.map_err(push_error)?;
        // The digest as the registry computed it over what it stored.
        let manifest_digest = self.client.fetch_manifest_digest(&parsed, &auth).await.map_err(push_error)?;
        Ok(pinned(&parsed, &manifest_digest))
    }
}

/// A pull's failure; bytes that do not hash to their digest (the manifest
/// to the reference's, a layer to the manifest's) say so.
fn pull_error(reference: &str, error: oci_client::errors::OciDistributionError) -> OciError {
    use oci_client::errors::{DigestError, OciDistributionError};
    match error {
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            OciError::DigestMismatch { reference: reference.to_owned(), expected, actual }
        }
        error => OciError::Pull { reference: reference.to_owned(), error },
    }
}

/// The registry has no such manifest (or repository).
fn not_found(error: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError, OciErrorCode};
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) | OciDistributionError::ServerError { code: 404, .. } => {
            true
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|e| matches!(e.code, OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown))
        }
        _ => false,
    }
}

/// `registry/repository@digest`: the reference a LogicModule names.
fn pinned(reference: &Reference, manifest_digest: &str) -> String {
    format!("{}/{}@{manifest_digest}", reference.registry(), reference.repository())
}

fn parse(reference: &str) -> Result<Reference, OciError> {
    reference.parse().map_err(|error| OciError::BadReference { reference: reference.to_owned(), error })
}

/// The one `application/wasm` layer of a wasm artifact's manifest.
fn wasm_layer(manifest: &OciImageManifest) -> Result<&oci_client::manifest::OciDescriptor, String> {
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "its config is {:?}, not {WASM_CONFIG_MEDIA_TYPE:?} (push it with `wasm-operator push`)",
            manifest.config.media_type
        ));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => Ok(layer),
        [layer] => Err(format!("its layer is {:?}, not {WASM_LAYER_MEDIA_TYPE:?}", layer.media_type)),
        layers => {
            Err(format!("it has {} layers; a module is exactly one {WASM_LAYER_MEDIA_TYPE:?} layer", layers.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(config: &str, layers: &[&str]) -> OciImageManifest {
        let config = Config::new(b"{}".to_vec(), config.to_owned(), None);
        let layers: Vec<ImageLayer> = layers
            .iter()
            .map(|media_type| ImageLayer::new(b"\0asm".to_vec(), (*media_type).to_owned(), None))
            .collect();
        OciImageManifest::build(&layers, &config, None)
    }

    #[test]
    fn a_wasm_artifact_is_one_wasm_layer_under_the_wasm_config() {
        let problem = |config: &str, layers: &[&str]| wasm_layer(&artifact(config, layers)).err();
        assert_eq!(problem(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE]), None);
        let container = problem("application/vnd.oci.image.config.v1+json", &[WASM_LAYER_MEDIA_TYPE]);
        assert!(container.is_some_and(|e| e.contains("its config is \"application/vnd.oci.image.config.v1+json\"")));
        let two = problem(WASM_CONFIG_MEDIA_TYPE, &[WASM_LAYER_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE]);
        assert!(two.is_some_and(|e| e.starts_with("it has 2 layers")));
        let tar = problem(WASM_CONFIG_MEDIA_TYPE, &["application/vnd.oci.image.layer.v1.tar"]);
        assert!(tar.is_some_and(|e| e.contains("application/vnd.oci.image.layer.v1.tar")));
    }

    #[test]
    fn a_reference_must_parse() {
        assert!(matches!(parse("127.0.0.1:5000/modules/greeting@sha256:abc"), Err(OciError::BadReference { .. })));
        assert!(parse("127.0.0.1:5000/modules/greeting:v1").is_ok_and(|r| r.digest().is_none()));
    }
}
