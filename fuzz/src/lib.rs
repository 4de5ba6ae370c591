//! What the fuzz targets share.

use std::sync::OnceLock;

use wasm_operator::planning::kinds::Kind;
use wasm_operator::runtime::bindings::KindInfo;

/// The Memcached module's owned kinds, as the host reads them from its
/// manifest (Deployment first).
pub fn memcached_owned_kinds() -> &'static [Kind] {
    static OWNED: OnceLock<Vec<Kind>> = OnceLock::new();
    OWNED.get_or_init(|| {
        memcached_logic::exports::manifest()
            .owned
            .iter()
            .map(|kind| KindInfo {
                group: kind.group.into(),
                version: kind.version.into(),
                kind: kind.kind.into(),
                plural: kind.plural.into(),
                namespaced: kind.namespaced,
            })
            .map(|info| Kind::from_info(&info).expect("the manifest's kinds are namespaced"))
            .collect()
    })
}
