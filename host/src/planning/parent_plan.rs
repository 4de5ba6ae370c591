//! What a plan says of one parent: each object the new version treats
//! differently (created, updated, deleted or left unmanaged, with the
//! fields that differ), the status fields it writes differently, and where
//! either version fails (`compare.rs` makes it).

use serde::Serialize;

use super::fields::FieldChange;
use crate::planning::outcome::OutcomeError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Delete,
    Unmanaged,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Unmanaged => "unmanaged",
        }
    }
}

/// What the new version does differently to one object.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectChange {
    pub action: Action,
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Whether the object exists now.
    pub live: bool,
    /// The fields that differ, old (the current version's end state) to new.
    /// For a create of an object that does not exist, its fields.
    pub fields: Vec<FieldChange>,
}

/// Why a version's reconcile did not apply.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failure {
    /// `invalid`, `malformed`, `unsupported`, `refused` or `failed`.
    pub kind: &'static str,
    pub message: String,
}

impl Failure {
    pub(super) fn of(error: &OutcomeError) -> Self {
        Self { kind: error.kind(), message: error.to_string() }
    }
}

/// One parent's plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentPlan {
    pub namespace: String,
    pub name: String,
    pub objects: Vec<ObjectChange>,
    /// The status fields the new version writes differently.
    pub status: Vec<FieldChange>,
    /// The new version fails on this parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_error: Option<Failure>,
    /// The current version fails on this parent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_error: Option<Failure>,
}

impl ParentPlan {
    /// The new version fails where the current one does not.
    pub fn fails(&self) -> bool {
        self.new_error.is_some() && self.current_error.is_none()
    }

    pub fn both_fail(&self) -> bool {
        self.new_error.is_some() && self.current_error.is_some()
    }

    /// The new version writes something else than the current one would.
    pub fn changed(&self) -> bool {
        !self.objects.is_empty() || !self.status.is_empty()
    }

    /// Anything to say about this parent.
    pub fn noteworthy(&self) -> bool {
        self.changed() || self.new_error.is_some() || self.current_error.is_some()
    }

    pub fn count(&self, action: Action) -> usize {
        self.objects.iter().filter(|o| o.action == action).count()
    }
}
