//! Reading JSON from the host: a size cap, and errors that name the field.

use serde::de::DeserializeOwned;

use crate::error::Error;

/// Larger than any object etcd stores (its limit is 1.5 MiB), small enough
/// that a hostile input cannot exhaust the guest's memory.
pub const MAX_INPUT_BYTES: usize = 3 * 1024 * 1024;

/// Parses `text` as `T`. A wrong type or an unknown enum value is reported at
/// its field path; input nested deeper than serde_json's recursion limit (128)
/// is rejected instead of overflowing the stack.
pub fn from_json<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, Error> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(Error::malformed(
            "",
            format!("{what} is {} bytes, over the {MAX_INPUT_BYTES}-byte limit", text.len()),
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." { String::new() } else { path };
        Error::malformed(path, format!("{what}: {}", err.inner()))
    })?;
    deserializer
        .end()
        .map_err(|err| Error::malformed("", format!("{what}: {err}")))?;
    Ok(value)
}

/// Serializes an object the module built. Our own types always serialize;
/// the error arm exists so that a bug surfaces as an error, never a trap.
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value)
        .map_err(|err| Error::Unsupported(format!("serializing output: {err}")))
}
