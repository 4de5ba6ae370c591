//! The LogicModule resource as this host reads and writes it: its spec,
//! its status and the status's conditions.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::Resource;
use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};

use super::api_resource;
use crate::operator::swapping::rollout::SwapPlan;
use crate::operator::swapping::rollout::{Canary, CanaryError, Rollout};
use crate::operator::swapping::shadow::ShadowReport;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub allow_tag: bool,
    /// When set, only an image signed with this key is loaded.
    #[serde(default)]
    pub verification: Option<Verification>,
    /// Gates and canary; absent: every verified version goes live at once.
    #[serde(default)]
    pub rollout: RolloutSpec,
    /// A candidate to run beside the serving version, writing nothing.
    #[serde(default)]
    pub shadow: Option<ShadowSpec>,
}

/// `spec.shadow`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ShadowSpec {
    /// Pinned by digest, as `spec.image`.
    pub image: String,
    /// How long it runs (`30s`, `10m`, `1h`); default 10 minutes.
    #[serde(default = "ten_minutes")]
    pub duration: String,
}

fn ten_minutes() -> String {
    "10m".to_owned()
}

/// `spec.rollout`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    #[serde(default)]
    pub max_changed_parents: Option<i64>,
    #[serde(default)]
    pub max_deleted_objects: Option<i64>,
    /// `Automatic` (the default) or `Manual`.
    #[serde(default)]
    pub approval: Option<String>,
    #[serde(default)]
    pub approved_digest: Option<String>,
    #[serde(default)]
    pub canary: Option<CanarySpec>,
}

/// `spec.rollout.canary`: a label selector or a percentage of the parents.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CanarySpec {
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub percent: Option<i64>,
}

impl RolloutSpec {
    /// The rollout a version is offered with.
    pub fn rollout(&self) -> Result<Rollout, CanaryError> {
        let limit = |n: Option<i64>| n.map(|n| usize::try_from(n).unwrap_or(0));
        let canary = match &self.canary {
            Some(canary) => Canary::from_spec(canary.selector.as_ref(), canary.percent)?,
            None => None,
        };
        Ok(Rollout {
            max_changed_parents: limit(self.max_changed_parents),
            max_deleted_objects: limit(self.max_deleted_objects),
            manual: self.approval.as_deref() == Some("Manual"),
            approved_digest: self.approved_digest.clone(),
            canary,
        })
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// A cosign public key, PEM (cosign.pub).
    pub public_key: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_reference: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconciled_parents: Option<i64>,
    /// While the serving version is on probation; written as null after, so
    /// a merge patch removes it.
    #[serde(default)]
    pub probation: Option<ProbationStatus>,
    /// The plan of the version fetched for this spec, against the version
    /// serving when it was verified; null until there is one.
    #[serde(default)]
    pub plan: Option<SwapPlan>,
    /// While a canary's version serves the parents it picks; null after.
    #[serde(default)]
    pub canary: Option<CanaryStatus>,
    /// What the shadowed version found; null without `spec.shadow`.
    #[serde(default)]
    pub shadow: Option<ShadowStatus>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A canary as the status shows it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    /// sha256 of the version the canary serves.
    pub digest: String,
    /// How many parents it picked when it started.
    pub parents: i64,
    /// When its watch window closes and it serves every parent (RFC 3339).
    pub until: String,
}

/// The serving version's probation: what it would roll back to, and until when.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProbationStatus {
    pub previous_digest: String,
    /// Where the previous version can be pulled (none for a version built
    /// in or given as a file: every replica has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_reference: Option<String>,
    /// When the watch window closes (RFC 3339).
    pub until: String,
}

impl ProbationStatus {
    /// When the window closes, if that is readable.
    pub(super) fn until(&self) -> Option<SystemTime> {
        let until: k8s_openapi::jiff::Timestamp = self.until.parse().ok()?;
        Some(SystemTime::from(until))
    }
}

pub(super) fn rfc3339(time: SystemTime) -> String {
    let time = k8s_openapi::jiff::Timestamp::try_from(time).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(super) fn spec_of(resource: &DynamicObject) -> Spec {
    resource.data.get("spec").and_then(|spec| serde_json::from_value(spec.clone()).ok()).unwrap_or_default()
}

pub(super) fn status_of(resource: &DynamicObject) -> Status {
    resource.data.get("status").and_then(|status| serde_json::from_value(status.clone()).ok()).unwrap_or_default()
}

pub(super) fn condition<'a>(status: &'a Status, type_: &str) -> Option<&'a Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// A condition as it stands now, keeping its transition time when only the
/// message changed.
pub(super) fn new_condition(
    old: &Status,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
) -> Condition {
    let last_transition_time = match condition(old, type_) {
        Some(before) if before.status == status => before.last_transition_time.clone(),
        _ => Time(k8s_openapi::jiff::Timestamp::now()),
    };
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Equal but for when the conditions were computed.
pub(super) fn same_status(old: &Status, new: &Status) -> bool {
    let without_times = |status: &Status| {
        let mut status = status.clone();
        for condition in &mut status.conditions {
            condition.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        }
        status
    };
    without_times(old) == without_times(new)
}

pub(super) fn object_reference(resource: &DynamicObject) -> ObjectReference {
    resource.object_ref(&api_resource())
}

/// `status.shadow`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ShadowStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// When its window ends (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    pub ended: bool,
    #[serde(flatten)]
    pub report: ShadowReport,
    /// Why it does not run: `reason: message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn condition_of(status: &str, reason: &str) -> Condition {
        Condition {
            type_: "Active".into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn a_condition_keeps_its_transition_time_while_its_status_holds() {
        let old = Status { conditions: vec![condition_of("True", "Serving")], ..Status::default() };
        let same = new_condition(&old, "Active", "True", "Serving", "v2 serves".into(), Some(2));
        assert_eq!(same.last_transition_time, Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let flipped = new_condition(&old, "Active", "False", "RolledBack", String::new(), Some(2));
        assert_ne!(flipped.last_transition_time, Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    }

    #[test]
    fn statuses_differing_only_in_times_are_the_same() {
        let old = Status { conditions: vec![condition_of("True", "Serving")], ..Status::default() };
        let mut new = old.clone();
        new.conditions[0].last_transition_time = Time(k8s_openapi::jiff::Timestamp::now());
        assert!(same_status(&old, &new));
        new.conditions[0].reason = "Refused".into();
        assert!(!same_status(&old, &new));
    }

    #[test]
    fn a_probation_is_written_while_it_runs_and_removed_after() {
        let until = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let running = Status {
            probation: Some(ProbationStatus {
                previous_digest: "sha256:aa".into(),
                previous_reference: None,
                until: rfc3339(until),
            }),
            ..Status::default()
        };
        let written = serde_json::to_value(&running).expect("a status");
        assert_eq!(
            written["probation"],
            serde_json::json!({"previousDigest": "sha256:aa", "until": "2027-01-15T08:00:00Z"})
        );
        let read: Status = serde_json::from_value(written).expect("read back");
        assert_eq!(read.probation.and_then(|p| p.until()), Some(until));
        // Null, not absent: in a merge patch, null removes the field.
        let over = serde_json::to_value(Status::default()).expect("a status");
        assert_eq!(over.get("probation"), Some(&serde_json::Value::Null));
        let unreadable = ProbationStatus { until: "soon".into(), ..ProbationStatus::default() };
        assert_eq!(unreadable.until(), None);
    }

    #[test]
    fn a_spec_reads_its_defaults() {
        let resource: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
            "metadata": {"name": "greeting"},
            "spec": {"image": "127.0.0.1:5000/m@sha256:00"}
        }))
        .expect("a LogicModule");
        assert_eq!(
            spec_of(&resource),
            Spec {
                image: "127.0.0.1:5000/m@sha256:00".into(),
                allow_tag: false,
                verification: None,
                rollout: RolloutSpec::default(),
                shadow: None
            }
        );
    }
}
