//! The pod template's `memcached.c5c3.io/secret-hash`: a digest of the
//! referenced Secrets' data, so that a changed Secret rolls the pods.

use k8s_openapi::api::core::v1::Secret;
use sha2::{Digest, Sha256};

use crate::api::MemcachedSpec;

/// SHA-256, in hex, over the referenced Secrets that exist, sorted by name,
/// each one's keys sorted, each entry fed as `name \0 key \0 value`. None when
/// no referenced Secret has data.
pub fn secret_hash(spec: &MemcachedSpec, secrets: &[Secret]) -> Option<String> {
    let names = spec.referenced_secret_names();
    let mut hasher = Sha256::new();
    let mut hashed_any = false;
    for name in names {
        // The first Secret of each name counts; hosts pass one per name.
        let Some(secret) = secrets.iter().find(|s| s.metadata.name.as_deref() == Some(name)) else {
            continue;
        };
        for (key, value) in secret.data.iter().flatten() {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(key.as_bytes());
            hasher.update([0]);
            hasher.update(&value.0);
            hashed_any = true;
        }
    }
    hashed_any.then(|| hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 15)] as char]).collect()
}
