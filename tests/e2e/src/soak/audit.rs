//! Writes to unchanged objects, from the API server's audit log. The soak's
//! policy logs every create, update and patch of the Memcacheds and the
//! kinds they own with its response (managed fields left out), whoever sent
//! it. A write that changes an object makes a new resourceVersion; one that
//! changes nothing (the API server skips storing it) answers with the
//! resourceVersion the object already had, which an earlier write made. So
//! among the successful writes of one object that answered with the same
//! resourceVersion, the first made it and every later one changed nothing.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::SoakError;

/// The audit policy: responses of the writes that matter, metadata of the
/// other writes, nothing of reads (kwok and the controllers read a lot).
pub const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
omitManagedFields: true
rules:
  - level: None
    verbs: [get, list, watch]
  - level: RequestResponse
    verbs: [create, update, patch]
    resources:
      - group: memcached.c5c3.io
        resources: [memcacheds, memcacheds/status]
      - group: apps
        resources: [deployments, deployments/status, deployments/scale]
      - group: \"\"
        resources: [services]
      - group: policy
        resources: [poddisruptionbudgets, poddisruptionbudgets/status]
      - group: autoscaling
        resources: [horizontalpodautoscalers, horizontalpodautoscalers/status]
      - group: monitoring.coreos.com
        resources: [servicemonitors]
      - group: networking.k8s.io
        resources: [networkpolicies]
  - level: Metadata
";

/// What the audit log says of the writes.
#[derive(Debug, Default)]
pub struct Writes {
    /// The operator's successful writes (children and status; events and
    /// the Lease are not in the RequestResponse rules).
    pub by_operator: usize,
    /// Its writes the API server refused, by HTTP code.
    pub refused_by_code: BTreeMap<u16, usize>,
    /// Writes that changed nothing, by user and `resource[/subresource]`.
    pub unchanged: BTreeMap<(String, String), usize>,
    /// Events logged with their response.
    pub logged: usize,
}

impl Writes {
    pub fn unchanged_by(&self, user: &str) -> usize {
        self.unchanged.iter().filter(|((u, _), _)| u == user).map(|(_, n)| n).sum()
    }
}

struct Write {
    received: String,
    user: String,
    resource: String,
}

/// The log at `path` and every file the API server rotated it into
/// before (`audit-<time>.log` beside it: it rotates at 100 MB, which a
/// soak's hour fills several times), oldest first.
pub fn log_files(path: &Path) -> Result<Vec<PathBuf>, SoakError> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| SoakError::io(format!("listing {}", dir.display()), e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{stem}-")) && n.ends_with(".log"))
        })
        .collect();
    // The rotation time in each name sorts as text.
    rotated.sort();
    rotated.push(path.to_owned());
    Ok(rotated)
}

/// Reads the whole log at `path`, its rotated files included.
pub fn analyse(path: &Path, operator: &str) -> Result<Writes, SoakError> {
    let mut writes = Writes::default();
    // (object, resourceVersion answered) -> the writes that answered it.
    let mut answered: HashMap<(String, String), Vec<Write>> = HashMap::new();
    for path in log_files(path)? {
        let file = std::fs::File::open(&path).map_err(|e| SoakError::io(format!("opening {}", path.display()), e))?;
        read_into(&path, file, operator, &mut writes, &mut answered)?;
    }
    for (_, mut group) in answered {
        if group.len() < 2 {
            continue;
        }
        // RFC 3339 with microseconds, all UTC: text order is time order.
        group.sort_by(|a, b| a.received.cmp(&b.received));
        for write in group.into_iter().skip(1) {
            *writes.unchanged.entry((write.user, write.resource)).or_default() += 1;
        }
    }
    Ok(writes)
}

fn read_into(
    path: &Path,
    file: std::fs::File,
    operator: &str,
    writes: &mut Writes,
    answered: &mut HashMap<(String, String), Vec<Write>>,
) -> Result<(), SoakError> {
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| SoakError::io(format!("reading {}", path.display()), e))?;
        if !line.contains("\"level\":\"RequestResponse\"") {
            if line.contains(operator) && is_refused_write(&line) {
                tally_refused(&line, operator, writes);
            }
            continue;
        }
        // A line cut by an API server killed mid-write is skipped.
        let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
        writes.logged += 1;
        let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
        let user = text("/user/username");
        let code = event.pointer("/responseStatus/code").and_then(Value::as_u64).unwrap_or(0);
        if !(200..300).contains(&code) {
            if user == operator {
                *writes.refused_by_code.entry(u16::try_from(code).unwrap_or(0)).or_default() += 1;
            }
            continue;
        }
        let rv = text("/responseObject/metadata/resourceVersion");
        let uid = text("/responseObject/metadata/uid");
        if rv.is_empty() {
            continue;
        }
        if user == operator {
            writes.by_operator += 1;
        }
        let mut resource = text("/objectRef/resource");
        let subresource = text("/objectRef/subresource");
        if !subresource.is_empty() {
            resource = format!("{resource}/{subresource}");
        }
        // A Scale answers with the Deployment's resourceVersion but its own
        // uid: key by the object's name.
        let object = format!(
            "{}/{}/{}/{}",
            text("/objectRef/resource"),
            text("/objectRef/namespace"),
            text("/objectRef/name"),
            if subresource == "scale" { String::new() } else { uid }
        );
        answered.entry((object, rv)).or_default().push(Write {
            received: text("/requestReceivedTimestamp"),
            user,
            resource,
        });
    }
    Ok(())
}

fn is_refused_write(line: &str) -> bool {
    ["\"verb\":\"create\"", "\"verb\":\"update\"", "\"verb\":\"patch\"", "\"verb\":\"delete\""]
        .iter()
        .any(|verb| line.contains(verb))
        && !line.contains("\"code\":200")
        && !line.contains("\"code\":201")
}

fn tally_refused(line: &str, operator: &str, writes: &mut Writes) {
    let Ok(event) = serde_json::from_str::<Value>(line) else { return };
    if event.pointer("/user/username").and_then(Value::as_str) != Some(operator) {
        return;
    }
    let code = event.pointer("/responseStatus/code").and_then(Value::as_u64).unwrap_or(0);
    if !(200..300).contains(&code) {
        *writes.refused_by_code.entry(u16::try_from(code).unwrap_or(0)).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, received: &str, rv: &str, code: u16) -> String {
        serde_json::json!({
            "level": "RequestResponse", "stage": "ResponseComplete", "verb": "update",
            "user": { "username": user }, "requestReceivedTimestamp": received,
            "objectRef": { "resource": "deployments", "namespace": "n", "name": "c" },
            "responseStatus": { "code": code },
            "responseObject": { "metadata": { "resourceVersion": rv, "uid": "u1" } },
        })
        .to_string()
    }

    #[test]
    fn a_write_answering_an_earlier_writes_version_changed_nothing() {
        let dir = std::env::temp_dir().join(format!("soak-audit-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let path = dir.join("audit.log");
        let lines = [
            line("kcm", "2026-01-01T00:00:01.000001Z", "10", 200),
            line("op", "2026-01-01T00:00:02.000001Z", "11", 200),
            line("op", "2026-01-01T00:00:03.000001Z", "11", 200),
            line("op", "2026-01-01T00:00:04.000001Z", "10", 409),
            line("op", "2026-01-01T00:00:00.500000Z", "10", 200),
        ];
        std::fs::write(&path, lines.join("\n") + "\n").expect("the log");
        let writes = analyse(&path, "op").expect("analysed");
        // The op write received first made version 10; kcm's later one answered it too.
        assert_eq!(writes.unchanged_by("op"), 1);
        assert_eq!(writes.unchanged_by("kcm"), 1);
        assert_eq!(writes.by_operator, 3);
        assert_eq!(writes.refused_by_code.get(&409), Some(&1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The API server rotates its log at 100 MB: the files it rotated
    /// count too, a write in one answering a version written in another.
    #[test]
    fn rotated_files_are_read_oldest_first() {
        let dir = std::env::temp_dir().join(format!("soak-audit-rotated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let path = dir.join("audit.log");
        let older = dir.join("audit-2026-01-01T00-00-02.000.log");
        let oldest = dir.join("audit-2026-01-01T00-00-01.000.log");
        std::fs::write(&oldest, line("op", "2026-01-01T00:00:00.500000Z", "10", 200) + "\n").expect("a log");
        std::fs::write(&older, line("op", "2026-01-01T00:00:01.500000Z", "10", 200) + "\n").expect("a log");
        std::fs::write(&path, line("op", "2026-01-01T00:00:02.500000Z", "12", 200) + "\n").expect("a log");
        std::fs::write(dir.join("audit-policy.yaml"), "not a log").expect("a file");
        assert_eq!(log_files(&path).expect("listed"), vec![oldest, older, path.clone()]);
        let writes = analyse(&path, "op").expect("analysed");
        assert_eq!(writes.by_operator, 3);
        assert_eq!(writes.unchanged_by("op"), 1, "the second write answered the first's version");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
