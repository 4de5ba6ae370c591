//! The manifest: what the module reconciles, owns and reads, derived from
//! Rust types (a `#[derive(CustomResource)]` parent, k8s-openapi children),
//! so kinds, versions and plurals are never typed by hand and the CRD is
//! generated from the parent's schema.

use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube_core::{CustomResourceExt, Resource};

/// An API kind as the host reaches it: group, version, kind, plural, scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kind {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
}

/// Whether a resource scope is namespaced.
pub trait Scope {
    const NAMESPACED: bool;
}

impl Scope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

impl Kind {
    /// The kind of `K`: a k8s-openapi type (`ConfigMap`) or a custom resource.
    pub fn of<K>() -> Self
    where
        K: Resource<DynamicType = ()>,
        K::Scope: Scope,
    {
        Kind {
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            plural: K::plural(&()).into_owned(),
            namespaced: <K::Scope as Scope>::NAMESPACED,
        }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// Everything the host reads from a module once, at load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub parent: Kind,
    /// The parent's CustomResourceDefinition as JSON, generated from its type.
    pub crd: String,
    pub owned: Vec<Kind>,
    pub reads: Vec<Kind>,
    pub field_manager: String,
    pub event_reporter: String,
}

/// How the host writes what `desired` answers (the contract's `writes`):
/// [`Reconciler::WRITES`](crate::Reconciler::WRITES).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteModel {
    /// The SDK merges each answer onto the object the server has (keeping
    /// what the server filled in, a list's items matched by `name`, and
    /// [`Object::replacing`](crate::Object::replacing) fields replaced
    /// whole), and the host updates the object to the merged answer.
    #[default]
    Replace,
    /// Each answer holds only the fields the module sets, and the host
    /// applies it with server-side apply: the API server merges it by the
    /// kind's own schema, a field the module stops setting is removed, and
    /// fields others set stay. No merge in the module, no `replacing`.
    Apply,
}

impl Manifest {
    /// A module named `name` at `version` (use `env!("CARGO_PKG_VERSION")`)
    /// reconciling `P`; its CRD is `P::crd()`. Field manager and event
    /// reporter default to `<name>-operator`.
    pub fn new<P>(name: &str, version: &str) -> Self
    where
        P: Resource<DynamicType = ()> + CustomResourceExt,
        P::Scope: Scope,
    {
        let crd = serde_json::to_string(&P::crd()).unwrap_or_default();
        Manifest {
            name: name.to_owned(),
            version: version.to_owned(),
            parent: Kind::of::<P>(),
            crd,
            owned: Vec::new(),
            reads: Vec::new(),
            field_manager: format!("{name}-operator"),
            event_reporter: format!("{name}-operator"),
        }
    }

    /// The parent owns objects of kind `K` (the host watches them and deletes
    /// those the module no longer wants).
    #[must_use]
    pub fn owns<K>(mut self) -> Self
    where
        K: Resource<DynamicType = ()>,
        K::Scope: Scope,
    {
        self.owned.push(Kind::of::<K>());
        self
    }

    /// The module reads objects of kind `K` that parents reference.
    #[must_use]
    pub fn reads<K>(mut self) -> Self
    where
        K: Resource<DynamicType = ()>,
        K::Scope: Scope,
    {
        self.reads.push(Kind::of::<K>());
        self
    }

    #[must_use]
    pub fn field_manager(mut self, name: &str) -> Self {
        name.clone_into(&mut self.field_manager);
        self
    }

    #[must_use]
    pub fn event_reporter(mut self, name: &str) -> Self {
        name.clone_into(&mut self.event_reporter);
        self
    }

    /// A CRD written by hand instead of the generated one (YAML or JSON).
    #[must_use]
    pub fn crd_text(mut self, crd: &str) -> Self {
        crd.clone_into(&mut self.crd);
        self
    }
}

/// One object of a `reads` kind that a parent references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// None: the parent's namespace.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// The object of kind `K` named `name` in the parent's namespace.
    pub fn to<K>(name: impl Into<String>) -> Self
    where
        K: Resource<DynamicType = ()>,
    {
        ObjectRef {
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespace: None,
            name: name.into(),
        }
    }

    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Namespace, Secret};

    use super::*;

    #[test]
    fn kinds_come_from_the_types() {
        let deployment = Kind::of::<Deployment>();
        assert_eq!(
            deployment,
            Kind {
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                plural: "deployments".into(),
                namespaced: true
            }
        );
        assert_eq!(deployment.api_version(), "apps/v1");
        assert_eq!(Kind::of::<Secret>().api_version(), "v1");
        assert!(!Kind::of::<Namespace>().namespaced);
        let reference = ObjectRef::to::<Secret>("tls").in_namespace("other");
        assert_eq!((reference.kind.as_str(), reference.namespace.as_deref()), ("Secret", Some("other")));
    }
}
