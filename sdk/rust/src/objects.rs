//! Objects across the contract: what a reconcile is given (the owned
//! objects as the server has them, the related objects, the time, why the
//! last step failed) and what it answers (objects of owned kinds).

use std::cell::Cell;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::conditions::parse_time;

/// One object the parent should own, built from a typed value. The SDK
/// sets its namespace, its controller owner reference and merges it onto
/// the current object of the same kind and name.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    pub(crate) value: Value,
    /// JSON pointers (`/data`) the module owns whole: replaced, not merged.
    pub(crate) replaced: Vec<String>,
}

impl Object {
    /// A k8s-openapi object (`ConfigMap`, `Deployment`, ...) or a custom
    /// resource: set only the fields the module owns.
    pub fn new<K: Resource<DynamicType = ()> + Serialize>(object: &K) -> Self {
        // These types serialize to JSON objects; a failure leaves `null`,
        // which the SDK reports instead of sending.
        Self::json(serde_json::to_value(object).unwrap_or(Value::Null))
    }

    /// An object given as JSON, for kinds with no Rust type.
    pub fn json(value: Value) -> Self {
        Object { value, replaced: Vec::new() }
    }

    /// The field at `pointer` (`/data`) is the module's whole: keys the
    /// server (or an earlier version) has there and this answer lacks are
    /// removed instead of kept by the merge.
    #[must_use]
    pub fn replacing(mut self, pointer: &str) -> Self {
        self.replaced.push(pointer.to_owned());
        self
    }

    pub fn as_json(&self) -> &Value {
        &self.value
    }
}

/// What a reconcile is given besides the parent.
#[derive(Debug, Default)]
pub struct Context {
    pub(crate) owned: Vec<Value>,
    pub(crate) related: Vec<Value>,
    pub(crate) now: Option<Time>,
    pub(crate) problem: Option<String>,
    /// The timer `desired` asked for ([`Context::reconcile_after`]).
    pub(crate) again_after: Cell<Option<Duration>>,
}

fn is<K: Resource<DynamicType = ()>>(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some(&K::kind(&()))
        && object.get("apiVersion").and_then(Value::as_str) == Some(&K::api_version(&()))
}

fn named(object: &Value, name: &str) -> bool {
    object.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
}

fn typed<K: DeserializeOwned>(object: &Value) -> Option<K> {
    // Read from the borrowed value: no copy of the object per lookup.
    match K::deserialize(object) {
        Ok(value) => Some(value),
        Err(error) => {
            crate::log::warn(format!("an object did not read as {}: {error}", std::any::type_name::<K>()));
            None
        }
    }
}

impl Context {
    /// For tests: a context with these owned and related objects.
    pub fn new(owned: Vec<Value>, related: Vec<Value>) -> Self {
        Context { owned, related, now: None, problem: None, again_after: Cell::new(None) }
    }

    /// For tests: the time `status` is called at, and why the reconcile failed.
    #[must_use]
    pub fn at(mut self, now: &str, problem: Option<&str>) -> Self {
        self.now = Some(parse_time(now));
        self.problem = problem.map(str::to_owned);
        self
    }

    /// The owned object of kind `K` named `name`, as the server has it.
    pub fn owned<K: Resource<DynamicType = ()> + DeserializeOwned>(&self, name: &str) -> Option<K> {
        self.owned.iter().find(|o| is::<K>(o) && named(o, name)).and_then(typed)
    }

    /// Every owned object of kind `K`.
    pub fn all_owned<K: Resource<DynamicType = ()> + DeserializeOwned>(&self) -> Vec<K> {
        self.owned.iter().filter(|o| is::<K>(o)).filter_map(typed).collect()
    }

    /// The related object of kind `K` named `name` (one the parent
    /// references), if it exists.
    pub fn related<K: Resource<DynamicType = ()> + DeserializeOwned>(&self, name: &str) -> Option<K> {
        self.related.iter().find(|o| is::<K>(o) && named(o, name)).and_then(typed)
    }

    /// The owned objects as JSON, for kinds with no Rust type.
    pub fn owned_json(&self) -> &[Value] {
        &self.owned
    }

    pub fn related_json(&self) -> &[Value] {
        &self.related
    }

    /// The time of this call: of `status`, and of `desired` on a host of
    /// contract 1.3 or later (the epoch during `desired` on an older one).
    pub fn now(&self) -> Time {
        self.now.clone().unwrap_or_else(|| Time(Default::default()))
    }

    /// During `desired`: reconcile this parent again after `after`, even
    /// if nothing it reads changes (a deadline, a poll). The host keeps one
    /// timer per parent, waits at least a second, and comes back sooner if
    /// something changes (its resync too); each answer sets the timer anew,
    /// so an answer that asks nothing clears it. Asked more than once in
    /// one answer, the soonest wins. A host older than contract 1.3 ignores
    /// it.
    pub fn reconcile_after(&self, after: Duration) {
        let soonest = self.again_after.get().map_or(after, |asked| asked.min(after));
        self.again_after.set(Some(soonest));
    }

    /// The timer this answer asked for, if any (for a module's tests).
    pub fn again_after(&self) -> Option<Duration> {
        self.again_after.get()
    }

    /// Why this reconcile failed (the host's `invalid: ...` for an invalid
    /// spec, or a refused write), during `status`.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }
}

/// `metadata.generation` of a parent, for `observedGeneration`.
pub fn observed_generation<P: Resource>(parent: &P) -> Option<i64> {
    parent.meta().generation
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use serde_json::json;

    use super::*;

    #[test]
    fn lookups_are_by_kind_and_name() {
        let ctx = Context::new(
            vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}),
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
            ],
            vec![json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"}})],
        );
        let a: ConfigMap = ctx.owned("a").expect("found");
        assert_eq!(a.data.expect("data")["k"], "v");
        assert_eq!(ctx.all_owned::<ConfigMap>().len(), 2);
        assert!(ctx.owned::<ConfigMap>("c").is_none());
        assert!(ctx.related::<Secret>("tls").is_some());
        assert!(ctx.related::<ConfigMap>("tls").is_none());
        let ctx = ctx.at("2026-11-25T10:00:00Z", Some("invalid: spec.x: no"));
        assert_eq!(ctx.problem(), Some("invalid: spec.x: no"));
        assert_eq!(ctx.now().0.to_string(), "2026-11-25T10:00:00Z");
    }

    #[test]
    fn the_soonest_timer_asked_wins() {
        let ctx = Context::default();
        assert_eq!(ctx.again_after(), None);
        ctx.reconcile_after(Duration::from_secs(30));
        ctx.reconcile_after(Duration::from_secs(5));
        ctx.reconcile_after(Duration::from_secs(60));
        assert_eq!(ctx.again_after(), Some(Duration::from_secs(5)));
    }
}
