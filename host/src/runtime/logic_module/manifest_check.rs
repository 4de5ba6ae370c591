//! What the host relies on in the manifest a module declares of itself,
//! and the empty manifest a module holds until its own is read.

use crate::runtime::bindings::{KindInfo, Manifest};
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
