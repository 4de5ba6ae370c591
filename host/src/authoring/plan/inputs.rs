//! What both versions are given, per parent: from the cluster (read only:
//! list and get) or from files.
//!
//! From the cluster: the parents (one namespace or all), every object of
//! each owned kind of either version (one list per kind, paged), indexed
//! by its controller owner reference's uid so each parent gets its own
//! without a scan of the rest; then the objects of read kinds the parents'
//! `references` answers name (either version's), one get each, once.
//! Objects are kept as a module reads them (no managedFields), but for the
//! owned ones: the fields a module's manager applied decide its applies.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::Value;

use super::super::parents;
use super::super::render::{self, InputError};
use crate::operator::watching::kind_schemas::{self, KindSchemaError};
use crate::planning::given_objects::{module_view, namespace_of};
use crate::planning::kind_schema::Schemas;
use crate::planning::kinds::{Kind, Kinds};
use crate::runtime::bindings::{ObjectRef, WriteModel};
use crate::runtime::logic_module::LogicModule;

/// Objects listed per request.
const PAGE: u32 = 500;
/// Related objects read at once.
const GETS_IN_FLIGHT: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum InputsError {
    #[error("listing {kind} ({api_version}) in {scope}: {error}")]
    List { kind: String, api_version: String, scope: String, error: Box<kube::Error> },
    #[error("reading {kind} {namespace}/{name}, which a parent's `references` names: {error}")]
    Get { kind: String, namespace: String, name: String, error: Box<kube::Error> },
    #[error("reading the owned kinds' schemas, which decide a version's applies: {0}")]
    Schema(Box<KindSchemaError>),
    #[error(transparent)]
    File(#[from] InputError),
}

/// A version with its kinds.
#[derive(Clone, Copy)]
pub struct Version<'a> {
    pub module: &'a LogicModule,
    pub kinds: &'a Kinds,
}

/// What the parents are reconciled with.
#[derive(Default)]
pub struct Inputs {
    /// Each with a namespace and a uid, in namespace and name order.
    pub parents: Vec<Value>,
    /// Objects of owned kinds by their controller's uid.
    owned: HashMap<String, Vec<Value>>,
    /// Objects of read kinds.
    related: Vec<Value>,
    /// Per parent, which of `related` its references name; `None`: every
    /// one (files: the file's objects, as `render` gives them).
    related_of: Option<Vec<Vec<usize>>>,
    /// The owned kinds' schemas, when a version applies (from the cluster;
    /// none from files).
    pub schemas: Schemas,
}

impl Inputs {
    /// The objects `parent` controls (by its uid).
    pub fn owned_for(&self, parent: &Value) -> &[Value] {
        let uid = parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        self.owned.get(uid).map_or(&[], Vec::as_slice)
    }

    /// The related objects to give the parent at `index`.
    pub fn related_for(&self, index: usize) -> Vec<Value> {
        match &self.related_of {
            None => self.related.clone(),
            Some(per_parent) => {
                per_parent.get(index).into_iter().flatten().filter_map(|&i| self.related.get(i).cloned()).collect()
            }
        }
    }
}

/// The uid of the object's controller owner reference.
fn controller_uid(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|reference| reference.get("controller") == Some(&Value::Bool(true)))
        .and_then(|reference| reference.get("uid"))
        .and_then(Value::as_str)
}

/// `objects` by controller uid (objects without one are no parent's).
fn index_by_controller(objects: impl IntoIterator<Item = Value>) -> HashMap<String, Vec<Value>> {
    let mut index: HashMap<String, Vec<Value>> = HashMap::new();
    for object in objects {
        if let Some(uid) = controller_uid(&object).map(str::to_owned) {
            index.entry(uid).or_default().push(object);
        }
    }
    index
}

/// The owned kinds of both versions, each once (by group and kind; the new
/// version's first).
pub fn owned_kinds<'a>(current: &'a Kinds, new: &'a Kinds) -> Vec<&'a Kind> {
    let mut kinds: Vec<&Kind> = Vec::new();
    for kind in new.owned.iter().chain(&current.owned) {
        if !kinds.iter().any(|k| k.resource.group == kind.resource.group && k.resource.kind == kind.resource.kind) {
            kinds.push(kind);
        }
    }
    kinds
}

/// The parents, their children and the related objects, from files
/// (`render`'s flags): parents without a namespace or uid get them as
/// `render` gives them.
pub fn from_files(
    parent_kind: &Kind,
    parents_file: &Path,
    owned_file: Option<&Path>,
    related_file: Option<&Path>,
) -> Result<Inputs, InputsError> {
    let given = render::read_objects(parents_file)?;
    if given.is_empty() {
        return Err(InputError::Empty { path: parents_file.to_owned() }.into());
    }
    let mut parents = Vec::new();
    for (index, object) in given.iter().enumerate() {
        let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !parent_kind.is_group_kind_of(api_version, kind) {
            tracing::warn!(
                file = %parents_file.display(),
                document = index + 1,
                object = super::super::documents::describe(object),
                "not a {}, the modules' parent kind: skipped",
                parent_kind.name()
            );
            continue;
        }
        let (parent, filled) = parents::complete(object);
        if filled.uid {
            let uid = parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
            tracing::info!(
                parent = super::super::documents::describe(&parent),
                uid,
                "no metadata.uid: given one derived from its namespace and name"
            );
        }
        parents.push(module_view(&parent));
    }
    sort(&mut parents);
    let owned = owned_file.map(render::read_objects).transpose()?.unwrap_or_default();
    let related = related_file.map(render::read_objects).transpose()?.unwrap_or_default();
    Ok(Inputs {
        parents,
        // With their managedFields, if the file has them: what the module's
        // manager applied decides its applies.
        owned: index_by_controller(owned),
        related: related.iter().map(module_view).collect(),
        related_of: None,
        schemas: Schemas::default(),
    })
}

fn sort(parents: &mut [Value]) {
    let name = |p: &Value| p.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    parents.sort_by_cached_key(|p| (namespace_of(p).to_owned(), name(p)));
}

/// Everything from the cluster, reading only.
pub async fn from_cluster(
    client: &Client,
    namespace: Option<&str>,
    current: Version<'_>,
    new: Version<'_>,
) -> Result<Inputs, InputsError> {
    let mut parents: Vec<Value> = list(client, &new.kinds.parent, namespace).await?.iter().map(module_view).collect();
    sort(&mut parents);
    tracing::info!(kind = new.kinds.parent.name(), count = parents.len(), "listed the parents");
    let schemas = schemas(client, current, new).await?;
    let mut owned = HashMap::new();
    for kind in owned_kinds(current.kinds, new.kinds) {
        let objects = list(client, kind, namespace).await?;
        tracing::info!(kind = kind.name(), count = objects.len(), "listed an owned kind");
        for (uid, children) in index_by_controller(objects) {
            owned.entry(uid).or_insert_with(Vec::new).extend(children);
        }
    }

    // What each parent's `references` names, with either version.
    let mut wanted: BTreeMap<RelatedKey, usize> = BTreeMap::new();
    let mut kinds_of: Vec<Kind> = Vec::new();
    let mut related_of = Vec::with_capacity(parents.len());
    for parent in &parents {
        let namespace = namespace_of(parent);
        let parent_json = parent.to_string();
        let mut mine = Vec::new();
        for version in [current, new] {
            for reference in references(version.module, &parent_json) {
                let Some(kind) = version
                    .kinds
                    .reads
                    .iter()
                    .find(|k| k.resource.group == reference.group && k.resource.kind == reference.kind)
                else {
                    continue;
                };
                let key = RelatedKey {
                    group: reference.group.clone(),
                    kind: reference.kind.clone(),
                    namespace: reference.namespace.clone().unwrap_or_else(|| namespace.to_owned()),
                    name: reference.name.clone(),
                };
                let next = wanted.len();
                let index = *wanted.entry(key).or_insert_with(|| {
                    kinds_of.push(kind.clone());
                    next
                });
                if !mine.contains(&index) {
                    mine.push(index);
                }
            }
        }
        related_of.push(mine);
    }
    let mut keys: Vec<(RelatedKey, usize)> = wanted.into_iter().collect();
    keys.sort_by_key(|(_, index)| *index);
    let found: Vec<Option<Value>> = futures::stream::iter(keys.into_iter().map(|(key, index)| {
        let kind = kinds_of[index].clone();
        async move { get(client, &kind, &key).await }
    }))
    .buffered(GETS_IN_FLIGHT)
    .try_collect()
    .await?;
    tracing::info!(
        referenced = found.len(),
        found = found.iter().filter(|o| o.is_some()).count(),
        "read the objects the parents reference"
    );
    // Indices into `found`; a missing object is left out, as the operator's
    // cache would not have it.
    let related_of =
        related_of.into_iter().map(|mine| mine.into_iter().filter(|&i| found[i].is_some()).collect()).collect();
    let related = found.into_iter().map(|object| object.unwrap_or_default()).collect();
    Ok(Inputs { parents, owned, related, related_of: Some(related_of), schemas })
}

/// Each owned kind's schema, when either version applies its answers: how
/// the operator decides and merges an apply.
async fn schemas(client: &Client, current: Version<'_>, new: Version<'_>) -> Result<Schemas, InputsError> {
    let mut schemas = Schemas::default();
    if [current, new].iter().all(|version| version.module.write_model() != WriteModel::Apply) {
        return Ok(schemas);
    }
    let kinds: Vec<Kind> = owned_kinds(current.kinds, new.kinds).into_iter().cloned().collect();
    let read = kind_schemas::fetch(client, &kinds).await.map_err(|error| InputsError::Schema(Box::new(error)))?;
    for (kind, schema) in kinds.iter().zip(read) {
        schemas.insert(kind, schema);
    }
    Ok(schemas)
}

/// A referenced object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct RelatedKey {
    group: String,
    kind: String,
    namespace: String,
    name: String,
}

/// The module's `references` answer for the parent; none when it fails (the
/// reconcile reports that).
fn references(module: &LogicModule, parent: &str) -> Vec<ObjectRef> {
    module.reconciler().and_then(|mut instance| instance.references(parent)).unwrap_or_default()
}

/// Every object of `kind`, page by page, with its managedFields.
async fn list(client: &Client, kind: &Kind, namespace: Option<&str>) -> Result<Vec<Value>, InputsError> {
    let api: Api<DynamicObject> = kind.watch_api(client, namespace);
    let mut params = ListParams::default().limit(PAGE);
    let mut objects = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|error| InputsError::List {
            kind: kind.name().to_owned(),
            api_version: kind.resource.api_version.clone(),
            scope: namespace.map_or_else(|| "all namespaces".to_owned(), |ns| format!("namespace {ns}")),
            error: Box::new(error),
        })?;
        objects.extend(page.items.iter().map(|item| kind.to_value(item)));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(objects),
        }
    }
}

/// The object `key` names, if it exists.
async fn get(client: &Client, kind: &Kind, key: &RelatedKey) -> Result<Option<Value>, InputsError> {
    let api = kind.api(client, &key.namespace);
    match api.get_opt(&key.name).await {
        Ok(object) => Ok(object.map(|object| module_view(&kind.to_value(&object)))),
        Err(error) => Err(InputsError::Get {
            kind: kind.name().to_owned(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            error: Box::new(error),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn child(name: &str, controller: Option<&str>) -> Value {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        if let Some(uid) = controller {
            object["metadata"]["ownerReferences"] =
                json!([{"uid": "not-the-controller"}, {"uid": uid, "controller": true}]);
        }
        object
    }

    #[test]
    fn children_are_indexed_by_their_controllers_uid() {
        let index = index_by_controller([
            child("a", Some("u-1")),
            child("b", Some("u-2")),
            child("c", Some("u-1")),
            child("orphan", None),
        ]);
        let names = |uid: &str| -> Vec<&str> {
            index[uid].iter().map(|o| o["metadata"]["name"].as_str().unwrap_or_default()).collect()
        };
        assert_eq!(names("u-1"), ["a", "c"]);
        assert_eq!(names("u-2"), ["b"]);
        assert_eq!(index.len(), 2, "an orphan is no parent's");

        let inputs = Inputs { owned: index, ..Inputs::default() };
        let parent = json!({"metadata": {"uid": "u-2"}});
        assert_eq!(inputs.owned_for(&parent).len(), 1);
        assert!(inputs.owned_for(&json!({"metadata": {"uid": "u-9"}})).is_empty());
    }

    #[test]
    fn related_objects_are_each_parents_own_or_all_from_a_file() {
        let secret = |name: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}});
        let related = vec![secret("a"), secret("b")];
        let inputs = Inputs { related: related.clone(), related_of: Some(vec![vec![1], vec![]]), ..Inputs::default() };
        assert_eq!(inputs.related_for(0), [secret("b")]);
        assert!(inputs.related_for(1).is_empty());
        assert!(inputs.related_for(7).is_empty());
        let from_file = Inputs { related: related.clone(), related_of: None, ..Inputs::default() };
        assert_eq!(from_file.related_for(3), related);
    }
}
