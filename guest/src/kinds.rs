//! The API kinds this logic names: the parent and what it reads, with what
//! a host needs to reach them without discovery.

/// An API kind with what a host needs to reach it without discovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindInfo {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl KindInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_owned() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// The parent at its storage version: what the host watches and what owner
/// references name (v1alpha1 is served too, see `api::SERVED_VERSIONS`).
pub const MEMCACHED: KindInfo = KindInfo {
    group: "memcached.c5c3.io",
    version: "v1beta1",
    kind: "Memcached",
    plural: "memcacheds",
    namespaced: true,
};
pub const SECRET: KindInfo = KindInfo { group: "", version: "v1", kind: "Secret", plural: "secrets", namespaced: true };
