//! Secrets the control plane needs: bearer tokens for the static users and the
//! service-account signing key pair. ECDSA P-256 because ring generates it
//! and Go parses ring's PKCS#8 for it (not so for Ed25519's PKCS#8 v2).

use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

use crate::Error;

/// A random bearer token (32 bytes, hex).
pub(crate) fn token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).map_err(|_| Error::Key)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A short random suffix for folder names.
pub(crate) fn suffix() -> Result<String, Error> {
    let mut bytes = [0u8; 6];
    SystemRandom::new().fill(&mut bytes).map_err(|_| Error::Key)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// (private key PEM, public key PEM) for `--service-account-signing-key-file`
/// and `--service-account-key-file`.
pub(crate) fn service_account_key_pair() -> Result<(String, String), Error> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).map_err(|_| Error::Key)?;
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).map_err(|_| Error::Key)?;
    // SubjectPublicKeyInfo = the fixed header for id-ecPublicKey on P-256,
    // followed by the 65-byte uncompressed point ring hands out.
    const SPKI_P256_HEADER: [u8; 26] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48,
        0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ];
    let mut spki = SPKI_P256_HEADER.to_vec();
    spki.extend_from_slice(pair.public_key().as_ref());
    Ok((pem("PRIVATE KEY", pkcs8.as_ref()), pem("PUBLIC KEY", &spki)))
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
