//! How the API server merges one kind in a server-side apply: which lists
//! are atomic, sets or maps keyed by some of their items' fields, which
//! maps are atomic, which strings are quantities, read from the OpenAPI v3
//! document the server publishes for the kind's group and version (the
//! same markers `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`,
//! `x-kubernetes-map-type` and, for lists without a type, the patch merge
//! key, that the server's own structured merge reads). A custom resource's
//! schema is published the same way.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;

use crate::planning::kinds::{Kind, KindKey};

/// Where a shape sits in its schema's table.
pub type ShapeId = usize;

/// A use of a shape: a field's or an item's type, with the map type the
/// place of use may set (`x-kubernetes-map-type` beside a `$ref`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeRef {
    pub id: ShapeId,
    pub atomic_map: Option<bool>,
}

/// How the items of a list merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole.
    Atomic,
    /// Scalars, each its own.
    Set,
    /// Objects, each identified by these fields.
    Map { keys: Vec<String> },
}

/// One declared field of an object.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub shape: ShapeRef,
    /// Its `default`, which stands in for a missing key of a keyed list.
    pub default: Option<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// An object: declared fields and, for other keys, `others` (none: no
    /// other key is allowed). A map (`additionalProperties`) is an object
    /// without declared fields.
    Object {
        fields: BTreeMap<String, Field>,
        others: Option<ShapeRef>,
        atomic: bool,
    },
    List {
        items: ShapeRef,
        list: ListType,
    },
    /// `quantity`: a resource quantity, which the server stores in its
    /// canonical form (`1000m` as `1`).
    Scalar {
        quantity: bool,
    },
    /// No type: maps merge key by key, lists are atomic (as the server
    /// reads an object with `x-kubernetes-preserve-unknown-fields`).
    Untyped,
}

/// Every table's first entry: the untyped shape.
const UNTYPED: ShapeId = 0;
const UNTYPED_REF: ShapeRef = ShapeRef { id: UNTYPED, atomic_map: None };

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("the OpenAPI document has no components.schemas")]
    NoSchemas,
    #[error("the OpenAPI document describes no {kind} of {api_version}")]
    NoKind { api_version: String, kind: String },
}

/// One kind's merge semantics.
#[derive(Clone, Debug, PartialEq)]
pub struct KindSchema {
    shapes: Vec<Shape>,
    root: ShapeId,
}

impl KindSchema {
    /// The kind `group`/`version`/`kind` of an OpenAPI v3 document as the
    /// API server serves it at `/openapi/v3/apis/<group>/<version>` (or
    /// `/openapi/v3/api/v1`).
    pub fn from_openapi(document: &Value, group: &str, version: &str, kind: &str) -> Result<Self, SchemaError> {
        let schemas =
            document.pointer("/components/schemas").and_then(Value::as_object).ok_or(SchemaError::NoSchemas)?;
        let name = schemas
            .iter()
            .find(|(_, schema)| declares_kind(schema, group, version, kind))
            .map(|(name, _)| name.clone())
            .ok_or_else(|| SchemaError::NoKind {
                api_version: if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") },
                kind: kind.to_owned(),
            })?;
        let mut builder = Builder { schemas, shapes: vec![Shape::Untyped], named: HashMap::new() };
        let root = builder.named(&name);
        Ok(KindSchema { shapes: builder.shapes, root })
    }

    /// A schema that knows nothing of the kind: objects merge key by key,
    /// lists are atomic. What a kind without a published schema gets.
    pub fn untyped() -> Self {
        KindSchema { shapes: vec![Shape::Untyped], root: UNTYPED }
    }

    pub fn root(&self) -> ShapeRef {
        ShapeRef { id: self.root, atomic_map: None }
    }

    pub fn shape(&self, shape: ShapeRef) -> &Shape {
        &self.shapes[shape.id]
    }

    /// The shape of member `key` of an object of shape `object` (untyped
    /// when the schema does not say).
    pub fn member(&self, object: ShapeRef, key: &str) -> ShapeRef {
        match self.shape(object) {
            Shape::Object { fields, others, .. } => {
                fields.get(key).map(|field| field.shape).or(*others).unwrap_or(UNTYPED_REF)
            }
            _ => UNTYPED_REF,
        }
    }

    /// The default of member `key` of an object of shape `object`.
    pub fn member_default(&self, object: ShapeRef, key: &str) -> Option<&Value> {
        match self.shape(object) {
            Shape::Object { fields, .. } => fields.get(key).and_then(|field| field.default.as_ref()),
            _ => None,
        }
    }

    /// Whether a map of this shape is replaced whole.
    pub fn is_atomic_map(&self, shape: ShapeRef) -> bool {
        shape.atomic_map.unwrap_or(matches!(self.shape(shape), Shape::Object { atomic: true, .. }))
    }

    /// Whether `key` is a declared field of an object of shape `object`.
    pub fn declares(&self, object: ShapeRef, key: &str) -> bool {
        matches!(self.shape(object), Shape::Object { fields, .. } if fields.contains_key(key))
    }
}

/// Kinds' schemas, by group, version and kind: what deciding applies
/// offline needs (`planning/offline.rs`), read from the API server.
#[derive(Clone, Debug, Default)]
pub struct Schemas(BTreeMap<KindKey, Arc<KindSchema>>);

impl Schemas {
    pub fn insert(&mut self, kind: &Kind, schema: Arc<KindSchema>) {
        self.0.insert(kind.key(), schema);
    }

    /// `kind`'s schema; one that knows nothing of it when none was read.
    pub fn of(&self, kind: &Kind) -> Arc<KindSchema> {
        self.0.get(&kind.key()).cloned().unwrap_or_else(|| Arc::new(KindSchema::untyped()))
    }
}

fn declares_kind(schema: &Value, group: &str, version: &str, kind: &str) -> bool {
    schema.get("x-kubernetes-group-version-kind").and_then(Value::as_array).is_some_and(|kinds| {
        kinds.iter().any(|gvk| {
            gvk.get("group").and_then(Value::as_str).unwrap_or("") == group
                && gvk.get("version").and_then(Value::as_str) == Some(version)
                && gvk.get("kind").and_then(Value::as_str) == Some(kind)
        })
    })
}

struct Builder<'a> {
    schemas: &'a serde_json::Map<String, Value>,
    shapes: Vec<Shape>,
    /// Named schemas already in the table (a type that contains itself,
    /// such as JSONSchemaProps, refers to its own entry).
    named: HashMap<String, ShapeId>,
}

impl Builder<'_> {
    fn add(&mut self, shape: Shape) -> ShapeId {
        self.shapes.push(shape);
        self.shapes.len() - 1
    }

    fn named(&mut self, name: &str) -> ShapeId {
        if let Some(id) = self.named.get(name) {
            return *id;
        }
        if name == QUANTITY {
            let id = self.add(Shape::Scalar { quantity: true });
            self.named.insert(name.to_owned(), id);
            return id;
        }
        // Reserved first, filled in after: a schema may refer to itself.
        let id = self.add(Shape::Untyped);
        self.named.insert(name.to_owned(), id);
        if let Some(schema) = self.schemas.get(name) {
            // Named schemas start afresh: preserving unknown fields is not
            // inherited across a reference.
            self.shapes[id] = self.parse(schema, false);
        }
        id
    }

    /// The shape a field or item of schema `schema` has.
    fn reference(&mut self, schema: &Value, preserve: bool) -> ShapeRef {
        let atomic_map = match schema.get("x-kubernetes-map-type").and_then(Value::as_str) {
            Some("atomic") => Some(true),
            Some("granular") => Some(false),
            _ => None,
        };
        if let Some(name) = referenced_name(schema) {
            return ShapeRef { id: self.named(name), atomic_map };
        }
        let shape = self.parse(schema, preserve);
        ShapeRef { id: self.add(shape), atomic_map: None }
    }

    fn parse(&mut self, schema: &Value, preserve: bool) -> Shape {
        let preserve = preserve || schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        match schema.get("type").and_then(Value::as_str) {
            Some("object") => self.object(schema, preserve),
            Some("array") => self.list(schema, preserve),
            Some("integer" | "number" | "boolean" | "string") => Shape::Scalar { quantity: false },
            // No type: an int-or-string, or anything (preserved unknown
            // fields); an object with properties is read as one.
            _ if schema.get("properties").is_some() => self.object(schema, preserve),
            _ => Shape::Untyped,
        }
    }

    fn object(&mut self, schema: &Value, preserve: bool) -> Shape {
        let mut fields = BTreeMap::new();
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, member) in properties.into_iter().flatten() {
            let shape = self.reference(member, preserve);
            fields.insert(name.clone(), Field { shape, default: member.get("default").cloned() });
        }
        let others = match schema.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(UNTYPED_REF),
            Some(other @ Value::Object(_)) => Some(self.reference(other, preserve)),
            _ if preserve || fields.is_empty() => Some(UNTYPED_REF),
            _ => None,
        };
        let atomic = schema.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        Shape::Object { fields, others, atomic }
    }

    fn list(&mut self, schema: &Value, preserve: bool) -> Shape {
        let items = match schema.get("items") {
            Some(items @ Value::Object(_)) => self.reference(items, preserve),
            _ => UNTYPED_REF,
        };
        Shape::List { items, list: list_type(schema) }
    }
}

/// `$ref`'s name, also inside a single-member `allOf` (how OpenAPI v3 puts a
/// reference beside a default or a description).
fn referenced_name(schema: &Value) -> Option<&str> {
    let reference = schema.get("$ref").and_then(Value::as_str).or_else(|| match schema.get("allOf") {
        Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref").and_then(Value::as_str),
        _ => None,
    })?;
    reference.rsplit('/').next().filter(|name| !name.is_empty())
}

/// The list's merge, as the server reads it: its list type, else a patch
/// strategy of `merge` (keyed by the patch merge key, a set without one),
/// else atomic.
fn list_type(schema: &Value) -> ListType {
    let keys = |value: Option<&Value>| -> Vec<String> {
        value.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    };
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map { keys: keys(schema.get("x-kubernetes-list-map-keys")) },
        Some(_) => ListType::Atomic,
        None => match schema.get("x-kubernetes-patch-strategy").and_then(Value::as_str) {
            Some("merge" | "merge,retainKeys") => {
                match schema.get("x-kubernetes-patch-merge-key").and_then(Value::as_str) {
                    Some(key) => ListType::Map { keys: vec![key.to_owned()] },
                    None => ListType::Set,
                }
            }
            _ => ListType::Atomic,
        },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// A small document shaped as the API server serves apps/v1: a kind,
    /// references inside `allOf`, keyed lists, a set, an atomic map, a
    /// quantity and a type that contains itself.
    pub(crate) fn document() -> Value {
        json!({"components": {"schemas": {
            "io.k8s.api.apps.v1.Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Thing", "version": "v1"}],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}], "default": {}},
                    "spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}]},
                    "status": {"type": "object", "properties": {"ready": {"type": "integer"}}}
                }
            },
            "Meta": {"type": "object", "properties": {
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "ownerReferences": {"type": "array", "items": {"$ref": "#/components/schemas/Owner"},
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "uid"}
            }},
            "Owner": {"type": "object", "properties": {"uid": {"type": "string"}, "name": {"type": "string"}}},
            "Spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "selector": {"allOf": [{"$ref": "#/components/schemas/Selector"}]},
                "ports": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/Port"}]},
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"]},
                "args": {"type": "array", "items": {"type": "string"}},
                "limits": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
                "nested": {"$ref": "#/components/schemas/Nested"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "Selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
            "Port": {"type": "object", "properties": {
                "port": {"type": "integer"},
                "protocol": {"type": "string", "default": "TCP"},
                "name": {"type": "string"}
            }},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
            "Nested": {"type": "object", "properties": {"inner": {"$ref": "#/components/schemas/Nested"}, "value": {"type": "string"}}}
        }}})
    }

    pub(crate) fn thing() -> KindSchema {
        KindSchema::from_openapi(&document(), "apps", "v1", "Thing").expect("the kind")
    }

    fn at(schema: &KindSchema, path: &[&str]) -> ShapeRef {
        path.iter().fold(schema.root(), |shape, key| schema.member(shape, key))
    }

    #[test]
    fn lists_maps_and_quantities_are_read_from_the_markers() {
        let schema = thing();
        let ports = at(&schema, &["spec", "ports"]);
        assert!(
            matches!(schema.shape(ports), Shape::List { list: ListType::Map { keys }, .. } if keys == &["port", "protocol"])
        );
        let owners = at(&schema, &["metadata", "ownerReferences"]);
        assert!(matches!(schema.shape(owners), Shape::List { list: ListType::Map { keys }, .. } if keys == &["uid"]));
        let finalizers = at(&schema, &["metadata", "finalizers"]);
        assert!(matches!(schema.shape(finalizers), Shape::List { list: ListType::Set, .. }));
        let args = at(&schema, &["spec", "args"]);
        assert!(matches!(schema.shape(args), Shape::List { list: ListType::Atomic, .. }));
        assert!(schema.is_atomic_map(at(&schema, &["spec", "selector"])));
        assert!(!schema.is_atomic_map(at(&schema, &["metadata", "labels"])));
        assert_eq!(schema.shape(at(&schema, &["spec", "limits", "memory"])), &Shape::Scalar { quantity: true });
        assert_eq!(schema.shape(at(&schema, &["spec", "free", "anything"])), &Shape::Untyped);
        // A key's default stands in for it.
        let Shape::List { items, .. } = schema.shape(ports) else { panic!("a list") };
        assert_eq!(schema.member_default(*items, "protocol"), Some(&json!("TCP")));
    }

    #[test]
    fn a_type_that_contains_itself_is_one_entry() {
        let schema = thing();
        let nested = at(&schema, &["spec", "nested"]);
        assert_eq!(at(&schema, &["spec", "nested", "inner", "inner"]).id, nested.id);
    }

    #[test]
    fn a_kind_the_document_lacks_is_named() {
        let error = KindSchema::from_openapi(&document(), "apps", "v1", "Other").expect_err("no such kind");
        assert_eq!(error.to_string(), "the OpenAPI document describes no Other of apps/v1");
        assert_eq!(KindSchema::from_openapi(&json!({}), "", "v1", "ConfigMap"), Err(SchemaError::NoSchemas));
    }

    #[test]
    fn a_list_without_a_type_follows_its_patch_strategy() {
        assert_eq!(list_type(&json!({})), ListType::Atomic);
        assert_eq!(list_type(&json!({"x-kubernetes-patch-strategy": "merge"})), ListType::Set);
        assert_eq!(
            list_type(&json!({"x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"})),
            ListType::Map { keys: vec!["name".into()] }
        );
        assert_eq!(list_type(&json!({"x-kubernetes-patch-strategy": "retainKeys"})), ListType::Atomic);
        assert_eq!(
            list_type(&json!({"x-kubernetes-list-type": "atomic", "x-kubernetes-patch-strategy": "merge"})),
            ListType::Atomic
        );
    }
}
