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
    check_size(what, text)?;
    // The fast path: plain serde_json. Only a failure pays for a second,
    // path-tracking parse that says where the problem is.
    serde_json::from_str(text).or_else(|_| from_json_located(what, text, |_| {}))
}

/// As `from_json`, and also names every field `T` does not know, such as a
/// misspelt `spec.replica` (serde skips those silently). Slower: for
/// off-cluster answers (`render`, `validate`), not the reconcile path.
pub fn from_json_with_unknown<T: DeserializeOwned>(what: &str, text: &str) -> Result<(T, Vec<String>), Error> {
    check_size(what, text)?;
    let mut unknown = Vec::new();
    let value = from_json_located(what, text, |path| unknown.push(path))?;
    Ok((value, unknown))
}

fn check_size(what: &str, text: &str) -> Result<(), Error> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(Error::malformed(
            "",
            format!("{what} is {} bytes, over the {MAX_INPUT_BYTES}-byte limit", text.len()),
        ));
    }
    Ok(())
}

fn from_json_located<T: DeserializeOwned>(
    what: &str,
    text: &str,
    mut note_unknown: impl FnMut(String),
) -> Result<T, Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let mut on_unknown = |path: serde_ignored::Path<'_>| note_unknown(path.to_string().replace(".?", ""));
    let noting = serde_ignored::Deserializer::new(&mut deserializer, &mut on_unknown);
    let value = serde_path_to_error::deserialize(noting).map_err(|err| {
        let path = err.path().to_string();
        let path = if path == "." { String::new() } else { path };
        Error::malformed(path, format!("{what}: {}", err.inner()))
    })?;
    deserializer.end().map_err(|err| Error::malformed("", format!("{what}: {err}")))?;
    Ok(value)
}

/// Serializes an object the module built. Our own types always serialize;
/// the error arm exists so that a bug surfaces as an error, never a trap.
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    // An owned object is a few KiB: one allocation up front instead of the
    // five doublings from serde_json's 128 bytes.
    let mut text = Vec::with_capacity(OUTPUT_CAPACITY);
    serde_json::to_writer(&mut text, value).map_err(|err| Error::Unsupported(format!("serializing output: {err}")))?;
    String::from_utf8(text).map_err(|err| Error::Unsupported(format!("serializing output: {err}")))
}

/// Room for the largest owned object a typical CR makes (its Deployment).
const OUTPUT_CAPACITY: usize = 4096;
