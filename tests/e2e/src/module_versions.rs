//! Versions of a module file for the soak's and bench-swap's swaps: the
//! same code under another digest (a custom section appended), and a
//! file's digest as the operator's `module_info` labels it.

use std::path::Path;
use std::process::Command;

/// `bytes` (a component) with a custom section appended: still a valid
/// component, the same code, another digest.
pub fn with_custom_section(mut bytes: Vec<u8>, name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    bytes.push(0);
    leb128(body.len(), &mut bytes);
    bytes.extend_from_slice(&body);
    bytes
}

/// `sha256:<hex>` of the file at `path`.
pub fn digest_of(path: &Path) -> std::io::Result<String> {
    let output = Command::new("sha256sum").arg(path).output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let hex = text.split_whitespace().next().filter(|h| h.len() == 64);
    hex.map(|h| format!("sha256:{h}")).ok_or_else(|| std::io::Error::other(format!("sha256sum printed {text:?}")))
}
