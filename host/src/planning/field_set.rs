//! The set of fields an object sets, as server-side apply counts them: the
//! fields a manager owns after applying that object, the same set the API
//! server writes into the manager's `managedFields` entry (`fieldsV1`).
//! Comparing the set an answer sets with the set the module's manager owns
//! tells the host whether an apply would add or remove ownership, without
//! sending it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::planning::fields::is_word;
use crate::planning::kind_schema::{KindSchema, ListType, Shape, ShapeRef};

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// A member of an object: `f:name`.
    Field(String),
    /// An item of a keyed list, by its keys as JSON with sorted names:
    /// `k:{"port":80,"protocol":"TCP"}`.
    Key(String),
    /// An item of a set, as JSON: `v:"a"`.
    Value(String),
    /// An item by position (a list the schema keys by fields an item lacks).
    Index(usize),
}

pub type FieldPath = Vec<Element>;

/// The paths an object sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<FieldPath>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FieldSetError {
    #[error("fieldsV1 is not an object at {0}")]
    NotAnObject(String),
    #[error("fieldsV1 has a member {0:?} that names no field, key, value or index")]
    Element(String),
}

/// The paths the API server leaves out of every manager's set: the object's
/// identity and what only the server writes. `status` is reset on an apply
/// to the object itself, and a module never owns it there.
const STRIPPED: [&[&str]; 12] = [
    &["apiVersion"],
    &["kind"],
    &["metadata"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "creationTimestamp"],
    &["metadata", "selfLink"],
    &["metadata", "uid"],
    &["metadata", "clusterName"],
    &["metadata", "generation"],
    &["metadata", "managedFields"],
    &["metadata", "resourceVersion"],
];

impl FieldSet {
    /// The fields `object` sets, read with `schema`.
    pub fn of(schema: &KindSchema, object: &Value) -> Self {
        let mut set = BTreeSet::new();
        walk(schema, schema.root(), object, &mut Vec::new(), &mut set);
        let mut set = FieldSet(set);
        set.strip();
        set
    }

    /// A manager's `fieldsV1`, as `managedFields` holds it.
    pub fn from_fields_v1(fields: &Value) -> Result<Self, FieldSetError> {
        let mut set = BTreeSet::new();
        read_fields_v1(fields, &mut Vec::new(), &mut set)?;
        let mut set = FieldSet(set);
        set.strip();
        Ok(set)
    }

    /// The fields `manager` applied to `object`, as its `managedFields`
    /// say (an apply to the object itself); none when it applied none, or
    /// when its entry does not read as fieldsV1 (the object is then applied
    /// again, which is always safe).
    pub fn applied_by(object: &Value, manager: &str) -> Option<Self> {
        let entries = object.pointer("/metadata/managedFields")?.as_array()?;
        let entry = entries.iter().find(|entry| {
            entry.get("manager").and_then(Value::as_str) == Some(manager)
                && entry.get("operation").and_then(Value::as_str) == Some("Apply")
                && entry.get("subresource").and_then(Value::as_str).unwrap_or_default().is_empty()
        })?;
        Self::from_fields_v1(entry.get("fieldsV1")?).ok()
    }

    fn strip(&mut self) {
        self.0.retain(|path| {
            let is = |names: &[&str]| {
                path.len() == names.len()
                    && path.iter().zip(names).all(|(e, n)| matches!(e, Element::Field(f) if f == n))
            };
            !STRIPPED.iter().any(|names| is(names)) && !matches!(path.first(), Some(Element::Field(f)) if f == "status")
        });
    }

    pub fn contains(&self, path: &FieldPath) -> bool {
        self.0.contains(path)
    }

    pub fn iter(&self) -> impl Iterator<Item = &FieldPath> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The element that names `item` of a list of type `list` whose items have
/// shape `items` (at `index`).
pub fn item_element(schema: &KindSchema, list: &ListType, items: ShapeRef, item: &Value, index: usize) -> Element {
    match list {
        ListType::Map { keys } => {
            // Sorted by name whatever serde_json's map keeps: the server
            // writes keys sorted.
            let mut named = BTreeMap::new();
            for key in keys {
                match item.get(key).filter(|value| !value.is_null()).or_else(|| schema.member_default(items, key)) {
                    Some(value) => {
                        named.insert(key.clone(), value.clone());
                    }
                    None => continue,
                }
            }
            match serde_json::to_string(&named) {
                Ok(text) if !named.is_empty() => Element::Key(text),
                _ => Element::Index(index),
            }
        }
        ListType::Set => Element::Value(item.to_string()),
        ListType::Atomic => Element::Index(index),
    }
}

/// The set SMD's `ToFieldSet` makes: every scalar, atomic list and atomic
/// map is a member; an object's members are walked (a member that is null,
/// an empty object or not a declared field is also a member itself); a
/// keyed list's or a set's items are members and are walked.
fn walk(schema: &KindSchema, shape: ShapeRef, value: &Value, path: &mut FieldPath, set: &mut BTreeSet<FieldPath>) {
    match (schema.shape(shape), value) {
        (Shape::Object { .. } | Shape::Untyped, Value::Object(members)) => {
            if schema.is_atomic_map(shape) {
                set.insert(path.clone());
                return;
            }
            for (key, member) in members {
                path.push(Element::Field(key.clone()));
                walk(schema, schema.member(shape, key), member, path, set);
                let empty = member.is_null() || member.as_object().is_some_and(Map::is_empty);
                if empty || !schema.declares(shape, key) {
                    set.insert(path.clone());
                }
                path.pop();
            }
        }
        (Shape::List { items, list }, Value::Array(values)) if *list != ListType::Atomic => {
            let elements: Vec<Element> = values
                .iter()
                .enumerate()
                .map(|(index, item)| item_element(schema, list, *items, item, index))
                .collect();
            for (index, item) in values.iter().enumerate() {
                let element = &elements[index];
                let duplicated = elements.iter().filter(|other| *other == element).count() > 1;
                path.push(element.clone());
                if !duplicated {
                    walk(schema, *items, item, path, set);
                }
                set.insert(path.clone());
                path.pop();
            }
        }
        // Scalars, atomic lists and anything the schema does not expect.
        (_, Value::Null) => {}
        _ => {
            set.insert(path.clone());
        }
    }
}

fn read_fields_v1(node: &Value, path: &mut FieldPath, set: &mut BTreeSet<FieldPath>) -> Result<(), FieldSetError> {
    let Value::Object(members) = node else {
        return Err(FieldSetError::NotAnObject(display(path)));
    };
    for (key, child) in members {
        if key == "." {
            set.insert(path.clone());
            continue;
        }
        path.push(parse_element(key)?);
        match child {
            Value::Object(children) if children.is_empty() => {
                set.insert(path.clone());
            }
            _ => read_fields_v1(child, path, set)?,
        }
        path.pop();
    }
    Ok(())
}

fn parse_element(text: &str) -> Result<Element, FieldSetError> {
    let invalid = || FieldSetError::Element(text.to_owned());
    let (prefix, rest) = text.split_once(':').ok_or_else(invalid)?;
    match prefix {
        "f" => Ok(Element::Field(rest.to_owned())),
        // Parsed and written again: the same JSON as `item_element` writes.
        "k" => serde_json::from_str::<Value>(rest)
            .ok()
            .filter(Value::is_object)
            .map(|v| Element::Key(v.to_string()))
            .ok_or_else(invalid),
        "v" => serde_json::from_str::<Value>(rest).map(|v| Element::Value(v.to_string())).map_err(|_| invalid()),
        "i" => rest.parse().map(Element::Index).map_err(|_| invalid()),
        _ => Err(invalid()),
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // As `plan` writes any other path (`planning/fields.rs`): a key
            // that is not one word is quoted, `labels["app.kubernetes.io/name"]`.
            Element::Field(name) if is_word(name) => write!(f, ".{name}"),
            Element::Field(name) => write!(f, "[{}]", Value::from(name.as_str())),
            Element::Key(keys) => {
                let keys: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
                let named: Vec<String> = keys
                    .iter()
                    .map(|(name, value)| match value {
                        Value::String(text) => format!("{name}={text}"),
                        other => format!("{name}={other}"),
                    })
                    .collect();
                write!(f, "[{}]", named.join(","))
            }
            Element::Value(value) => write!(f, "[{value}]"),
            Element::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// A path as a reader writes it: `spec.ports[port=80,protocol=TCP].name`.
pub fn display(path: &[Element]) -> String {
    let text: String = path.iter().map(Element::to_string).collect();
    text.strip_prefix('.').map(str::to_owned).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::planning::kind_schema::tests::thing;

    fn paths(set: &FieldSet) -> Vec<String> {
        set.iter().map(|path| display(path)).collect()
    }

    #[test]
    fn an_objects_fields_are_counted_as_the_server_counts_them() {
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "a"},
                "ownerReferences": [{"uid": "u1", "name": "p"}], "finalizers": ["x"]},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "a"}},
                "ports": [{"port": 80, "name": "http"}, {"port": 53, "protocol": "UDP"}],
                "args": ["-v"],
                "free": {"a": {"b": 1}},
                "nested": {}
            },
            "status": {"ready": 1}
        });
        let set = FieldSet::of(&thing(), &object);
        assert_eq!(
            paths(&set),
            [
                "metadata.finalizers[\"x\"]",
                "metadata.labels.app",
                "metadata.ownerReferences[uid=u1]",
                "metadata.ownerReferences[uid=u1].name",
                "metadata.ownerReferences[uid=u1].uid",
                "spec.args",
                "spec.free.a",
                "spec.free.a.b",
                "spec.nested",
                "spec.ports[port=53,protocol=UDP]",
                "spec.ports[port=53,protocol=UDP].port",
                "spec.ports[port=53,protocol=UDP].protocol",
                // The missing key takes its default.
                "spec.ports[port=80,protocol=TCP]",
                "spec.ports[port=80,protocol=TCP].name",
                "spec.ports[port=80,protocol=TCP].port",
                "spec.replicas",
                "spec.selector",
            ]
        );
    }

    #[test]
    fn fields_v1_reads_to_the_same_set() {
        let object = json!({
            "metadata": {"name": "a", "labels": {"app": "a"}, "ownerReferences": [{"uid": "u1", "name": "p"}]},
            "spec": {"ports": [{"port": 80}], "args": ["-v"], "nested": {}}
        });
        // What the API server writes for that object.
        let fields = json!({
            "f:metadata": {
                "f:labels": {"f:app": {}},
                "f:ownerReferences": {"k:{\"uid\":\"u1\"}": {".": {}, "f:name": {}, "f:uid": {}}}
            },
            "f:spec": {
                "f:args": {}, "f:nested": {},
                "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}
            }
        });
        assert_eq!(FieldSet::from_fields_v1(&fields), Ok(FieldSet::of(&thing(), &object)));
    }

    #[test]
    fn bad_fields_v1_is_named() {
        assert_eq!(FieldSet::from_fields_v1(&json!({"x:y": {}})), Err(FieldSetError::Element("x:y".into())));
        assert_eq!(FieldSet::from_fields_v1(&json!({"f:spec": 1})), Err(FieldSetError::NotAnObject("spec".into())));
    }

    #[test]
    fn an_items_keys_are_written_sorted_as_the_server_writes_them() {
        let schema = thing();
        let keys = ListType::Map { keys: vec!["protocol".into(), "port".into()] };
        let item = json!({"protocol": "UDP", "port": 53});
        let element = item_element(&schema, &keys, schema.root(), &item, 0);
        assert_eq!(element, Element::Key(r#"{"port":53,"protocol":"UDP"}"#.into()));
        assert_eq!(parse_element(r#"k:{"protocol":"UDP","port":53}"#), Ok(element));
    }

    #[test]
    fn a_duplicated_item_is_a_member_but_not_walked() {
        let object = json!({"spec": {"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]}});
        assert_eq!(paths(&FieldSet::of(&thing(), &object)), ["spec.ports[port=80,protocol=TCP]"]);
    }
}
