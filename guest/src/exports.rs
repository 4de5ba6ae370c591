//! The WIT exports as plain Rust functions over JSON text. The component
//! glue (`component.rs`) only converts types, so the native build and the
//! component give byte-identical answers, which the golden tests check.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::api::{Memcached, SERVED_VERSIONS, defaults, validation};
use crate::builders;
use crate::children::ChildKind;
use crate::error::{Error, FieldError};
use crate::guards;
use crate::kinds::{KindInfo, MEMCACHED, SECRET};
use crate::owner::drop_empty_uids;
use crate::parse::{from_json, from_json_with_unknown, to_json};
use crate::status::{Observed, Problem, compute_status};
use crate::yaml;

/// A `Memcached` object as it arrives: the derived `Memcached` skips
/// apiVersion and kind, so this reads them in the same single pass.
#[derive(serde::Deserialize)]
struct MemcachedDocument {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// Absent is `{}`, as the CRD's default stores it.
    #[serde(default)]
    spec: crate::api::MemcachedSpec,
    status: Option<crate::api::MemcachedStatus>,
}

impl MemcachedDocument {
    /// The CR, once apiVersion and kind (when given) are Memcached's.
    fn into_memcached(self) -> Result<Memcached, Error> {
        if let Some(kind) = self.kind.filter(|k| k != MEMCACHED.kind) {
            return Err(Error::malformed("kind", format!("must be Memcached, got {kind:?}")));
        }
        if let Some(api_version) = self.api_version.filter(|v| !is_served_version(v)) {
            let served: Vec<String> =
                SERVED_VERSIONS.iter().map(|version| format!("{}/{version}", MEMCACHED.group)).collect();
            return Err(Error::malformed(
                "apiVersion",
                format!("must be one of {}, got {api_version:?}", served.join(", ")),
            ));
        }
        Ok(Memcached { metadata: self.metadata, spec: self.spec, status: self.status })
    }
}

/// `group/version` of a version the CRD serves (all share one schema).
fn is_served_version(api_version: &str) -> bool {
    api_version
        .split_once('/')
        .is_some_and(|(group, version)| group == MEMCACHED.group && SERVED_VERSIONS.contains(&version))
}

/// Parses a `Memcached` object, checking apiVersion and kind when given.
/// Fields the API does not know are skipped, as the API server prunes them.
pub fn parse_memcached(text: &str) -> Result<Memcached, Error> {
    from_json::<MemcachedDocument>("Memcached", text)?.into_memcached()
}

/// As `parse_memcached`, and names the spec fields the API does not know
/// (a misspelt `spec.replica`), which off-cluster answers report as errors.
fn parse_memcached_noting_unknown(text: &str) -> Result<(Memcached, Vec<FieldError>), Error> {
    let (document, unknown): (MemcachedDocument, _) = from_json_with_unknown("Memcached", text)?;
    let unknown = unknown
        .into_iter()
        .filter(|path| path.starts_with("spec."))
        .map(|path| FieldError::new(path, "unknown field"))
        .collect();
    Ok((document.into_memcached()?, unknown))
}

/// Parses and validates: the CR the builders may trust.
fn parse_valid(text: &str) -> Result<Memcached, Error> {
    let memcached = parse_memcached(text)?;
    let problems = validation::validate(&memcached);
    if problems.is_empty() { Ok(memcached) } else { Err(Error::Invalid(problems)) }
}

/// Every problem an off-cluster user should hear of: unknown spec fields
/// (the API server would silently drop them) and validation rules.
fn strict_problems(text: &str) -> Result<(Memcached, Vec<FieldError>), Error> {
    let (memcached, mut problems) = parse_memcached_noting_unknown(text)?;
    problems.extend(validation::validate(&memcached));
    Ok((memcached, problems))
}

fn parse_secrets(texts: &[String]) -> Result<Vec<Secret>, Error> {
    texts.iter().map(|text| from_json("Secret", text)).collect()
}

pub fn labels_for_memcached(name: &str) -> Vec<(String, String)> {
    builders::labels::labels_for_memcached(name).into_iter().collect()
}

pub fn service_monitor_enabled(memcached: &str) -> Result<bool, Error> {
    parse_memcached(memcached).map(|m| guards::service_monitor_enabled(&m))
}

pub fn network_policy_enabled(memcached: &str) -> Result<bool, Error> {
    parse_memcached(memcached).map(|m| guards::network_policy_enabled(&m))
}

pub fn pdb_enabled(memcached: &str) -> Result<bool, Error> {
    parse_memcached(memcached).map(|m| guards::pdb_enabled(&m))
}

pub fn hpa_enabled(memcached: &str) -> Result<bool, Error> {
    parse_memcached(memcached).map(|m| guards::hpa_enabled(&m))
}

/// One typed builder, without owner references (as the seeds' `construct*`).
pub fn construct(kind: ChildKind, memcached: &str, current: Option<&str>, secrets: &[String]) -> Result<String, Error> {
    let memcached = parse_memcached(memcached)?;
    let secrets = parse_secrets(secrets)?;
    kind.build(&memcached, current, &secrets, None)
}

pub fn compute_status_json(
    memcached: &str,
    deployment: Option<&str>,
    secrets: &[String],
    now: &str,
) -> Result<String, Error> {
    let memcached = parse_memcached(memcached)?;
    let deployment = deployment.map(deployment_for_status).transpose()?;
    status_json(&memcached, deployment.as_ref(), &identify("Secret", secrets)?, now, None)
}

/// What the status reads of the current Deployment: its `status`, the
/// replica counts. The rest, most of its text (the pod template), is
/// skipped rather than built: a whole typed Deployment was nearly half of a
/// `status` call.
#[derive(serde::Deserialize)]
struct DeploymentStatusOnly {
    status: Option<DeploymentStatus>,
}

fn deployment_for_status(text: &str) -> Result<Deployment, Error> {
    let read: DeploymentStatusOnly = from_json("Deployment", text)?;
    Ok(Deployment { status: read.status, ..Deployment::default() })
}

/// `related`: the Secrets that exist, read for their names alone.
fn status_json(
    memcached: &Memcached,
    deployment: Option<&Deployment>,
    related: &[Identified<'_>],
    now: &str,
    failure: Option<&str>,
) -> Result<String, Error> {
    let now: Time = serde_json::from_value(Value::String(now.to_owned()))
        .map_err(|err| Error::malformed("now", format!("must be an RFC 3339 time: {err}")))?;
    let invalid = validation::validate(memcached);
    let problem = if !invalid.is_empty() {
        Some(Problem::InvalidSpec(invalid.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))
    } else {
        failure.map(|f| Problem::ReconcileFailed(f.to_owned()))
    };
    let missing_secrets = memcached
        .spec
        .referenced_secret_names()
        .into_iter()
        .filter(|name| !related.iter().any(|s| s.name.as_deref() == Some(name)))
        .collect();
    let observed = Observed { deployment, missing_secrets, problem, now };
    to_json(&compute_status(memcached, &observed))
}

/// Validation problems and unknown spec fields, each with its path.
pub fn validate(memcached: &str) -> Result<Vec<FieldError>, Error> {
    strict_problems(memcached).map(|(_, problems)| problems)
}

pub fn default(memcached: &str) -> Result<String, Error> {
    let mut memcached = parse_memcached(memcached)?;
    defaults::apply(&mut memcached);
    to_json(&memcached)
}

/// Every object the operator would own, with owner references, in
/// reconcile order. A CR without a namespace renders into `default`.
pub fn render(memcached: &str) -> Result<Vec<String>, Error> {
    let (mut memcached, problems) = strict_problems(memcached)?;
    if !problems.is_empty() {
        return Err(Error::Invalid(problems));
    }
    memcached.metadata.namespace.get_or_insert_with(|| "default".into());
    ChildKind::ALL
        .into_iter()
        .filter(|kind| kind.wanted(&memcached))
        .map(|kind| printable(&kind.build(&memcached, None, &[], Some(&memcached))?))
        .collect()
}

/// An object as people read it: keys sorted, and no empty owner uid (a CR
/// rendered off-cluster has none).
fn printable(object: &str) -> Result<String, Error> {
    let mut object: Value = from_json("object", object)?;
    if let Some(references) = object.pointer_mut("/metadata/ownerReferences") {
        drop_empty_uids(references);
    }
    to_json(&object)
}

/// A desired object: as built for a CR from the API server (it has a uid),
/// printable for one without.
fn finish(memcached: &Memcached, object: String) -> Result<String, Error> {
    if memcached.metadata.uid.as_deref().is_some_and(|uid| !uid.is_empty()) { Ok(object) } else { printable(&object) }
}

pub fn to_yaml(objects: &str) -> Result<String, Error> {
    let value: Value = from_json("objects", objects)?;
    Ok(match value {
        Value::Array(items) => yaml::documents(&items),
        single => yaml::document(&single),
    })
}

// ---- the generic reconciler contract (wit/controller) ----

/// The CRD the module reconciles, as `make manifests` generated it from the
/// API types (guest/tests/crd.rs fails when it is stale).
pub const CRD_YAML: &str = include_str!("../../deploy/crd/memcached.c5c3.io_memcacheds.yaml");

/// The name events and writes are reported under; also the Go operator's.
pub const CONTROLLER_NAME: &str = "memcached-operator";

pub struct Manifest {
    pub name: &'static str,
    pub version: &'static str,
    pub parent: KindInfo,
    pub crd: &'static str,
    pub owned: Vec<KindInfo>,
    pub reads: Vec<KindInfo>,
    pub field_manager: &'static str,
    pub event_reporter: &'static str,
}

pub fn manifest() -> Manifest {
    Manifest {
        name: "memcached",
        version: env!("CARGO_PKG_VERSION"),
        parent: MEMCACHED,
        crd: CRD_YAML,
        owned: ChildKind::ALL.iter().map(|k| k.info()).collect(),
        reads: vec![SECRET],
        field_manager: CONTROLLER_NAME,
        event_reporter: CONTROLLER_NAME,
    }
}

/// A related object the parent references, in the parent's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    pub info: KindInfo,
    pub name: String,
}

pub fn references(parent: &str) -> Result<Vec<ObjectRef>, Error> {
    let memcached = parse_memcached(parent)?;
    Ok(memcached
        .spec
        .referenced_secret_names()
        .into_iter()
        .map(|name| ObjectRef { info: SECRET, name: name.to_owned() })
        .collect())
}

/// What identifies an owned or related object: its kind and name (all are
/// in the parent's namespace). Read without building the rest of the object.
#[derive(serde::Deserialize)]
struct Identity {
    kind: Option<String>,
    metadata: Option<IdentityMeta>,
}

#[derive(serde::Deserialize)]
struct IdentityMeta {
    name: Option<String>,
}

/// An owned or related object as JSON text, with the kind and name that
/// identify it.
struct Identified<'a> {
    kind: Option<String>,
    name: Option<String>,
    text: &'a str,
}

/// Reads each object's identity once per call; `what` names them in errors.
fn identify<'a>(what: &str, objects: &'a [String]) -> Result<Vec<Identified<'a>>, Error> {
    objects
        .iter()
        .map(|text| {
            let identity: Identity = from_json(what, text)?;
            Ok(Identified { kind: identity.kind, name: identity.metadata.and_then(|m| m.name), text })
        })
        .collect()
}

/// The current object of `kind` named `name` among `owned`.
fn current_of<'a>(owned: &[Identified<'a>], kind: ChildKind, name: &str) -> Option<&'a str> {
    owned
        .iter()
        .find(|o| o.name.as_deref() == Some(name) && o.kind.as_deref() == Some(kind.info().kind))
        .map(|o| o.text)
}

/// Every object the parent should own, each with the controller owner
/// reference, in reconcile order; what it controls now (`owned`) is built
/// upon in place. An owned object missing from the answer is one the host
/// deletes (a feature turned off). An invalid parent is an error, so a host
/// never deletes anything on bad input.
pub fn desired(parent: &str, owned: &[String], related: &[String]) -> Result<Vec<String>, Error> {
    let memcached = parse_valid(parent)?;
    let secrets = parse_secrets(related)?;
    let owned = identify("owned object", owned)?;
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    let mut objects = Vec::with_capacity(ChildKind::ALL.len());
    for kind in ChildKind::ALL {
        if !kind.wanted(&memcached) {
            continue;
        }
        let current = current_of(&owned, kind, name);
        objects.push(finish(&memcached, kind.build(&memcached, current, &secrets, Some(&memcached))?)?);
    }
    Ok(objects)
}

/// The parent's new status from the current owned objects and the related
/// objects that exist. Answers for an invalid parent too (reporting it).
pub fn status(
    parent: &str,
    owned: &[String],
    related: &[String],
    now: &str,
    problem: Option<&str>,
) -> Result<String, Error> {
    let memcached = parse_memcached(parent)?;
    let name = memcached.metadata.name.as_deref().unwrap_or_default();
    let deployment = current_of(&identify("owned object", owned)?, ChildKind::Deployment, name)
        .map(deployment_for_status)
        .transpose()?;
    status_json(&memcached, deployment.as_ref(), &identify("Secret", related)?, now, problem)
}
