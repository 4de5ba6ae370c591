//! The plan as people read it (text) and as programs read it (JSON), and
//! the exit status.
//!
//! The JSON document (`-o json`), stable:
//!
//! ```json
//! {
//!   "kind": "Plan",
//!   "parentKind": {"apiVersion": "example.c5c3.io/v1", "kind": "Greeting"},
//!   "new":     {"name": "greeting", "version": "0.2.0", "source": "target/greeting-v2.wasm", "digest": "sha256:..."},
//!   "current": {"name": "greeting", "version": "0.1.0", "source": "registry/repo@sha256:...", "digest": "sha256:..."},
//!   "summary": {"parents": 9, "changed": 9, "created": 0, "updated": 9, "deleted": 0, "unmanaged": 0,
//!               "statusChanges": 0, "failures": 0, "bothFail": 0},
//!   "parents": [                       // only parents with a change or an error, in namespace/name order
//!     {"namespace": "team", "name": "hello",
//!      "result": "changed",            // changed | fails (the new version only) | bothFail | unchanged (the current one fails, the new one writes nothing else)
//!      "objects": [{"action": "update", // create | update | delete | unmanaged
//!                   "apiVersion": "v1", "kind": "ConfigMap", "namespace": "team", "name": "hello",
//!                   "live": true,      // the object exists now
//!                   "fields": [{"path": "data.revision", "new": "2"}]}],  // "old"/"new" absent: the field is absent on that side
//!      "status": [{"path": "phase", "old": "...", "new": "..."}],
//!      "newError":     {"kind": "failed", "message": "desired: ..."},     // when the new version fails
//!      "currentError": {"kind": "invalid", "message": "..."}}          // when the current version fails
//!   ]
//! }
//! ```
//!
//! A Secret's `data` and `stringData` values read `(redacted)`.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use crate::planning::fields;
use crate::planning::parent_plan::{Action, Failure, ObjectChange, ParentPlan};
pub use crate::planning::summary::Summary;
use crate::planning::summary::summary_line;
use crate::runtime::logic_module::LogicModule;

/// Exit statuses: no change, failures, changes.
pub const EXIT_NO_CHANGE: u8 = 0;
pub const EXIT_FAILURES: u8 = 1;
pub const EXIT_CHANGES: u8 = 2;

/// One version, as the plan names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VersionInfo {
    pub name: String,
    pub version: String,
    /// The file, or the pinned OCI reference.
    pub source: String,
    pub digest: String,
}

impl VersionInfo {
    pub fn of(module: &LogicModule) -> Self {
        Self {
            name: module.name().to_owned(),
            version: module.manifest().version.clone(),
            source: module.source().to_string(),
            digest: module.digest().to_owned(),
        }
    }

    fn describe(&self) -> String {
        let digest = self.digest.get(..19).unwrap_or(&self.digest);
        format!("{} {} ({}, {digest})", self.name, self.version, self.source)
    }
}

/// The whole plan.
#[derive(Clone, Debug)]
pub struct Plan {
    pub new: VersionInfo,
    pub current: VersionInfo,
    /// `example.c5c3.io/v1`
    pub parent_api_version: String,
    /// `Greeting`
    pub parent_kind: String,
    /// Every parent considered, in namespace and name order.
    pub parents: Vec<ParentPlan>,
}

impl Plan {
    pub fn summary(&self) -> Summary {
        let mut summary = Summary::default();
        for parent in &self.parents {
            summary.add(parent);
        }
        summary
    }

    /// 1 for failures, else 2 for changes, else 0.
    pub fn exit_status(&self) -> u8 {
        let summary = self.summary();
        if summary.failures > 0 {
            EXIT_FAILURES
        } else if summary.changed > 0 {
            EXIT_CHANGES
        } else {
            EXIT_NO_CHANGE
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Plan for {} ({}): NEW {}\n  against CURRENT {}",
            self.parent_kind,
            self.parent_api_version,
            self.new.describe(),
            self.current.describe()
        );
        for parent in self.parents.iter().filter(|p| p.noteworthy()) {
            out.push('\n');
            self.parent_text(parent, &mut out);
        }
        let summary = self.summary();
        out.push('\n');
        out.push_str(&summary_line(&summary, &self.parent_kind));
        out
    }

    fn parent_text(&self, parent: &ParentPlan, out: &mut String) {
        let who = format!("{} {}/{}", self.parent_kind, parent.namespace, parent.name);
        match (&parent.new_error, &parent.current_error) {
            (Some(new), None) => {
                let _ = writeln!(out, "{who}: FAILS with NEW{}", failure_text(new));
                return;
            }
            (Some(new), Some(current)) => {
                let _ = writeln!(
                    out,
                    "{who}: fails with both versions\n  NEW{}\n  CURRENT{}",
                    failure_text(new),
                    failure_text(current)
                );
                return;
            }
            (None, Some(current)) => {
                let _ = writeln!(out, "{who}: CURRENT fails{}\n  NEW does not:", failure_text(current));
            }
            (None, None) => {
                let _ = writeln!(out, "{who}:");
            }
        }
        for object in &parent.objects {
            object_text(object, out);
        }
        if !parent.status.is_empty() {
            let _ = writeln!(out, "  ~ status");
            out.push_str(&fields::lines(&parent.status, "      "));
        }
    }

    pub fn json(&self) -> Value {
        let parents: Vec<Value> = self
            .parents
            .iter()
            .filter(|p| p.noteworthy())
            .map(|parent| {
                let result = if parent.fails() {
                    "fails"
                } else if parent.both_fail() {
                    "bothFail"
                } else if parent.changed() {
                    "changed"
                } else {
                    "unchanged"
                };
                let mut value = serde_json::to_value(parent).unwrap_or_default();
                if let Some(map) = value.as_object_mut() {
                    map.insert("result".into(), result.into());
                }
                value
            })
            .collect();
        json!({
            "kind": "Plan",
            "parentKind": {"apiVersion": self.parent_api_version, "kind": self.parent_kind},
            "new": self.new,
            "current": self.current,
            "summary": self.summary(),
            "parents": parents,
        })
    }
}

/// ` (kind): message`, the kind left out when the message starts with it;
/// a message of several lines indented under the first.
fn failure_text(failure: &Failure) -> String {
    let message = failure.message.trim_end().replace('\n', "\n      ");
    if message.starts_with(failure.kind) { format!(": {message}") } else { format!(" ({}): {message}", failure.kind) }
}

fn object_text(object: &ObjectChange, out: &mut String) {
    let (mark, note) = match (object.action, object.live) {
        (Action::Create, false) => ("+", String::new()),
        (Action::Create, true) => ("+", " (exists: CURRENT deletes it, NEW keeps it)".to_owned()),
        (Action::Update, true) => ("~", String::new()),
        (Action::Update, false) => ("~", " (does not exist: both create it)".to_owned()),
        (Action::Delete, true) => ("-", String::new()),
        (Action::Delete, false) => ("-", " (does not exist: CURRENT creates it, NEW does not)".to_owned()),
        (Action::Unmanaged, _) => {
            ("!", format!(" (NEW does not own {}: it stays as it is, no longer reconciled)", object.kind))
        }
    };
    let _ =
        writeln!(out, "  {mark} {} {} {}/{}{note}", object.action.as_str(), object.kind, object.namespace, object.name);
    out.push_str(&fields::lines(&object.fields, "      "));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::planning::fields::FieldChange;

    fn version(name: &str, version: &str, source: &str) -> VersionInfo {
        VersionInfo {
            name: name.into(),
            version: version.into(),
            source: source.into(),
            digest: "sha256:0123456789abcdef0123".into(),
        }
    }

    fn change(path: &str, old: Option<Value>, new: Option<Value>) -> FieldChange {
        FieldChange { path: path.into(), old, new }
    }

    fn object(action: Action, kind: &str, name: &str, live: bool, fields: Vec<FieldChange>) -> ObjectChange {
        ObjectChange {
            action,
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: "team".into(),
            name: name.into(),
            live,
            fields,
        }
    }

    fn plan(parents: Vec<ParentPlan>) -> Plan {
        Plan {
            new: version("greeting", "0.2.0", "greeting-v2.wasm"),
            current: version("greeting", "0.1.0", "greeting.wasm"),
            parent_api_version: "example.c5c3.io/v1".into(),
            parent_kind: "Greeting".into(),
            parents,
        }
    }

    fn parent(name: &str) -> ParentPlan {
        ParentPlan { namespace: "team".into(), name: name.into(), ..ParentPlan::default() }
    }

    fn sample() -> Plan {
        let changed = ParentPlan {
            objects: vec![
                object(Action::Create, "ServiceAccount", "a", false, vec![]),
                object(Action::Update, "ConfigMap", "a", true, vec![change("data.revision", None, Some(json!("2")))]),
                object(Action::Delete, "ConfigMap", "a-world", true, vec![]),
                object(Action::Unmanaged, "ServiceAccount", "old", true, vec![]),
            ],
            status: vec![change("phase", Some(json!("x")), Some(json!("y")))],
            ..parent("a")
        };
        let fails = ParentPlan {
            new_error: Some(Failure {
                kind: "failed",
                message: "desired: the logic module panicked: at x.rs:1:2:\nno".into(),
            }),
            ..parent("b")
        };
        let both = ParentPlan {
            new_error: Some(Failure { kind: "invalid", message: "invalid: spec.message: must be a string".into() }),
            current_error: Some(Failure { kind: "invalid", message: "spec.message: must be a string".into() }),
            ..parent("c")
        };
        plan(vec![changed, fails, both, parent("d")])
    }

    #[test]
    fn the_text_lists_each_parents_changes_failures_and_a_summary() {
        let text = sample().text();
        assert_eq!(
            text,
            "Plan for Greeting (example.c5c3.io/v1): NEW greeting 0.2.0 (greeting-v2.wasm, sha256:0123456789ab)\n  \
             against CURRENT greeting 0.1.0 (greeting.wasm, sha256:0123456789ab)\n\
             \n\
             Greeting team/a:\n  \
             + create ServiceAccount team/a\n  \
             ~ update ConfigMap team/a\n      \
             data.revision: (none) -> \"2\"\n  \
             - delete ConfigMap team/a-world\n  \
             ! unmanaged ServiceAccount team/old (NEW does not own ServiceAccount: it stays as it is, no longer reconciled)\n  \
             ~ status\n      \
             phase: \"x\" -> \"y\"\n\
             \n\
             Greeting team/b: FAILS with NEW (failed): desired: the logic module panicked: at x.rs:1:2:\n      no\n\
             \n\
             Greeting team/c: fails with both versions\n  \
             NEW: invalid: spec.message: must be a string\n  \
             CURRENT (invalid): spec.message: must be a string\n\
             \n\
             4 parents (Greeting): 1 changed: 1 to create, 1 to update, 1 to delete, 1 left unmanaged; \
             1 status change; 1 failure (1 failing with both versions)\n"
        );
    }

    #[test]
    fn the_exit_status_is_failures_over_changes_over_nothing() {
        assert_eq!(sample().exit_status(), EXIT_FAILURES);
        let changed = ParentPlan { status: vec![change("phase", None, Some(json!("y")))], ..parent("a") };
        assert_eq!(plan(vec![changed, parent("b")]).exit_status(), EXIT_CHANGES);
        let both = ParentPlan {
            new_error: Some(Failure { kind: "failed", message: "x".into() }),
            current_error: Some(Failure { kind: "failed", message: "x".into() }),
            ..parent("c")
        };
        let quiet = plan(vec![parent("a"), both]);
        assert_eq!(quiet.exit_status(), EXIT_NO_CHANGE, "failing with both is not the new version's failure");
        assert!(plan(vec![parent("a")]).text().ends_with("\n1 parent (Greeting): NEW changes nothing\n"));
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let json = sample().json();
        assert_eq!(json["kind"], "Plan");
        assert_eq!(json["parentKind"], json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting"}));
        assert_eq!(json["new"]["version"], "0.2.0");
        assert_eq!(json["current"]["source"], "greeting.wasm");
        assert_eq!(
            json["summary"],
            json!({"parents": 4, "changed": 1, "created": 1, "updated": 1, "deleted": 1, "unmanaged": 1,
                   "statusChanges": 1, "failures": 1, "bothFail": 1})
        );
        let parents = json["parents"].as_array().expect("parents");
        assert_eq!(parents.len(), 3, "the unchanged parent is left out");
        assert_eq!(parents[0]["result"], "changed");
        assert_eq!(
            parents[0]["objects"][1],
            json!({"action": "update", "apiVersion": "v1", "kind": "ConfigMap", "namespace": "team", "name": "a",
                   "live": true, "fields": [{"path": "data.revision", "new": "2"}]})
        );
        assert_eq!(parents[0]["status"], json!([{"path": "phase", "old": "x", "new": "y"}]));
        assert!(parents[0].get("newError").is_none());
        assert_eq!(parents[1]["result"], "fails");
        assert_eq!(parents[1]["newError"]["kind"], "failed");
        assert_eq!(parents[2]["result"], "bothFail");
        assert_eq!(parents[2]["currentError"]["message"], "spec.message: must be a string");
    }
}
