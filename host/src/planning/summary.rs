//! A plan's counts over every parent, and the one line that says them:
//! what `wasm-operator plan` ends with, and what a LogicModule's status and
//! events carry for a swap.

use std::fmt::Write as _;

use serde::Serialize;

use super::parent_plan::{Action, ParentPlan};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Summary {
    pub parents: usize,
    /// Parents the new version writes something else for.
    pub changed: usize,
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    pub unmanaged: usize,
    pub status_changes: usize,
    /// Parents the new version fails on and the current one does not.
    pub failures: usize,
    /// Parents both versions fail on (not the new version's failures).
    pub both_fail: usize,
}

impl Summary {
    /// Counts `parent` in.
    pub fn add(&mut self, parent: &ParentPlan) {
        self.parents += 1;
        self.changed += usize::from(parent.changed());
        self.created += parent.count(Action::Create);
        self.updated += parent.count(Action::Update);
        self.deleted += parent.count(Action::Delete);
        self.unmanaged += parent.count(Action::Unmanaged);
        self.status_changes += usize::from(!parent.status.is_empty());
        self.failures += usize::from(parent.fails());
        self.both_fail += usize::from(parent.both_fail());
    }

    /// `9 parents (Greeting): 3 changed: ...`, one line.
    pub fn line(&self, kind: &str) -> String {
        summary_line(self, kind).trim_end().to_owned()
    }
}

pub(crate) fn summary_line(summary: &Summary, kind: &str) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut line = format!("{} ({kind}): ", plural(summary.parents, "parent", "parents"));
    if summary.changed == 0 && summary.failures == 0 && summary.both_fail == 0 {
        line.push_str("NEW changes nothing");
    } else {
        let _ = write!(
            line,
            "{} changed: {} to create, {} to update, {} to delete, {} left unmanaged; {}; {}",
            summary.changed,
            summary.created,
            summary.updated,
            summary.deleted,
            summary.unmanaged,
            plural(summary.status_changes, "status change", "status changes"),
            plural(summary.failures, "failure", "failures"),
        );
        if summary.both_fail > 0 {
            let _ = write!(line, " ({} failing with both versions)", summary.both_fail);
        }
    }
    line.push('\n');
    line
}
