//! The checks of a new version that need no cluster state: it keeps the
//! serving version's parent kind and field manager, and the host can
//! watch every kind it owns and reads. A standby runs them right after
//! compiling ahead; the leader reuses the result while that version still
//! serves.

use crate::operator::swapping::swap_state::Refusal;
use crate::planning::kinds::Kinds;
use crate::runtime::bindings::{KindInfo, Manifest};
use crate::runtime::logic_module::LogicModule;

/// What the checks that need no cluster state found for a version: it
/// loaded and honours the contract (else it would be a load refusal), and
/// whether its kinds can replace those of the version serving when it was
/// checked (the same parent kind and field manager; owned and read kinds
/// the host can watch).
/// A standby runs them right after compiling ahead; the leader reuses the
/// result while that version still serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prechecked {
    /// The digest of the serving version it was checked against.
    pub against: String,
    pub kinds: Result<(), Refusal>,
}

impl Prechecked {
    pub fn new(active: &LogicModule, candidate: &LogicModule) -> Self {
        let kinds = same_parent(active.manifest(), candidate.manifest())
            .map_err(|message| Refusal::new("ParentKindChanged", message))
            .and_then(|()| {
                same_field_manager(active.manifest(), candidate.manifest())
                    .map_err(|message| Refusal::new("FieldManagerChanged", message))
            })
            .and_then(|()| {
                Kinds::from_manifest(candidate.manifest())
                    .map(drop)
                    .map_err(|error| Refusal::new("UnsupportedKind", error.to_string()))
            });
        Self { against: active.digest().to_owned(), kinds }
    }
}

/// The new version must reconcile the same parent kind: the controller
/// and its parent cache are set up for it. Its owned and read kinds may
/// change; their watches follow.
fn same_parent(active: &Manifest, candidate: &Manifest) -> Result<(), String> {
    let describe = |k: &KindInfo| format!("{}/{}/{}", k.group, k.version, k.kind);
    let key = |k: &KindInfo| (k.group.clone(), k.version.clone(), k.kind.clone(), k.plural.clone(), k.namespaced);
    if key(&active.parent) != key(&candidate.parent) {
        return Err(format!(
            "it reconciles {}, not {}: a module keeps its parent kind (run another module for another kind)",
            describe(&candidate.parent),
            describe(&active.parent)
        ));
    }
    Ok(())
}

/// The new version must write under the same field manager: the fields
/// the serving version applied stay that manager's, so under another one
/// they would never be removed, and each would conflict with the new.
fn same_field_manager(active: &Manifest, candidate: &Manifest) -> Result<(), String> {
    if active.field_manager != candidate.field_manager {
        return Err(format!(
            "it writes as field manager {:?}, not {:?}: a module keeps its field manager (what the serving version \
             applied stays owned by it)",
            candidate.field_manager, active.field_manager
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, kind: &str) -> KindInfo {
        KindInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        }
    }

    fn manifest(parent: KindInfo, owned: Vec<KindInfo>) -> Manifest {
        Manifest {
            name: "m".into(),
            version: "1.0.0".into(),
            parent,
            crd: String::new(),
            owned,
            reads: vec![kind("", "Secret")],
            field_manager: "m".into(),
            event_reporter: "m".into(),
        }
    }

    #[test]
    fn a_new_version_keeps_its_parent_kind_and_may_change_the_others() {
        let active = manifest(kind("x.io", "Widget"), vec![kind("", "ConfigMap"), kind("apps", "Deployment")]);
        let reordered = manifest(kind("x.io", "Widget"), vec![kind("apps", "Deployment"), kind("", "ConfigMap")]);
        assert_eq!(same_parent(&active, &reordered), Ok(()));
        let fewer_owned = manifest(kind("x.io", "Widget"), vec![kind("", "ConfigMap")]);
        assert_eq!(same_parent(&active, &fewer_owned), Ok(()));

        let other_parent = manifest(kind("x.io", "Gadget"), active.owned.clone());
        let error = same_parent(&active, &other_parent).expect_err("another parent kind");
        assert!(error.starts_with("it reconciles x.io/v1/Gadget, not x.io/v1/Widget"), "{error}");
        let mut cluster_scoped = kind("x.io", "Widget");
        cluster_scoped.namespaced = false;
        assert!(same_parent(&active, &manifest(cluster_scoped, active.owned.clone())).is_err());
    }

    #[test]
    fn a_new_version_keeps_its_field_manager() {
        let active = manifest(kind("x.io", "Widget"), vec![kind("", "ConfigMap")]);
        assert_eq!(same_field_manager(&active, &active.clone()), Ok(()));
        let renamed = Manifest { field_manager: "other".into(), ..active.clone() };
        let error = same_field_manager(&active, &renamed).expect_err("another field manager");
        assert!(error.starts_with(r#"it writes as field manager "other", not "m""#), "{error}");
    }
}
