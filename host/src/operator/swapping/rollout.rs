//! How a verified version goes live, as a LogicModule's `spec.rollout`
//! asks, from its plan (`SwapPlan`, computed by `swap_plan.rs`): the gates that hold it until someone approves its digest (a plan
//! that changes too many parents or deletes too many objects, or manual
//! approval for every version), and the canary, the parents it serves
//! alone for its watch window before it serves them all. A module file's
//! versions have no gates and no canary.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::operator::watching::cached_object::CachedObject;
use crate::planning::summary::Summary;

/// How many changed parents the plan names (the summary counts them all):
/// a LogicModule's status stays small at any number of parents.
pub const PARENTS_NAMED: usize = 20;

/// A swap's plan, as the LogicModule's status and events carry it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SwapPlan {
    /// The version planned (its digest) and the one it was planned against.
    pub digest: String,
    pub against: String,
    #[serde(flatten)]
    pub summary: Summary,
    /// The first [`PARENTS_NAMED`] parents it changes, `namespace/name`.
    pub changed_parents: Vec<String>,
    /// When it was planned (the `now` both versions' `status` was told).
    pub planned_at: String,
    /// Parents the serving version reconciles and this one fails on, with
    /// why (`namespace/name: ...`); the plan stops counting past the
    /// failures a dry run allows.
    #[serde(skip)]
    pub regressions: Vec<String>,
}

impl SwapPlan {
    /// One line for an event or a condition: `9 parents (Greeting): ...`.
    pub fn line(&self, parent_kind: &str) -> String {
        self.summary.line(parent_kind)
    }
}

/// The rollout a version is offered with.
#[derive(Clone, Debug, Default)]
pub struct Rollout {
    /// More parents changed than this holds the version for approval.
    pub max_changed_parents: Option<usize>,
    /// More objects deleted than this holds the version for approval.
    pub max_deleted_objects: Option<usize>,
    /// Every version waits for approval.
    pub manual: bool,
    /// The digest someone approved: that version passes every gate.
    pub approved_digest: Option<String>,
    /// The parents a version serves first.
    pub canary: Option<Canary>,
}

impl Rollout {
    /// Why the planned version may not go live before its digest is
    /// approved; empty when it may.
    pub fn held_by(&self, plan: &SwapPlan) -> Vec<String> {
        if self.approved_digest.as_deref() == Some(plan.digest.as_str()) {
            return Vec::new();
        }
        let mut held = Vec::new();
        if self.manual {
            held.push("approval is Manual".to_owned());
        }
        if let Some(max) = self.max_changed_parents
            && plan.summary.changed > max
        {
            held.push(format!("it changes {} parents, maxChangedParents is {max}", plan.summary.changed));
        }
        if let Some(max) = self.max_deleted_objects
            && plan.summary.deleted > max
        {
            held.push(format!("it deletes {} objects, maxDeletedObjects is {max}", plan.summary.deleted));
        }
        held
    }
}

/// The parents a canary serves.
#[derive(Clone, Debug)]
pub enum Canary {
    /// Those whose labels the selector matches.
    Selector(Selector),
    /// This percentage of the parents, each picked by a hash of its
    /// namespace and name: the same parents on every replica and after a
    /// restart, and a parent created meanwhile is picked or not the same way.
    Percent(u8),
}

#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    #[error("spec.rollout.canary.selector: {0}")]
    Selector(String),
    #[error("spec.rollout.canary: give a selector or a percent, not both")]
    Both,
    #[error("spec.rollout.canary.percent: {0} is not between 1 and 100")]
    Percent(i64),
}

impl Canary {
    /// From the spec's `selector` or `percent`; `None` when neither is given.
    pub fn from_spec(selector: Option<&LabelSelector>, percent: Option<i64>) -> Result<Option<Self>, CanaryError> {
        match (selector, percent) {
            (Some(_), Some(_)) => Err(CanaryError::Both),
            (Some(selector), None) => Selector::try_from(selector.clone())
                .map(|selector| Some(Canary::Selector(selector)))
                .map_err(|error| CanaryError::Selector(error.to_string())),
            (None, Some(percent)) => match u8::try_from(percent) {
                Ok(percent @ 1..=100) => Ok(Some(Canary::Percent(percent))),
                _ => Err(CanaryError::Percent(percent)),
            },
            (None, None) => Ok(None),
        }
    }

    /// Whether the canary serves `parent`.
    pub fn selects(&self, parent: &CachedObject) -> bool {
        match self {
            Canary::Selector(selector) => selector.matches(&parent.labels()),
            Canary::Percent(percent) => {
                let namespace = parent.namespace().unwrap_or_default();
                bucket(&namespace, parent.meta().name.as_deref().unwrap_or_default()) < *percent
            }
        }
    }

    /// `the parents labelled app=x`, `10% of the parents`.
    pub fn describe(&self) -> String {
        match self {
            Canary::Selector(selector) => format!("the parents labelled {selector}"),
            Canary::Percent(percent) => format!("{percent}% of the parents"),
        }
    }
}

/// A parent's bucket, 0 to 99: the first eight bytes of the SHA-256 of
/// `namespace/name`.
fn bucket(namespace: &str, name: &str) -> u8 {
    let hash = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    // Below 100: the cast loses nothing.
    (u64::from_be_bytes(first) % 100) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planning::summary::Summary;

    fn plan(changed: usize, deleted: usize) -> SwapPlan {
        SwapPlan {
            digest: "sha256:bb".into(),
            summary: Summary { parents: 10, changed, deleted, ..Summary::default() },
            ..SwapPlan::default()
        }
    }

    #[test]
    fn gates_hold_a_version_until_its_digest_is_approved() {
        let open = Rollout::default();
        assert!(open.held_by(&plan(10, 10)).is_empty(), "no gate: as before");
        let gated = Rollout { max_changed_parents: Some(3), max_deleted_objects: Some(0), ..Rollout::default() };
        assert!(gated.held_by(&plan(3, 0)).is_empty());
        assert_eq!(gated.held_by(&plan(4, 0)), ["it changes 4 parents, maxChangedParents is 3"]);
        assert_eq!(gated.held_by(&plan(1, 2)), ["it deletes 2 objects, maxDeletedObjects is 0"]);
        let manual = Rollout { manual: true, ..Rollout::default() };
        assert_eq!(manual.held_by(&plan(0, 0)), ["approval is Manual"]);
        let approved = Rollout { approved_digest: Some("sha256:bb".into()), ..gated.clone() };
        assert!(approved.held_by(&plan(9, 9)).is_empty());
        let another = Rollout { approved_digest: Some("sha256:aa".into()), ..gated };
        assert_eq!(another.held_by(&plan(9, 0)).len(), 1, "approving another digest approves nothing here");
    }

    fn parent(namespace: &str, name: &str, labels: serde_json::Value) -> CachedObject {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace, "labels": labels}
        }))
        .expect("an object")
    }

    #[test]
    fn a_canary_selects_by_labels_or_a_stable_share() {
        let selector = LabelSelector {
            match_labels: Some([("canary".to_owned(), "yes".to_owned())].into()),
            ..LabelSelector::default()
        };
        let by_label = Canary::from_spec(Some(&selector), None).expect("valid").expect("a canary");
        assert!(by_label.selects(&parent("a", "x", serde_json::json!({"canary": "yes"}))));
        assert!(!by_label.selects(&parent("a", "x", serde_json::json!({"canary": "no"}))));
        assert!(!by_label.selects(&parent("a", "x", serde_json::json!(null))));

        let tenth = Canary::from_spec(None, Some(10)).expect("valid").expect("a canary");
        let picked =
            (0..1000).filter(|i| tenth.selects(&parent("a", &format!("p-{i}"), serde_json::json!({})))).count();
        assert!((60..=140).contains(&picked), "about a tenth: {picked}");
        let again = (0..1000).filter(|i| tenth.selects(&parent("a", &format!("p-{i}"), serde_json::json!({})))).count();
        assert_eq!(picked, again, "the same parents every time");
        let all = Canary::from_spec(None, Some(100)).expect("valid").expect("a canary");
        assert!(all.selects(&parent("a", "any", serde_json::json!({}))));

        assert!(matches!(Canary::from_spec(None, Some(0)), Err(CanaryError::Percent(0))));
        assert!(matches!(Canary::from_spec(None, Some(101)), Err(CanaryError::Percent(101))));
        assert!(matches!(Canary::from_spec(Some(&selector), Some(5)), Err(CanaryError::Both)));
        assert!(Canary::from_spec(None, None).expect("valid").is_none());
    }
}
