//! Cosign signatures of logic module images, checked against a public key
//! (key-based signing, no transparency log: `cosign sign --key cosign.key
//! --tlog-upload=false`).
//!
//! Cosign keeps an image's signatures in its own repository under the tag
//! `sha256-<hex>.sig` (the image manifest's digest): a manifest whose layers
//! are simple-signing payloads, JSON naming the signed manifest's digest
//! (`critical.image.docker-manifest-digest`), each annotated with its
//! signature (`dev.cosignproject.cosign/signature`, base64 of an ASN.1 DER
//! ECDSA signature over the payload's bytes, hashed with SHA-256). An image
//! is signed when one payload verifies with the key and names its digest.

use base64::Engine as _;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{DerSignature, VerifyingKey};
use p256::pkcs8::DecodePublicKey;

/// The media type of a signature layer (a simple-signing payload).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the payload's signature, base64.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What cosign writes as a payload's `critical.type`.
const PAYLOAD_TYPE: &str = "cosign container image signature";

#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "the public key is not an ECDSA P-256 public key in PEM (`-----BEGIN PUBLIC KEY-----`, what `cosign generate-key-pair` writes to cosign.pub): {problem}"
    )]
    BadPublicKey { problem: String },
    /// The registry could not be read (the OCI client's error: this module
    /// checks signatures and knows no registry).
    #[error("reading the signatures of {reference}: {error}")]
    Fetch { reference: String, error: Box<dyn std::error::Error + Send + Sync> },
    #[error("{reference} is not signed: its repository has no {tag} (sign it with `cosign sign --key cosign.key`)")]
    Unsigned { reference: String, tag: String },
    #[error("{reference}: no signature verifies with the public key ({})", problems.join("; "))]
    Invalid { reference: String, problems: Vec<String> },
    #[error("{reference}: the signature that verifies with the public key signs {signed}, not this image's {expected}")]
    DigestMismatch { reference: String, expected: String, signed: String },
}

/// Every [`SignatureError::reason`]: a refusal for one of these may pass
/// once the image is signed, or its resource names another key.
pub const REASONS: [&str; 5] =
    ["BadPublicKey", "SignatureFetchFailed", "Unsigned", "SignatureInvalid", "SignatureDigestMismatch"];

impl SignatureError {
    /// A short, stable name for what went wrong (condition reasons, events).
    pub fn reason(&self) -> &'static str {
        match self {
            SignatureError::BadPublicKey { .. } => "BadPublicKey",
            SignatureError::Fetch { .. } => "SignatureFetchFailed",
            SignatureError::Unsigned { .. } => "Unsigned",
            SignatureError::Invalid { .. } => "SignatureInvalid",
            SignatureError::DigestMismatch { .. } => "SignatureDigestMismatch",
        }
    }
}

/// One signature layer: the payload's bytes and the annotation's signature
/// (`None` when the layer has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedPayload {
    pub payload: Vec<u8>,
    pub signature: Option<String>,
}

/// The tag cosign stores the signatures of the manifest `digest`
/// (`sha256:<hex>`) under.
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replacen(':', "-", 1))
}

/// A public key signatures are checked against.
#[derive(Clone, Debug)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    pub fn from_pem(pem: &str) -> Result<Self, SignatureError> {
        VerifyingKey::from_public_key_pem(pem.trim())
            .map(Self)
            .map_err(|error| SignatureError::BadPublicKey { problem: error.to_string() })
    }

    /// Ok when one of `signatures` (the layers under the image's signature
    /// tag) verifies with this key and signs `manifest_digest`.
    /// `reference` names the image in errors.
    pub fn verify(
        &self,
        reference: &str,
        manifest_digest: &str,
        signatures: &[SignedPayload],
    ) -> Result<(), SignatureError> {
        if signatures.is_empty() {
            return Err(SignatureError::Unsigned {
                reference: reference.to_owned(),
                tag: signature_tag(manifest_digest),
            });
        }
        let mut problems = Vec::new();
        let mut signed_other = None;
        for (index, signed) in signatures.iter().enumerate() {
            let checked = self.check(signed).and_then(|()| signed_digest(&signed.payload));
            match checked {
                Ok(digest) if digest == manifest_digest => return Ok(()),
                Ok(digest) => signed_other = Some(digest),
                Err(problem) => problems.push(format!("signature {}: {problem}", index + 1)),
            }
        }
        match signed_other {
            Some(signed) => Err(SignatureError::DigestMismatch {
                reference: reference.to_owned(),
                expected: manifest_digest.to_owned(),
                signed,
            }),
            None => Err(SignatureError::Invalid { reference: reference.to_owned(), problems }),
        }
    }

    /// Whether the layer's signature is this key's over its payload.
    fn check(&self, signed: &SignedPayload) -> Result<(), String> {
        let encoded = signed.signature.as_deref().ok_or_else(|| format!("no {SIGNATURE_ANNOTATION} annotation"))?;
        let der = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|error| format!("its signature is not base64: {error}"))?;
        let signature = DerSignature::from_bytes(&der)
            .map_err(|_| "its signature is not an ASN.1 DER ECDSA signature".to_owned())?;
        self.0.verify(&signed.payload, &signature).map_err(|_| "made with another key, or over other bytes".to_owned())
    }
}

/// The manifest digest a simple-signing payload signs.
fn signed_digest(payload: &[u8]) -> Result<String, String> {
    let json: serde_json::Value =
        serde_json::from_slice(payload).map_err(|error| format!("its payload is not JSON: {error}"))?;
    let critical = &json["critical"];
    if critical["type"] != PAYLOAD_TYPE {
        return Err(format!("its payload's critical.type is {}, not {PAYLOAD_TYPE:?}", critical["type"]));
    }
    critical["image"]["docker-manifest-digest"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "its payload has no critical.image.docker-manifest-digest".to_owned())
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer;
    use p256::pkcs8::{EncodePublicKey, LineEnding};

    use super::*;

    const DIGEST: &str = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_slice(&[seed; 32]).expect("a P-256 scalar")
    }

    fn public(key: &SigningKey) -> PublicKey {
        let pem = key.verifying_key().to_public_key_pem(LineEnding::LF).expect("a PEM");
        PublicKey::from_pem(&pem).expect("a P-256 key")
    }

    /// A payload in cosign's simple-signing shape.
    fn payload(digest: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "critical": {
                "identity": {"docker-reference": "127.0.0.1:5000/modules/greeting"},
                "image": {"docker-manifest-digest": digest},
                "type": PAYLOAD_TYPE,
            },
            "optional": null,
        }))
        .expect("JSON")
    }

    fn signed(key: &SigningKey, payload: Vec<u8>) -> SignedPayload {
        let signature: DerSignature = key.sign(&payload);
        let signature = Some(base64::engine::general_purpose::STANDARD.encode(signature.as_bytes()));
        SignedPayload { payload, signature }
    }

    /// What `cosign sign --key cosign.key --tlog-upload=false` (v2.6.5)
    /// wrote for a module pushed to a loopback registry: the key pair's
    /// cosign.pub, and the one layer under the signature tag.
    const COSIGN_PUB: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE5CTnCkRf7xvbf3VudCOcDKH7HqO7
5/yW9Y5azQKvZUWjNXcGybaZQv0L0h30KHRQbxIYACNPkPnwU5ovYFoQbQ==
-----END PUBLIC KEY-----
";
    const COSIGN_DIGEST: &str = "sha256:525b0220f0ff964e1d1ed3d22f4f622d39b5acc982d9bff5c106439b4a9bf706";
    const COSIGN_PAYLOAD: &str = r#"{"critical":{"identity":{"docker-reference":"127.0.0.1:5077/modules/greeting"},"image":{"docker-manifest-digest":"sha256:525b0220f0ff964e1d1ed3d22f4f622d39b5acc982d9bff5c106439b4a9bf706"},"type":"cosign container image signature"},"optional":null}"#;
    const COSIGN_SIGNATURE: &str =
        "MEUCIF7QD5fU8wwztHSnWUvgRSDqESJueUv+k8zvdz9uFrI9AiEAwriCj6shz0KvqFDryJbSlrDvNMRzjPcP2z2PfbrnaOY=";

    #[test]
    fn a_signature_cosign_wrote_verifies_with_its_public_key() {
        let cosign = PublicKey::from_pem(COSIGN_PUB).expect("cosign.pub");
        let layer =
            SignedPayload { payload: COSIGN_PAYLOAD.as_bytes().to_vec(), signature: Some(COSIGN_SIGNATURE.into()) };
        assert!(cosign.verify("greeting", COSIGN_DIGEST, std::slice::from_ref(&layer)).is_ok());
        let other_image = cosign.verify("greeting", DIGEST, std::slice::from_ref(&layer)).expect_err("another image");
        assert_eq!(other_image.reason(), "SignatureDigestMismatch");
        let other_key = public(&key(3)).verify("greeting", COSIGN_DIGEST, &[layer]).expect_err("another key");
        assert_eq!(other_key.reason(), "SignatureInvalid");
    }

    #[test]
    fn the_signature_tag_is_the_digest_with_a_dash() {
        assert_eq!(signature_tag("sha256:abc"), "sha256-abc.sig");
    }

    #[test]
    fn a_payload_signed_by_the_key_for_the_digest_verifies() {
        let signer = key(1);
        let other = signed(&key(2), payload(DIGEST));
        // One good signature among others is enough.
        assert!(public(&signer).verify("m", DIGEST, &[other, signed(&signer, payload(DIGEST))]).is_ok());
    }

    #[test]
    fn no_signature_is_unsigned() {
        let error = public(&key(1)).verify("m", DIGEST, &[]).expect_err("unsigned");
        assert_eq!(error.reason(), "Unsigned");
        assert!(error.to_string().contains(&signature_tag(DIGEST)), "{error}");
    }

    #[test]
    fn another_keys_signature_is_invalid() {
        let error = public(&key(1)).verify("m", DIGEST, &[signed(&key(2), payload(DIGEST))]).expect_err("invalid");
        assert_eq!(error.reason(), "SignatureInvalid");
        assert!(error.to_string().contains("another key"), "{error}");
    }

    #[test]
    fn a_changed_payload_is_invalid() {
        let signer = key(1);
        let mut tampered = signed(&signer, payload(DIGEST));
        tampered.payload = payload(&DIGEST.replace("2c26", "0000"));
        let error = public(&signer).verify("m", DIGEST, &[tampered]).expect_err("invalid");
        assert_eq!(error.reason(), "SignatureInvalid");
    }

    #[test]
    fn a_signature_for_another_image_is_a_digest_mismatch() {
        let signer = key(1);
        let other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let error = public(&signer).verify("m", DIGEST, &[signed(&signer, payload(other))]).expect_err("mismatch");
        assert_eq!(error.reason(), "SignatureDigestMismatch");
        assert!(error.to_string().contains(other), "{error}");
    }

    #[test]
    fn malformed_layers_say_what_is_wrong() {
        let signer = key(1);
        let problem = |layer: SignedPayload| public(&signer).verify("m", DIGEST, &[layer]).expect_err("invalid");
        let missing = problem(SignedPayload { payload: payload(DIGEST), signature: None });
        assert!(missing.to_string().contains(SIGNATURE_ANNOTATION), "{missing}");
        let not_base64 = problem(SignedPayload { payload: payload(DIGEST), signature: Some("*".into()) });
        assert!(not_base64.to_string().contains("not base64"), "{not_base64}");
        let not_der = problem(SignedPayload { payload: payload(DIGEST), signature: Some("AAAA".into()) });
        assert!(not_der.to_string().contains("DER"), "{not_der}");
        let not_json = problem(signed(&signer, b"not json".to_vec()));
        assert!(not_json.to_string().contains("not JSON"), "{not_json}");
        let no_digest =
            problem(signed(&signer, br#"{"critical":{"type":"cosign container image signature"}}"#.to_vec()));
        assert!(no_digest.to_string().contains("docker-manifest-digest"), "{no_digest}");
    }

    #[test]
    fn every_reason_is_listed() {
        let errors = [
            SignatureError::BadPublicKey { problem: String::new() },
            SignatureError::Fetch { reference: String::new(), error: "unreachable".into() },
            SignatureError::Unsigned { reference: String::new(), tag: String::new() },
            SignatureError::Invalid { reference: String::new(), problems: Vec::new() },
            SignatureError::DigestMismatch { reference: String::new(), expected: String::new(), signed: String::new() },
        ];
        let reasons: Vec<_> = errors.iter().map(SignatureError::reason).collect();
        assert_eq!(reasons, REASONS);
    }

    #[test]
    fn a_key_that_is_not_a_p256_public_key_in_pem_is_refused() {
        for pem in ["", "not a key", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"] {
            let error = PublicKey::from_pem(pem).expect_err("refused");
            assert_eq!(error.reason(), "BadPublicKey");
            assert!(error.to_string().contains("cosign generate-key-pair"), "{error}");
        }
    }
}
