//! The API server's JSON audit log, one event a line (policy: Metadata level,
//! ResponseComplete stage only, so each request is one line).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

use crate::Error;

/// The audit policy the API server runs with.
pub(crate) const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
# One event per request, written when the response is complete.
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
";

/// One request as the API server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// get, list, watch, create, update, patch, delete, deletecollection
    pub verb: String,
    /// user.username: `admin`, `memcached-operator`, `system:...`
    pub user: String,
    /// impersonatedUser.username: whom `user` acted as, if anyone (the
    /// request was authorized as that user).
    pub impersonated_user: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// "" for the core group
    pub api_group: Option<String>,
    /// The response's HTTP status.
    pub code: Option<u16>,
    pub request_uri: String,
    pub user_agent: Option<String>,
}

impl AuditEvent {
    /// A request that changes state.
    pub fn is_write(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
    }
}

/// A position in the audit log: `audit_events_since(mark)` reads only what
/// was logged after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AuditMark(pub(crate) u64);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    stage: String,
    verb: String,
    #[serde(rename = "requestURI")]
    request_uri: String,
    user: RawUser,
    impersonated_user: Option<RawUser>,
    user_agent: Option<String>,
    object_ref: Option<RawObjectRef>,
    response_status: Option<RawStatus>,
}

#[derive(Deserialize)]
struct RawUser {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    api_group: Option<String>,
}

#[derive(Deserialize)]
struct RawStatus {
    code: Option<u16>,
}

/// The end of the log now.
pub(crate) fn mark(path: &Path) -> Result<AuditMark, Error> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(AuditMark(meta.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AuditMark(0)),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

/// Every complete event from `from` on. A last line without its newline is
/// still being written and is left for the next read; a first line the mark
/// falls inside (the file's size was read while the API server was writing
/// an event across pages) began before the mark and is not one of them.
pub(crate) fn read(path: &Path, from: AuditMark) -> Result<Vec<AuditEvent>, Error> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
    };
    let mut bytes = Vec::new();
    // From the byte before the mark, to see whether the mark starts a line.
    file.seek(SeekFrom::Start(from.0.saturating_sub(1)))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let bytes = if from.0 == 0 {
        &bytes[..]
    } else {
        bytes.iter().position(|b| *b == b'\n').map_or(&bytes[..0], |end| &bytes[end + 1..])
    };
    // Cut before decoding: the line being written may end mid-character.
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(&bytes[..0], |end| &bytes[..end]);
    let complete = std::str::from_utf8(complete).map_err(|e| {
        Error::io(format!("reading {}", path.display()), std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    })?;
    let mut events = Vec::new();
    for (index, line) in complete.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let raw: RawEvent = serde_json::from_str(line).map_err(|source| Error::Audit { line: index + 1, source })?;
        if raw.stage != "ResponseComplete" {
            continue;
        }
        let object = raw.object_ref.unwrap_or_default();
        events.push(AuditEvent {
            verb: raw.verb,
            user: raw.user.username,
            impersonated_user: raw.impersonated_user.map(|user| user.username),
            resource: object.resource,
            subresource: object.subresource,
            namespace: object.namespace,
            name: object.name,
            api_group: object.api_group,
            code: raw.response_status.and_then(|s| s.code),
            request_uri: raw.request_uri,
            user_agent: raw.user_agent,
        });
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str) -> String {
        format!(
            r#"{{"stage":"ResponseComplete","verb":"get","user":{{"username":"admin"}},"objectRef":{{"name":"{name}"}},"requestURI":"/x"}}"#
        ) + "\n"
    }

    #[test]
    fn a_mark_inside_a_line_skips_that_line_and_one_at_its_start_keeps_it() {
        let path = std::env::temp_dir().join(format!("audit-mark-{}.log", std::process::id()));
        let (first, second) = (line("first"), line("second"));
        std::fs::write(&path, format!("{first}{second}")).expect("writing");
        let names = |mark: u64| -> Vec<Option<String>> {
            read(&path, AuditMark(mark)).expect("read").into_iter().map(|e| e.name).collect()
        };
        assert_eq!(names(0), [Some("first".to_owned()), Some("second".to_owned())]);
        assert_eq!(names(first.len() as u64), [Some("second".to_owned())]);
        assert_eq!(names(5), [Some("second".to_owned())], "a mark inside the first line");
        assert_eq!(names((first.len() + second.len()) as u64), Vec::<Option<String>>::new());
        std::fs::remove_file(&path).expect("removing");
    }
}
