//! Whether an object already holds what a module applies, and if not, what
//! an apply would change: the write decision of a module that answers the
//! fields it sets (server-side apply), made without sending anything.
//!
//! The host marks each applied answer with its digest (an annotation, part
//! of the answer). An object needs no apply when it carries the digest of
//! the answer now and the module's manager owns exactly the fields the
//! answer sets: any other writer that changed or removed one of those
//! fields took it over (an update moves a field's ownership, a forced apply
//! too), and what the server filled in (defaults, also inside atomic lists
//! such as a StatefulSet's claim templates) is no one's change. Comparing
//! values alone cannot tell a server default from a field the module
//! stopped setting inside an atomic list; the digest can.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::planning::field_set::{Element, FieldPath, FieldSet, display, item_element};
use crate::planning::kind_schema::{KindSchema, ListType, Shape, ShapeRef};
use crate::planning::quantity::amount;

/// One thing an apply would change, as `plan` shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// A value set (or replaced) at `path`: `from` is what the object has.
    Set { path: String, from: Option<Value>, to: Value },
    /// A field the module set before and no longer sets: removed (unless
    /// another manager sets it too).
    Drop { path: String, from: Option<Value> },
    /// A field that already holds the answer's value and becomes the
    /// module's (an object the module never applied, or a value it now
    /// sets too).
    Own { path: String },
    /// The items of a list, in the answer's order.
    Order { path: String },
}

impl Change {
    pub fn path(&self) -> &str {
        match self {
            Change::Set { path, .. } | Change::Drop { path, .. } | Change::Own { path } | Change::Order { path } => {
                path
            }
        }
    }
}

/// The annotation an applied answer carries: its digest.
pub const DIGEST_ANNOTATION: &str = "wasm-operator.c5c3.io/applied-digest";

/// What the host applies for `answer`: without the members the API server
/// sets (a stale resourceVersion would make the apply a precondition, and
/// the main resource's apply ignores `status`), with its digest.
pub fn prepared(mut answer: Value) -> Value {
    if let Some(object) = answer.as_object_mut() {
        object.remove("status");
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            for member in SERVER_SET {
                metadata.remove(*member);
            }
        }
    }
    with_digest(answer)
}

/// The metadata the API server sets, left out of an apply.
const SERVER_SET: &[&str] =
    &["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp"];

/// `answer` with its digest annotation: what the host applies.
pub fn with_digest(answer: Value) -> Value {
    // Digested without its own mark (and without the annotations it alone
    // made): applying the same answer twice gives the same digest.
    let mut answer = without_digest(answer);
    // serde_json's maps are ordered by key: the text is canonical.
    let digest = Sha256::digest(answer.to_string().as_bytes());
    let hex: String = digest.iter().take(16).map(|byte| format!("{byte:02x}")).collect();
    if let Some(metadata) = answer.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Default::default()));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(DIGEST_ANNOTATION.to_owned(), Value::String(format!("sha256:{hex}")));
        }
    }
    answer
}

/// `object` without its digest annotation (and without `annotations`
/// when the digest was the only one).
pub fn without_digest(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut)
    {
        annotations.remove(DIGEST_ANNOTATION);
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
    }
    object
}

/// Whether `live` already holds `applied` (an answer [`with_digest`]):
/// the same digest, and the module's manager (`owned`: its fields, none
/// when it never applied the object) owns exactly what the answer sets.
pub fn holds(schema: &KindSchema, live: &Value, applied: &Value, owned: Option<&FieldSet>) -> bool {
    let digest =
        |object: &Value| object.pointer("/metadata/annotations").and_then(|a| a.get(DIGEST_ANNOTATION)).cloned();
    let same_digest = digest(live).is_some() && digest(live) == digest(applied);
    same_digest && owned.is_some_and(|owned| FieldSet::of(schema, applied) == *owned)
}

/// What applying `answer` to `live` would change. `owned`: the fields the
/// module's manager owns now (none: it never applied this object).
pub fn changes(schema: &KindSchema, live: &Value, answer: &Value, owned: Option<&FieldSet>) -> Vec<Change> {
    let mut changes = Vec::new();
    compare(schema, schema.root(), Some(live), answer, &mut Vec::new(), &mut changes);
    // Every top-level member but the identity and status: apiVersion and
    // kind cannot differ for an object found by them.
    changes.retain(|change| {
        let path = change.path();
        !(path.starts_with("status") || path == "apiVersion" || path == "kind" || is_identity(path) || is_digest(path))
    });
    let wanted = FieldSet::of(schema, answer);
    let empty = FieldSet::default();
    let owned = owned.unwrap_or(&empty);
    // A dropped item or object is one change, not one per member (the set
    // is sorted: a path comes before those inside it).
    let mut dropped: Vec<&FieldPath> = Vec::new();
    for path in owned.iter().filter(|path| !wanted.contains(path)) {
        if dropped.iter().any(|outer| path.starts_with(outer)) {
            continue;
        }
        dropped.push(path);
        changes.push(Change::Drop { path: display(path), from: lookup(schema, live, path).cloned() });
    }
    for path in wanted.iter().filter(|path| !owned.contains(path)) {
        let shown = display(path);
        if !is_digest(&shown) && !changes.iter().any(|change| shown.starts_with(change.path())) {
            changes.push(Change::Own { path: shown });
        }
    }
    changes
}

fn is_digest(path: &str) -> bool {
    path.strip_prefix("metadata.annotations") == Some(&format!("[{}]", Value::from(DIGEST_ANNOTATION)))
}

fn is_identity(path: &str) -> bool {
    matches!(path, "metadata.name" | "metadata.namespace" | "metadata.resourceVersion" | "metadata.uid")
}

/// Walks `answer` beside `live` (the same place in the object), noting
/// each value that differs.
fn compare(
    schema: &KindSchema,
    shape: ShapeRef,
    live: Option<&Value>,
    answer: &Value,
    path: &mut FieldPath,
    changes: &mut Vec<Change>,
) {
    let set = |changes: &mut Vec<Change>, path: &FieldPath| {
        changes.push(Change::Set { path: display(path), from: live.cloned(), to: answer.clone() })
    };
    match (schema.shape(shape), answer) {
        (Shape::Object { .. } | Shape::Untyped, Value::Object(members)) if !schema.is_atomic_map(shape) => {
            for (key, member) in members {
                path.push(Element::Field(key.clone()));
                let live_member = live.and_then(|live| live.get(key));
                compare(schema, schema.member(shape, key), live_member, member, path, changes);
                path.pop();
            }
        }
        (Shape::List { items, list }, Value::Array(wanted)) if *list != ListType::Atomic => {
            let live_items: &[Value] = live.and_then(Value::as_array).map_or(&[], Vec::as_slice);
            let live_elements: Vec<Element> = live_items
                .iter()
                .enumerate()
                .map(|(index, item)| item_element(schema, list, *items, item, index))
                .collect();
            let mut found = Vec::new();
            for (index, item) in wanted.iter().enumerate() {
                let element = item_element(schema, list, *items, item, index);
                let at = live_elements.iter().position(|live| *live == element);
                path.push(element);
                match at {
                    Some(at) => {
                        found.push(at);
                        compare(schema, *items, Some(&live_items[at]), item, path, changes);
                    }
                    None => changes.push(Change::Set { path: display(path), from: None, to: item.clone() }),
                }
                path.pop();
            }
            // The answer's items keep its order among the object's items.
            if found.windows(2).any(|pair| pair[0] > pair[1]) {
                changes.push(Change::Order { path: display(path) });
            }
        }
        (Shape::Scalar { quantity }, _) => {
            if !same_value(live, answer, *quantity) {
                set(changes, path);
            }
        }
        // An atomic list or map: the server may have filled in defaults
        // inside it (a claim template's volumeMode, a port's protocol).
        _ => {
            if !contained(live, answer) {
                set(changes, path);
            }
        }
    }
}

/// Equal as the API server stores them: a null, a zero value or an empty
/// object or list matches a missing field (the server leaves such fields
/// out of built-in kinds), numbers by value, quantities by amount.
fn same_value(live: Option<&Value>, answer: &Value, quantity: bool) -> bool {
    let Some(live) = live.filter(|live| !live.is_null()) else {
        return is_zero(answer);
    };
    if quantity && let (Some(a), Some(b)) = (live.as_str().and_then(amount), answer.as_str().and_then(amount)) {
        return a == b;
    }
    same_json(live, answer)
}

/// Whether `live` holds every value `answer` sets (and maybe more).
fn contained(live: Option<&Value>, answer: &Value) -> bool {
    match (live.filter(|live| !live.is_null()), answer) {
        (None, answer) => is_zero(answer),
        (Some(Value::Object(live)), Value::Object(answer)) => {
            answer.iter().all(|(key, value)| contained(live.get(key), value))
        }
        (Some(Value::Array(live)), Value::Array(answer)) => {
            live.len() == answer.len() && live.iter().zip(answer).all(|(live, answer)| contained(Some(live), answer))
        }
        (Some(live), answer) => same_json(live, answer),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Deep equality with numbers by value and a null member as absent.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            let present = |map: &serde_json::Map<String, Value>| map.iter().filter(|(_, v)| !v.is_null()).count();
            present(a) == present(b)
                && a.iter()
                    .filter(|(_, v)| !v.is_null())
                    .all(|(key, value)| b.get(key).is_some_and(|other| same_json(value, other)))
        }
        (a, b) => a == b,
    }
}

/// The value at `path` in `object`, list items found by their keys.
fn lookup<'a>(schema: &KindSchema, object: &'a Value, path: &[Element]) -> Option<&'a Value> {
    let mut shape = schema.root();
    let mut value = object;
    for element in path {
        match element {
            Element::Field(name) => {
                value = value.get(name)?;
                shape = schema.member(shape, name);
            }
            Element::Index(index) => {
                value = value.get(index)?;
                shape = items_of(schema, shape)?.0;
            }
            Element::Key(_) | Element::Value(_) => {
                let (items, list) = items_of(schema, shape)?;
                let found = value
                    .as_array()?
                    .iter()
                    .enumerate()
                    .find(|(index, item)| item_element(schema, &list, items, item, *index) == *element)?;
                value = found.1;
                shape = items;
            }
        }
    }
    Some(value)
}

fn items_of(schema: &KindSchema, shape: ShapeRef) -> Option<(ShapeRef, ListType)> {
    match schema.shape(shape) {
        Shape::List { items, list } => Some((*items, list.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::planning::kind_schema::tests::thing;

    fn live() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "uid": "x", "resourceVersion": "7",
                "labels": {"app": "a", "team": "b"}},
            "spec": {
                "replicas": 3,
                "ports": [{"port": 80, "protocol": "TCP", "name": "http"}, {"port": 53, "protocol": "UDP"}],
                "limits": {"memory": "64Mi", "cpu": "500m"},
                "args": ["-v"]
            },
            "status": {"ready": 3}
        })
    }

    fn answer() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "labels": {"app": "a"}},
            "spec": {"ports": [{"port": 80, "name": "http"}], "limits": {"memory": "67108864", "cpu": "0.5"}, "args": ["-v"]}
        })
    }

    #[test]
    fn an_object_that_holds_the_answer_and_whose_fields_the_module_owns_needs_nothing() {
        let schema = thing();
        let owned = FieldSet::of(&schema, &answer());
        // Fields others set (replicas, a label, another port) and the
        // server's (status, the key's default) are not the module's.
        assert_eq!(changes(&schema, &live(), &answer(), Some(&owned)), []);
    }

    #[test]
    fn a_value_the_answer_changes_is_set() {
        let schema = thing();
        let owned = FieldSet::of(&schema, &answer());
        let mut answer = answer();
        answer["spec"]["ports"][0]["name"] = json!("web");
        answer["spec"]["args"] = json!(["-v", "-x"]);
        assert_eq!(
            changes(&schema, &live(), &answer, Some(&owned)),
            [
                Change::Set { path: "spec.args".into(), from: Some(json!(["-v"])), to: json!(["-v", "-x"]) },
                Change::Set {
                    path: "spec.ports[port=80,protocol=TCP].name".into(),
                    from: Some(json!("http")),
                    to: json!("web")
                },
            ]
        );
    }

    #[test]
    fn a_field_the_module_no_longer_sets_is_dropped() {
        let schema = thing();
        let mut before = answer();
        before["metadata"]["labels"]["team"] = json!("b");
        let owned = FieldSet::of(&schema, &before);
        assert_eq!(
            changes(&schema, &live(), &answer(), Some(&owned)),
            [Change::Drop { path: "metadata.labels.team".into(), from: Some(json!("b")) }]
        );
    }

    #[test]
    fn a_dropped_item_is_one_change() {
        let schema = thing();
        let mut before = answer();
        before["spec"]["ports"] = json!([{"port": 80, "name": "http"}, {"port": 53, "protocol": "UDP"}]);
        let owned = FieldSet::of(&schema, &before);
        assert_eq!(
            changes(&schema, &live(), &answer(), Some(&owned)),
            [Change::Drop {
                path: "spec.ports[port=53,protocol=UDP]".into(),
                from: Some(json!({"port": 53, "protocol": "UDP"}))
            }]
        );
    }

    #[test]
    fn an_object_the_module_never_applied_becomes_its_own_once() {
        let schema = thing();
        let changes = changes(&schema, &live(), &answer(), None);
        assert!(!changes.is_empty());
        assert!(changes.iter().all(|change| matches!(change, Change::Own { .. })), "{changes:?}");
    }

    #[test]
    fn a_new_item_and_a_new_order_are_changes() {
        let schema = thing();
        let mut answer = answer();
        answer["spec"]["ports"] =
            json!([{"port": 53, "protocol": "UDP"}, {"port": 80, "name": "http"}, {"port": 8080}]);
        let owned = FieldSet::of(&schema, &answer);
        let found = changes(&schema, &live(), &answer, Some(&owned));
        assert_eq!(
            found,
            [
                Change::Set {
                    path: "spec.ports[port=8080,protocol=TCP]".into(),
                    from: None,
                    to: json!({"port": 8080})
                },
                Change::Order { path: "spec.ports".into() },
            ]
        );
    }

    #[test]
    fn what_the_server_sets_is_left_out_of_an_apply_and_the_digest_ignores_it() {
        let answer = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7", "uid": "u", "generation": 2,
                         "creationTimestamp": "2026-12-01T00:00:00Z", "managedFields": [], "labels": {"x": "1"}},
            "data": {"k": "v"}, "status": {"phase": "x"}});
        let applied = prepared(answer.clone());
        assert_eq!(applied["metadata"]["labels"], json!({"x": "1"}));
        assert!(applied.get("status").is_none());
        for member in SERVER_SET {
            assert!(applied["metadata"].get(*member).is_none(), "{member}");
        }
        let mut newer = answer;
        newer["metadata"]["resourceVersion"] = json!("8");
        assert_eq!(prepared(newer), applied, "the same answer at another resourceVersion is the same apply");
    }

    #[test]
    fn an_object_holds_an_answer_with_its_digest_and_the_fields_it_sets() {
        let schema = thing();
        let applied = with_digest(answer());
        let mut live = live();
        live["metadata"]["annotations"] = applied["metadata"]["annotations"].clone();
        let owned = FieldSet::of(&schema, &applied);
        assert!(holds(&schema, &live, &applied, Some(&owned)));
        // The digest is the answer's: the same answer, the same digest.
        assert_eq!(with_digest(applied.clone()), applied);
        // The answer changed (a port dropped inside it).
        let mut changed = answer();
        changed["spec"]["args"] = json!([]);
        assert!(!holds(&schema, &live, &with_digest(changed), Some(&owned)));
        // Another writer took a field over.
        let mut less = applied.clone();
        less["spec"].as_object_mut().expect("spec").remove("args");
        let taken = FieldSet::of(&schema, &less);
        assert!(!holds(&schema, &live, &applied, Some(&taken)));
        // Never applied by the module.
        assert!(!holds(&schema, &live, &applied, None));
        let mut unmarked = live.clone();
        unmarked["metadata"].as_object_mut().expect("metadata").remove("annotations");
        assert!(!holds(&schema, &unmarked, &applied, Some(&owned)));
    }

    #[test]
    fn defaults_the_server_fills_in_inside_an_atomic_value_are_no_change() {
        let schema = thing();
        let mut live = live();
        live["spec"]["args"] = json!(["-v"]);
        live["spec"]["free"] = json!({"a": {"b": 1, "filled": "in"}});
        let mut answer = answer();
        answer["spec"]["free"] = json!({"a": {"b": 1}});
        let owned = FieldSet::of(&schema, &answer);
        assert_eq!(changes(&schema, &live, &answer, Some(&owned)), []);
        answer["spec"]["free"] = json!({"a": {"b": 2}});
        assert_eq!(changes(&schema, &live, &answer, Some(&owned)).len(), 1);
    }

    #[test]
    fn zero_values_match_a_field_the_server_left_out() {
        assert!(same_value(None, &json!(false), false));
        assert!(same_value(None, &json!({}), false));
        assert!(same_value(Some(&Value::Null), &json!(""), false));
        assert!(!same_value(None, &json!(1), false));
        assert!(same_value(Some(&json!(1.0)), &json!(1), false));
        assert!(same_value(Some(&json!({"a": 1, "b": null})), &json!({"a": 1}), false));
    }
}
