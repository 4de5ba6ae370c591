//! How the host decodes what the API server sends into its caches
//! (host/src/operator/watching/cached_object.rs): a watch event, a list
//! page, one object, as kube-runtime's watcher decodes them, on any bytes.
//! Never a panic; a decoded object reads back to the object that came in
//! (without managedFields, with the cache's apiVersion and kind), its status
//! and labels are the object's, and the owner index follows its controller.

#![no_main]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kube::Resource;
use kube::core::{ObjectList, WatchEvent};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;
use wasm_operator::operator::watching::cached_object::CachedObject;
use wasm_operator::operator::watching::objects::{Objects, controller_uid, key_of};
use wasm_operator::planning::kinds::Kind;

/// The cache's kind: the Memcached module's Deployments.
fn deployments() -> &'static Kind {
    let kind = &wasm_operator_fuzz::memcached_owned_kinds()[0];
    assert_eq!(kind.name(), "Deployment");
    kind
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(event) = serde_json::from_slice::<WatchEvent<CachedObject>>(data) {
        let raw = serde_json::from_slice::<RawEvent>(data).ok().and_then(|e| e.object);
        match event {
            WatchEvent::Added(cached) | WatchEvent::Modified(cached) | WatchEvent::Deleted(cached) => {
                check(&cached, raw.as_deref().map(RawValue::get));
            }
            WatchEvent::Bookmark(_) | WatchEvent::Error(_) => {}
        }
    }
    if let Ok(page) = serde_json::from_slice::<ObjectList<CachedObject>>(data) {
        match serde_json::from_slice::<RawList>(data) {
            Ok(list) => {
                let raw = list.items.unwrap_or_default();
                assert_eq!(raw.len(), page.items.len());
                for (cached, raw) in page.items.iter().zip(&raw) {
                    check(cached, Some(raw.get()));
                }
            }
            // Not JSON to serde_json yet decoded: invalid UTF-8 in a member
            // the cache skips unread (an item's managedFields, as in
            // fuzz/regressions/watch_event/invalid-utf8-in-managed-fields.json).
            // No text to compare with; each item is still checked.
            Err(_) => {
                for cached in &page.items {
                    check(cached, None);
                }
            }
        }
    }
    let source = serde_json::from_slice::<Value>(data);
    match serde_json::from_slice::<CachedObject>(data) {
        // Not JSON to serde_json's Value yet decoded: invalid UTF-8 or a
        // lone surrogate in apiVersion or kind, which are skipped unread.
        // The text kept is still JSON (`check` parses it).
        Ok(cached) => match &source {
            Ok(value) => {
                assert!(value.is_object(), "decoded what is not a JSON object");
                check(&cached, std::str::from_utf8(data).ok());
            }
            Err(_) => check(&cached, None),
        },
        Err(_) => {
            // Refused only when it is not an object whose metadata is one
            // (or it names a member twice, which a server never does: the
            // first metadata may be what is refused, the last what Value keeps).
            let once = serde_json::from_slice::<TopLevelKeys>(data).is_ok_and(|keys| keys.are_unique());
            if let (Ok(Value::Object(members)), true) = (&source, once) {
                assert!(members.get("metadata").is_some_and(|m| !m.is_object()), "an object refused");
            }
        }
    }
});

/// The object of a watch event as the text it came in.
#[derive(Deserialize)]
struct RawEvent {
    object: Option<Box<RawValue>>,
}

/// The items of a list page as the texts they came in (null: none, as
/// kube's ObjectList reads it).
#[derive(Deserialize)]
struct RawList {
    items: Option<Vec<Box<RawValue>>>,
}

/// Checks a decoded object, and against `source`, the JSON text it came
/// from, when that is known and serde_json reads it as a value. (The cache
/// keeps members as the text they came in: a number beyond f64, 1e400, is
/// kept, and `module_value` reads such an object as null. An API server
/// never sends one: its own decoder refuses them.)
fn check(cached: &CachedObject, source: Option<&str>) {
    let kind = deployments();
    let json = cached.module_json(kind);
    let controller = controller_uid(cached).map(str::to_owned);
    let key = key_of(cached);
    let mut objects = Objects::default();
    objects.apply(Arc::new(cached.clone()));
    if let Some(uid) = &controller {
        let controlled: Vec<_> = objects.controlled_by(&key.0, uid).iter().map(|o| key_of(o)).collect();
        assert_eq!(controlled, vec![key.clone()]);
    }
    assert!(objects.delete(&key).is_some());
    if let Some(uid) = &controller {
        assert!(objects.controlled_by(&key.0, uid).is_empty());
    }
    assert!(objects.is_empty());

    let Some((text, source)) = source.and_then(|text| Some((text, serde_json::from_str::<Value>(text).ok()?))) else {
        return;
    };
    let value: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("module_json is not JSON ({e}): {json}"));
    assert_eq!(cached.module_value(kind), value);
    let mut expected = source.clone();
    if let Some(members) = expected.as_object_mut() {
        members.insert("apiVersion".into(), "apps/v1".into());
        members.insert("kind".into(), "Deployment".into());
        if let Some(metadata) = members.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
    }
    assert!(same(&value, &expected), "the cache changed the object:\n{value}\n{expected}");
    // A member named twice counts once, the last (as serde_json reads it);
    // `status` is read from the kept text, where a repeated one is refused
    // and reads as absent. An API server never repeats a member.
    let keys = serde_json::from_str::<TopLevelKeys>(text).expect("an object");
    if keys.0.iter().filter(|k| *k == "status").count() <= 1 {
        assert_eq!(cached.status(), source.get("status").cloned().unwrap_or_default());
    }
    let labels = source.pointer("/metadata/labels").cloned().unwrap_or_default();
    let labels: BTreeMap<String, String> =
        serde_json::from_value::<Option<BTreeMap<String, String>>>(labels).ok().flatten().unwrap_or_default();
    assert_eq!(cached.labels(), labels);
    let member = |key: &str| source.pointer(&format!("/metadata/{key}")).and_then(Value::as_str).map(str::to_owned);
    assert_eq!(cached.meta().name, member("name"));
    assert_eq!(cached.meta().namespace, member("namespace"));
    assert_eq!(cached.meta().uid, member("uid"));
    assert_eq!(cached.meta().resource_version, member("resourceVersion"));
}

/// Equal, but for the last digit of a float in metadata: the cache parses
/// metadata and writes it again, and serde_json (without its slower
/// float_roundtrip) may read a float's text one ulp off. Metadata holds no
/// floats an API server sends (names, labels, counters).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(key, x)| b.get(key).is_some_and(|y| same(x, y)))
        }
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y)),
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            (x - y).abs() <= f64::EPSILON * 4.0 * x.abs().max(y.abs())
        }
        (a, b) => a == b,
    }
}

/// The top-level member names of a JSON object, repeats included.
struct TopLevelKeys(Vec<String>);

impl TopLevelKeys {
    fn are_unique(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.0.iter().all(|key| seen.insert(key))
    }
}

impl<'de> Deserialize<'de> for TopLevelKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = TopLevelKeys;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevelKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(TopLevelKeys(keys))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}
