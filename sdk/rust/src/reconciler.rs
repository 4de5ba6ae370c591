//! The trait a module implements, and the glue between it and the
//! contract's JSON texts: parsing, namespaces, owner references, merging
//! onto the current objects. Plain functions on strings, so a module's
//! tests run them natively (`wasm_operator_sdk::run`) and the component
//! export (`export_reconciler!`) only converts types.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::parse_error;
use crate::{Context, Error, Manifest, Object, ObjectRef, WriteModel, adopt, merge};

/// A logic module: what its parents should own, and their status.
pub trait Reconciler {
    /// The parent, typically a `#[derive(CustomResource)]` type.
    type Parent: DeserializeOwned;
    /// The parent's status (the derived type's status struct).
    type Status: Serialize;

    /// How the host writes the answers of `desired` (a constant, so a call
    /// does not build the manifest, whose CRD is generated, to learn it).
    const WRITES: WriteModel = WriteModel::Replace;

    /// Whether the module finalizes its parents: the host then holds the
    /// finalizer `wasm-operator.c5c3.io/<name>` on each, and while one is
    /// being deleted asks [`Reconciler::finalize`] until it is done.
    const FINALIZES: bool = false;

    fn manifest() -> Manifest;

    /// The objects of `reads` kinds this parent uses; the host passes those
    /// that exist as `ctx`'s related objects, and reconciles the parent again
    /// when one changes. None by default.
    fn references(_parent: &Self::Parent) -> Result<Vec<ObjectRef>, Error> {
        Ok(Vec::new())
    }

    /// Every object the parent should own, in the order to apply them. Set
    /// only the fields the module owns: the SDK sets the namespace and the
    /// controller owner reference; with [`WriteModel::Replace`] it merges
    /// the object onto the one the server has, keeping what the server
    /// filled in, and with [`WriteModel::Apply`] the host applies it as it
    /// is. An owned object not in the answer is deleted. `ctx.now()` is the
    /// time, and [`Context::reconcile_after`] asks to be called again.
    fn desired(parent: &Self::Parent, ctx: &Context) -> Result<Vec<Object>, Error>;

    /// While the parent is being deleted (when [`Reconciler::FINALIZES`]):
    /// the owned objects that should still exist meanwhile (answered as in
    /// `desired`; the others are deleted), and whether the module is done.
    /// Done, the host deletes what the parent still owns and removes the
    /// finalizer; not done, it asks again at the next change or the timer
    /// `ctx.reconcile_after` asks for. An error keeps the finalizer and is
    /// reported on the parent. Done with nothing by default.
    fn finalize(_parent: &Self::Parent, _ctx: &Context) -> Result<Finalizing, Error> {
        Ok(Finalizing::done())
    }

    /// The parent's status from the owned objects as they are after the
    /// reconcile, `ctx.now()` and `ctx.problem()`.
    fn status(parent: &Self::Parent, ctx: &Context) -> Result<Self::Status, Error>;
}

fn parse_value(what: &str, text: &str) -> Result<Value, Error> {
    let value: Value = serde_json::from_str(text).map_err(|e| Error::malformed("", format!("{what}: {e}")))?;
    if value.is_object() { Ok(value) } else { Err(Error::malformed("", format!("{what}: not a JSON object"))) }
}

/// The typed parent. A field that does not read as its type is `invalid` at
/// its path (the API server accepted it, the module cannot use it).
fn typed_parent<P: DeserializeOwned>(value: &Value) -> Result<P, Error> {
    serde_path_to_error::deserialize(value).map_err(|e| match parse_error("parent", e) {
        Error::Malformed(list) => Error::Invalid(list),
        other => other,
    })
}

fn values(what: &str, texts: &[String]) -> Result<Vec<Value>, Error> {
    texts.iter().enumerate().map(|(i, text)| parse_value(&format!("{what}[{i}]"), text)).collect()
}

fn text_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The same kind (group and kind; any version) and name.
fn same_object(a: &Value, b: &Value) -> bool {
    text_at(a, "/kind") == text_at(b, "/kind")
        && group_of(text_at(a, "/apiVersion").unwrap_or_default())
            == group_of(text_at(b, "/apiVersion").unwrap_or_default())
        && text_at(a, "/metadata/name") == text_at(b, "/metadata/name")
}

/// `merged` at `pointer` becomes exactly `desired`'s (removed if absent).
fn replace_at(merged: &mut Value, desired: &Value, pointer: &str) {
    let Some((parent, key)) = pointer.rsplit_once('/') else { return };
    let Some(Value::Object(slot)) = merged.pointer_mut(parent) else { return };
    match desired.pointer(pointer) {
        Some(value) => {
            slot.insert(key.to_owned(), value.clone());
        }
        None => {
            slot.remove(key);
        }
    }
}

/// What the host sends for `references`, answered by `R`.
pub fn references<R: Reconciler>(parent: &str) -> Result<Vec<ObjectRef>, Error> {
    let value = parse_value("parent", parent)?;
    R::references(&typed_parent(&value)?)
}

/// What `answer` (contract 1.3) answers: the objects, as `desired`
/// answers them, and the timer the module asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub objects: Vec<String>,
    pub again_after: Option<Duration>,
}

/// What [`Reconciler::finalize`] answers: the objects to keep while the
/// parent is being deleted, and whether the module is done with it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Finalizing {
    pub objects: Vec<Object>,
    pub done: bool,
}

impl Finalizing {
    /// Done: what remains goes, and so does the parent.
    pub fn done() -> Self {
        Self { objects: Vec::new(), done: true }
    }

    /// Not done yet: keep these objects meanwhile.
    pub fn keeping(objects: Vec<Object>) -> Self {
        Self { objects, done: false }
    }
}

/// What `finalize` (contract 1.3) answers as text: the objects, as
/// `desired` answers them, whether the module is done, and its timer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finalized {
    pub objects: Vec<String>,
    pub done: bool,
    pub again_after: Option<Duration>,
}

/// What a host of contract 1.3 sends for `finalize`, answered by `R`.
pub fn finalize<R: Reconciler>(
    parent: &str,
    owned: &[String],
    related: &[String],
    now: &str,
) -> Result<Finalized, Error> {
    let ctx = Context::new(values("owned", owned)?, values("related", related)?).at(now, None);
    let parent_value = parse_value("parent", parent)?;
    let typed = typed_parent(&parent_value)?;
    let Finalizing { objects, done } = R::finalize(&typed, &ctx)?;
    let objects = prepared::<R>(&parent_value, objects, &ctx)?;
    Ok(Finalized { objects, done, again_after: ctx.again_after() })
}

/// What the host sends for `desired`, answered by `R`: JSON texts in, the
/// objects to write out (namespaced, owned, and with `WriteModel::Replace`
/// merged onto the current ones).
pub fn desired<R: Reconciler>(parent: &str, owned: &[String], related: &[String]) -> Result<Vec<String>, Error> {
    let ctx = Context::new(values("owned", owned)?, values("related", related)?);
    objects::<R>(parent, &ctx)
}

/// What a host of contract 1.3 sends for `answer`, answered by `R`: as
/// [`desired`], told the time (RFC 3339), and with the timer the module
/// asked for.
pub fn answer<R: Reconciler>(parent: &str, owned: &[String], related: &[String], now: &str) -> Result<Answer, Error> {
    let ctx = Context::new(values("owned", owned)?, values("related", related)?).at(now, None);
    let objects = objects::<R>(parent, &ctx)?;
    Ok(Answer { objects, again_after: ctx.again_after() })
}

fn objects<R: Reconciler>(parent: &str, ctx: &Context) -> Result<Vec<String>, Error> {
    let parent_value = parse_value("parent", parent)?;
    let typed = typed_parent(&parent_value)?;
    let objects = R::desired(&typed, ctx)?;
    prepared::<R>(&parent_value, objects, ctx)
}

/// The answer's objects as the host takes them: namespaced, owned, and
/// with `WriteModel::Replace` merged onto the current ones.
fn prepared<R: Reconciler>(parent_value: &Value, objects: Vec<Object>, ctx: &Context) -> Result<Vec<String>, Error> {
    let namespace = text_at(parent_value, "/metadata/namespace");
    let applies = R::WRITES == WriteModel::Apply;
    objects
        .into_iter()
        .enumerate()
        .map(|(i, Object { value: mut object, replaced })| {
            let Value::Object(fields) = &mut object else {
                return Err(Error::unsupported(format!("desired object {i} is not a JSON object")));
            };
            if let (Some(namespace), Some(Value::Object(metadata))) = (namespace, fields.get_mut("metadata"))
                && !metadata.contains_key("namespace")
            {
                metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
            }
            let current = ctx.owned.iter().find(|o| same_object(o, &object));
            if applies {
                // Refused if another controller has it; the apply then sets
                // the module's own owner references, and others' stay.
                adopt(parent_value, current, &mut object.clone())?;
                adopt(parent_value, None, &mut object)?;
                return Ok(object.to_string());
            }
            adopt(parent_value, current, &mut object)?;
            let merged = match current {
                Some(current) => {
                    let mut merged = merge(current, &object);
                    // The owner references adopt() chose are the whole list.
                    merged["metadata"]["ownerReferences"] = object["metadata"]["ownerReferences"].take();
                    for pointer in &replaced {
                        replace_at(&mut merged, &object, pointer);
                    }
                    merged
                }
                None => object,
            };
            Ok(merged.to_string())
        })
        .collect()
}

/// What the host sends for `status`, answered by `R`.
pub fn status<R: Reconciler>(
    parent: &str,
    owned: &[String],
    related: &[String],
    now: &str,
    problem: Option<&str>,
) -> Result<String, Error> {
    let value = parse_value("parent", parent)?;
    let typed = typed_parent(&value)?;
    let ctx = Context::new(values("owned", owned)?, values("related", related)?).at(now, problem);
    let status = R::status(&typed, &ctx)?;
    serde_json::to_string(&status).map_err(|e| Error::unsupported(format!("serializing the status: {e}")))
}
