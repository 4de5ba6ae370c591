//! What a module's identity must be allowed, from its manifest, and the
//! check: one SelfSubjectAccessReview per permission, made as the module
//! (so the API server's own authorizer answers, and the operator needs no
//! right to review others).

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};

use crate::runtime::bindings::{KindInfo, Manifest, WriteModel};

/// One verb on one resource (or subresource) of a kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permission {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: Option<&'static str>,
    /// The kind, for messages.
    pub kind: String,
}

impl Permission {
    /// `secrets (Secret)`, `memcacheds.memcached.c5c3.io/status (Memcached)`:
    /// what the verb is on, as a Role's rule names it.
    fn target(&self) -> String {
        let group = if self.group.is_empty() { String::new() } else { format!(".{}", self.group) };
        let subresource = self.subresource.map(|sub| format!("/{sub}")).unwrap_or_default();
        format!("{}{group}{subresource} ({})", self.resource, self.kind)
    }
}

impl std::fmt::Display for Permission {
    /// `create secrets (Secret)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.target())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("{user} may not {}{}", list(missing), scope(namespace.as_deref()))]
    Denied { user: String, missing: Vec<Permission>, namespace: Option<String> },
    #[error(
        "the operator may not act as {user} (grant it `impersonate` on serviceaccounts named after the module, \
         or run with --module-identity=operator): {message}"
    )]
    CannotImpersonate { user: String, message: String },
    #[error("asking the API server what {user} may do: {source}")]
    Review { user: String, source: Box<kube::Error> },
}

impl AccessError {
    /// The API server could not answer (not reached, timed out, overloaded
    /// or failing): asking again later may get an answer.
    pub fn is_transient(&self) -> bool {
        match self {
            AccessError::Review { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => status.code == 429 || status.code >= 500,
                _ => true,
            },
            AccessError::Denied { .. } | AccessError::CannotImpersonate { .. } => false,
        }
    }
}

/// `list, watch memcacheds.memcached.c5c3.io (Memcached); create secrets
/// (Secret)`: the verbs of each resource together, in the order needed.
fn list(missing: &[Permission]) -> String {
    let mut resources: Vec<(String, Vec<&str>)> = Vec::new();
    for permission in missing {
        let target = permission.target();
        match resources.iter_mut().find(|(resource, _)| *resource == target) {
            Some((_, verbs)) => verbs.push(permission.verb),
            None => resources.push((target, vec![permission.verb])),
        }
    }
    resources.iter().map(|(resource, verbs)| format!("{} {resource}", verbs.join(", "))).collect::<Vec<_>>().join("; ")
}

fn scope(namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!(" in namespace {namespace}"),
        None => " in all namespaces".to_owned(),
    }
}

/// Everything the host does with the module's identity for `manifest`, and
/// what the module reads through the shared caches:
/// - the parent: list and watch it; patch its status; update its
///   finalizers, which admission (OwnerReferencesPermissionEnforcement)
///   requires of whoever sets `blockOwnerDeletion` on a child's reference;
/// - each owned kind: list and watch; create and, as the module writes
///   (`writes`), update (`replace`: `create_or_update`, `get` to re-read
///   after a conflict) or patch (`apply`: server-side apply is a patch, and
///   `create` when it makes the object); delete (objects the parent
///   controls and the module no longer wants, and adoption under that
///   admission plugin);
/// - each read kind: list and watch.
pub fn needed_permissions(manifest: &Manifest, writes: WriteModel, finalizes: bool) -> Vec<Permission> {
    let on = |kind: &KindInfo, verbs: &[&'static str], subresource: Option<&'static str>| {
        verbs
            .iter()
            .map(|verb| Permission {
                verb,
                group: kind.group.clone(),
                resource: kind.plural.clone(),
                subresource,
                kind: kind.kind.clone(),
            })
            .collect::<Vec<_>>()
    };
    let mut needed = on(&manifest.parent, &["list", "watch"], None);
    needed.extend(on(&manifest.parent, &["patch"], Some("status")));
    needed.extend(on(&manifest.parent, &["update"], Some("finalizers")));
    if finalizes {
        // Its finalizer on the parent itself (`reach`, 1.3).
        needed.extend(on(&manifest.parent, &["patch"], None));
    }
    let write = match writes {
        WriteModel::Replace => "update",
        WriteModel::Apply => "patch",
    };
    for owned in &manifest.owned {
        needed.extend(on(owned, &["get", "list", "watch", "create", write, "delete"], None));
    }
    for read in &manifest.reads {
        needed.extend(on(read, &["list", "watch"], None));
    }
    // A kind both owned and read (or listed twice) is asked about once.
    let mut unique: Vec<Permission> = Vec::with_capacity(needed.len());
    for permission in needed {
        if !unique.contains(&permission) {
            unique.push(permission);
        }
    }
    unique
}

/// Asks the API server, as `user` (through `client`, which impersonates it),
/// whether it may do all of `needed_permissions(manifest, writes, finalizes)` in `namespace`
/// (all namespaces when `None`); answers every permission it may not.
pub(super) async fn check(
    client: &Client,
    user: &str,
    manifest: &Manifest,
    (writes, finalizes): (WriteModel, bool),
    namespace: Option<&str>,
) -> Result<(), AccessError> {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let needed = needed_permissions(manifest, writes, finalizes);
    let reviews = needed.iter().map(|permission| {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(permission.verb.to_owned()),
                    group: Some(permission.group.clone()),
                    resource: Some(permission.resource.clone()),
                    subresource: permission.subresource.map(str::to_owned),
                    namespace: namespace.map(str::to_owned),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let api = api.clone();
        async move { api.create(&PostParams::default(), &review).await }
    });
    let answers = futures::future::join_all(reviews).await;
    let mut missing = Vec::new();
    for (permission, answer) in needed.into_iter().zip(answers) {
        match answer {
            Ok(review) if review.status.as_ref().is_some_and(|status| status.allowed) => {}
            Ok(review) => {
                tracing::debug!(user, permission = %permission, review = review.name_any(), "not allowed");
                missing.push(permission);
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                return Err(AccessError::CannotImpersonate { user: user.to_owned(), message: status.message });
            }
            Err(source) => return Err(AccessError::Review { user: user.to_owned(), source: Box::new(source) }),
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(AccessError::Denied { user: user.to_owned(), missing, namespace: namespace.map(str::to_owned) })
    }
}

/// A Greeting module's manifest owning `owned` and reading `reads`
/// (`group/Kind/plural` each), for tests.
#[cfg(test)]
pub(crate) fn test_manifest(owned: &[&str], reads: &[&str]) -> Manifest {
    let kind = |text: &&str| {
        let mut parts = text.split('/');
        let mut next = || parts.next().unwrap_or_default().to_owned();
        KindInfo { group: next(), version: "v1".into(), kind: next(), plural: next(), namespaced: true }
    };
    Manifest {
        name: "greeting".into(),
        version: "1.0.0".into(),
        parent: kind(&"example.com/Greeting/greetings"),
        crd: String::new(),
        owned: owned.iter().map(kind).collect(),
        reads: reads.iter().map(kind).collect(),
        field_manager: "greeting".into(),
        event_reporter: "greeting".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_server_that_cannot_answer_refuses_nothing_yet() {
        let review = |source: kube::Error| AccessError::Review { user: "u".into(), source: Box::new(source) };
        let status = |code: u16| kube::Error::Api(kube::core::Status::failure("m", "r").with_code(code).boxed());
        assert!(review(status(503)).is_transient());
        assert!(review(status(500)).is_transient());
        assert!(review(status(429)).is_transient());
        assert!(review(kube::Error::LinesCodecMaxLineLengthExceeded).is_transient(), "not an answer");
        assert!(!review(status(400)).is_transient(), "an answer: asking again changes nothing");
        assert!(!AccessError::CannotImpersonate { user: "u".into(), message: "m".into() }.is_transient());
        let denied = AccessError::Denied { user: "u".into(), missing: Vec::new(), namespace: None };
        assert!(!denied.is_transient());
    }

    #[test]
    fn a_manifest_needs_its_parent_its_children_and_what_it_reads() {
        let manifest = test_manifest(&["/ConfigMap/configmaps"], &["/Secret/secrets", "/ConfigMap/configmaps"]);
        let named: Vec<String> =
            needed_permissions(&manifest, WriteModel::Replace, false).iter().map(ToString::to_string).collect();
        assert_eq!(
            named,
            [
                "list greetings.example.com (Greeting)",
                "watch greetings.example.com (Greeting)",
                "patch greetings.example.com/status (Greeting)",
                "update greetings.example.com/finalizers (Greeting)",
                "get configmaps (ConfigMap)",
                "list configmaps (ConfigMap)",
                "watch configmaps (ConfigMap)",
                "create configmaps (ConfigMap)",
                "update configmaps (ConfigMap)",
                "delete configmaps (ConfigMap)",
                "list secrets (Secret)",
                "watch secrets (Secret)",
            ]
        );
        // Server-side apply is a patch: an applying module patches where a
        // replacing one updates, and nothing else changes.
        let applying: Vec<String> =
            needed_permissions(&manifest, WriteModel::Apply, false).iter().map(ToString::to_string).collect();
        let replaced: Vec<String> = named.iter().map(|p| p.replace("update configmaps", "patch configmaps")).collect();
        assert_eq!(applying, replaced);
    }

    #[test]
    fn a_refusal_names_each_verb_and_kind_and_where() {
        let error = AccessError::Denied {
            user: "system:serviceaccount:ops:greeting".into(),
            missing: needed_permissions(&test_manifest(&["/Secret/secrets"], &[]), WriteModel::Replace, false)
                .into_iter()
                .filter(|p| p.resource == "secrets" && p.verb != "get" || p.subresource == Some("status"))
                .collect(),
            namespace: None,
        };
        assert_eq!(
            error.to_string(),
            "system:serviceaccount:ops:greeting may not patch greetings.example.com/status (Greeting); \
             list, watch, create, update, delete secrets (Secret) in all namespaces"
        );
    }
}
