//! The kinds a module's manifest names, as the API client needs them.

use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, Resource};

use crate::runtime::bindings::{KindInfo, Manifest};

#[derive(Debug, thiserror::Error)]
pub enum KindError {
    #[error("{kind} is cluster-scoped; this host reconciles namespaced parents, owning and reading namespaced kinds")]
    ClusterScoped { kind: String },
    #[error("the module manifest names no owned kinds")]
    NothingOwned,
}

/// What tells two kinds apart: group, version, kind.
pub type KindKey = (String, String, String);

/// One API kind: what to call it and how to reach it.
#[derive(Clone, Debug)]
pub struct Kind {
    pub resource: ApiResource,
}

impl Kind {
    pub fn from_info(info: &KindInfo) -> Result<Self, KindError> {
        if !info.namespaced {
            return Err(KindError::ClusterScoped { kind: info.kind.clone() });
        }
        let api_version =
            if info.group.is_empty() { info.version.clone() } else { format!("{}/{}", info.group, info.version) };
        Ok(Self {
            resource: ApiResource {
                group: info.group.clone(),
                version: info.version.clone(),
                api_version,
                kind: info.kind.clone(),
                plural: info.plural.clone(),
            },
        })
    }

    pub fn name(&self) -> &str {
        &self.resource.kind
    }

    /// `group/Kind`: names the kind in any version.
    pub fn id(&self) -> String {
        format!("{}/{}", self.resource.group, self.resource.kind)
    }

    pub fn key(&self) -> KindKey {
        (self.resource.group.clone(), self.resource.version.clone(), self.resource.kind.clone())
    }

    /// Whether `api_version` (`group/version` or `version`) and `kind` name
    /// this kind in any version of its group: owner references keep the
    /// version they were written with.
    pub fn is_group_kind_of(&self, api_version: &str, kind: &str) -> bool {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        kind == self.resource.kind && group == self.resource.group
    }

    /// The API in one namespace (for writes).
    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource)
    }

    /// The API the operator watches: one namespace, or all of them.
    pub fn watch_api<K: Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>>(
        &self,
        client: &Client,
        namespace: Option<&str>,
    ) -> Api<K> {
        match namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &self.resource),
            None => Api::all_with(client.clone(), &self.resource),
        }
    }

    /// The object as JSON, with `apiVersion` and `kind` (list responses
    /// leave them out of items; the module wants them).
    pub fn to_value(&self, object: &DynamicObject) -> serde_json::Value {
        // A DynamicObject always serializes (string keys, JSON values).
        let mut value = serde_json::to_value(object).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), self.resource.api_version.clone().into());
            map.insert("kind".into(), self.resource.kind.clone().into());
        }
        value
    }

    /// [`Self::to_value`] as text, what crosses into the module.
    pub fn to_json(&self, object: &DynamicObject) -> String {
        self.to_value(object).to_string()
    }
}

/// The parent, the owned kinds and the kinds only read.
#[derive(Clone, Debug)]
pub struct Kinds {
    pub parent: Kind,
    pub owned: Vec<Kind>,
    pub reads: Vec<Kind>,
}

impl Kinds {
    pub fn from_manifest(manifest: &Manifest) -> Result<Self, KindError> {
        if manifest.owned.is_empty() {
            return Err(KindError::NothingOwned);
        }
        Ok(Self {
            parent: Kind::from_info(&manifest.parent)?,
            owned: manifest.owned.iter().map(Kind::from_info).collect::<Result<_, _>>()?,
            reads: manifest.reads.iter().map(Kind::from_info).collect::<Result<_, _>>()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, version: &str, kind: &str) -> Kind {
        let info = KindInfo {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: true,
        };
        Kind::from_info(&info).expect("namespaced")
    }

    #[test]
    fn owner_references_match_in_any_version_of_the_group() {
        let cache = kind("example.c5c3.io", "v1beta1", "Widget");
        assert!(cache.is_group_kind_of("example.c5c3.io/v1alpha1", "Widget"));
        assert!(cache.is_group_kind_of("example.c5c3.io/v1beta1", "Widget"));
        assert!(!cache.is_group_kind_of("other.io/v1beta1", "Widget"));
        assert!(!cache.is_group_kind_of("example.c5c3.io/v1beta1", "Gadget"));
        let configmap = kind("", "v1", "ConfigMap");
        assert!(configmap.is_group_kind_of("v1", "ConfigMap"));
        assert!(!configmap.is_group_kind_of("apps/v1", "ConfigMap"));
    }

    #[test]
    fn cluster_scoped_kinds_are_refused_by_name() {
        let info = KindInfo {
            group: String::new(),
            version: "v1".into(),
            kind: "Namespace".into(),
            plural: "namespaces".into(),
            namespaced: false,
        };
        let error = Kind::from_info(&info).expect_err("cluster-scoped");
        assert!(error.to_string().starts_with("Namespace is cluster-scoped"), "{error}");
    }
}
