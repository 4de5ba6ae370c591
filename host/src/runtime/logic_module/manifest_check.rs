//! What the host relies on in the manifest a module declares of itself,
//! and the empty manifest a module holds until its own is read.

use crate::runtime::bindings::{KindInfo, Manifest, ReachManifest};
use crate::runtime::crd_check;

fn empty_kind() -> KindInfo {
    KindInfo {
        group: String::new(),
        version: String::new(),
        kind: String::new(),
        plural: String::new(),
        namespaced: true,
    }
}

/// A manifest of nothing, held until the module's own is read.
pub(super) fn empty_manifest() -> Manifest {
    Manifest {
        name: String::new(),
        version: String::new(),
        parent: empty_kind(),
        crd: String::new(),
        owned: Vec::new(),
        reads: Vec::new(),
        field_manager: String::new(),
        event_reporter: String::new(),
    }
}

/// What the host relies on in a manifest.
pub(super) fn check_manifest(manifest: &Manifest) -> Result<(), String> {
    if manifest.name.is_empty() {
        return Err("name is empty".into());
    }
    let kinds = std::iter::once(("parent", &manifest.parent))
        .chain(manifest.owned.iter().map(|k| ("owned", k)))
        .chain(manifest.reads.iter().map(|k| ("reads", k)));
    for (field, kind) in kinds {
        if kind.version.is_empty() || kind.kind.is_empty() || kind.plural.is_empty() {
            return Err(format!("{field}: a kind needs version, kind and plural (got {kind:?})"));
        }
    }
    if manifest.owned.is_empty() {
        return Err("owned names no kinds".into());
    }
    crd_check::check(&manifest.crd, &manifest.parent)
}

/// What this host runs of a module's `reach` (1.3): its timers and its
/// finalizing. A module that asks for more is refused at load, naming the
/// field, rather than run without what it relies on.
pub(super) fn check_reach(manifest: &Manifest, reach: &ReachManifest) -> Result<(), String> {
    // The finalizer is `wasm-operator.c5c3.io/<name>`, whose name part the
    // API server holds to 63 characters.
    if reach.finalizes && manifest.name.len() > 63 {
        return Err(format!(
            "reach.finalizes: the finalizer wasm-operator.c5c3.io/{} would be longer than a finalizer's 63-character name",
            manifest.name
        ));
    }
    let asks = [
        ("any-namespace", reach.any_namespace),
        ("selects", reach.selects),
        ("parent-label-keys", !reach.parent_label_keys.is_empty()),
        ("parent-annotation-keys", !reach.parent_annotation_keys.is_empty()),
        ("decorates", reach.decorates.is_some()),
    ];
    let unsupported: Vec<&str> = asks.iter().filter(|(_, asked)| *asked).map(|(field, _)| *field).collect();
    if unsupported.is_empty() {
        return Ok(());
    }
    Err(format!(
        "reach: this host does not run {} yet; of `reach` it runs the answers' timers (again-after-ms) and finalizes",
        unsupported.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach() -> ReachManifest {
        ReachManifest {
            any_namespace: false,
            selects: false,
            finalizes: false,
            parent_label_keys: Vec::new(),
            parent_annotation_keys: Vec::new(),
            decorates: None,
        }
    }

    #[test]
    fn a_reach_asking_for_what_this_host_does_not_run_is_refused_naming_the_fields() {
        let manifest = Manifest { name: "greeting".into(), ..empty_manifest() };
        assert_eq!(check_reach(&manifest, &reach()), Ok(()));
        assert_eq!(check_reach(&manifest, &ReachManifest { finalizes: true, ..reach() }), Ok(()));
        let asking = ReachManifest { selects: true, parent_label_keys: vec!["team".into()], ..reach() };
        let refused = check_reach(&manifest, &asking).expect_err("refused");
        assert!(refused.starts_with("reach: this host does not run selects, parent-label-keys yet"), "{refused}");
        let long = Manifest { name: "a".repeat(64), ..empty_manifest() };
        let refused = check_reach(&long, &ReachManifest { finalizes: true, ..reach() }).expect_err("too long");
        assert!(refused.starts_with("reach.finalizes: the finalizer"), "{refused}");
    }
}
