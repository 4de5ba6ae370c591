//! Another version of a component with the same code: a custom section
//! appended gives it another digest (the soak's and bench-swap's swaps).

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
