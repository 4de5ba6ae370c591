//! The kinds the module's manifest names, as the API client needs them.

use kube::api::{Api, ApiResource, DynamicObject};
use kube::Client;

use crate::module::{KindInfo, ModuleManifest};

#[derive(Debug, thiserror::Error)]
pub enum KindError {
    #[error("{kind} is cluster-scoped; this host reconciles namespaced kinds only")]
    ClusterScoped { kind: String },
    #[error("the module manifest names no owned kinds")]
    NothingOwned,
}

/// One API kind: what to call it and how to reach it.
#[derive(Clone, Debug)]
pub struct Kind {
    pub resource: ApiResource,
}

impl Kind {
    fn from_info(info: &KindInfo) -> Result<Self, KindError> {
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

    /// The API in one namespace (for writes).
    pub fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource)
    }

    /// The API the operator watches: one namespace, or all of them.
    pub fn watch_api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
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

/// The parent, the owned kinds (in manifest order, which is the order of
/// `desired-all`'s answer) and the kinds only read.
#[derive(Clone, Debug)]
pub struct Kinds {
    pub parent: Kind,
    pub owned: Vec<Kind>,
    pub reads: Vec<Kind>,
}

impl Kinds {
    pub fn from_manifest(manifest: &ModuleManifest) -> Result<Self, KindError> {
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
