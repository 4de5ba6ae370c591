//! An object as the caches keep it: the few metadata fields the host reads,
//! and the whole object as compact JSON text, which is what a module reads
//! anyway. A `serde_json::Value` tree of a Deployment takes several times
//! its text; at ten thousand parents with their children that difference is
//! most of the operator's memory. managedFields are dropped but for the
//! fields of each server-side apply (a module that writes by apply is
//! decided by its manager's fields: `planning/applied.rs`), and so are
//! apiVersion and kind, which list items leave out and the cache's kind
//! supplies. The text is held lz4-compressed (1.6-1.9x
//! smaller for the Memcached module's objects): compressing costs about a
//! microsecond per watch event, and a reconcile unpacks only the few
//! objects it reads.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::api::ApiResource;
use kube::core::DynamicResourceScope;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::operator::watching::managed_fields::{AppliedFields, ManagedFields};
use crate::planning::kinds::Kind;

/// Objects packed through the scratch buffer: every kind's typical object.
const SCRATCH_MAX_BYTES: usize = 64 << 10;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[derive(Clone, Debug)]
pub struct CachedObject {
    /// name, namespace, uid, resourceVersion, generation, deletionTimestamp,
    /// ownerReferences and finalizers; the rest is in `json`.
    metadata: ObjectMeta,
    /// The object without apiVersion, kind and managedFields, as JSON text
    /// compressed (an lz4 block, its length first).
    json: Box<[u8]>,
    /// The fields each manager applied (server-side apply, on the object
    /// itself, not a subresource), as the fieldsV1 text the server sent.
    /// None for an object no one applied: what an update writes is no one's
    /// to decide by.
    applied: Option<Box<[AppliedFields]>>,
}

impl CachedObject {
    /// One allocation of exactly the packed size. Compressing straight into
    /// a new buffer reserves the worst case (a little over the text's
    /// size) and then shrinks it in place: glibc frees the tail, a hole
    /// beside a long-lived entry, and a long run of watch events left the
    /// heap full of such holes (issue 22: a leader's free heap grew from
    /// 3.6 to 10.8 MiB in 10 minutes of churn, its heap in use level).
    /// Here the block is built in a scratch buffer kept per thread.
    fn pack(input: &[u8]) -> Box<[u8]> {
        let worst = 4 + lz4_flex::block::get_maximum_output_size(input.len());
        if worst > SCRATCH_MAX_BYTES {
            // Larger buffers are mapped and unmapped whole by the allocator.
            return lz4_flex::block::compress_prepend_size(input).into_boxed_slice();
        }
        SCRATCH.with_borrow_mut(|scratch| {
            scratch.resize(worst, 0);
            // The format `compress_prepend_size` writes: the text's length
            // (u32, little-endian), then the block.
            scratch[..4].copy_from_slice(&(input.len() as u32).to_le_bytes());
            match lz4_flex::block::compress_into(input, &mut scratch[4..]) {
                Ok(written) => Box::from(&scratch[..4 + written]),
                // Cannot happen with the worst case reserved; the plain way
                // still packs it.
                Err(_) => lz4_flex::block::compress_prepend_size(input).into_boxed_slice(),
            }
        })
    }

    /// The object's text without apiVersion, kind and managedFields.
    fn text(&self) -> String {
        // `pack` wrote these bytes from a String: they unpack to it.
        match lz4_flex::block::decompress_size_prepended(&self.json).map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) | Err(_) => {
                tracing::error!(object = ?self.metadata.name, "a cached object's text did not unpack");
                "{}".to_owned()
            }
        }
    }

    /// Bytes its text takes as held.
    pub fn held_bytes(&self) -> usize {
        self.json.len() + self.applied.iter().flatten().map(|a| a.manager.len() + a.fields.len()).sum::<usize>()
    }

    /// The fields `manager` applied to this object (fieldsV1 text); none
    /// when it never applied it.
    pub fn applied_fields(&self, manager: &str) -> Option<&str> {
        self.applied.as_deref()?.iter().find(|a| &*a.manager == manager).map(|a| &*a.fields)
    }

    /// The object as a module reads it: with its kind's apiVersion and kind.
    pub fn module_json(&self, kind: &Kind) -> String {
        let head = format!(
            "{{\"apiVersion\":{},\"kind\":{}",
            Value::from(kind.resource.api_version.as_str()),
            Value::from(kind.resource.kind.as_str())
        );
        let text = self.text();
        match text.strip_prefix('{') {
            Some("}") | None => head + "}",
            Some(members) => head + "," + members,
        }
    }

    /// [`Self::module_json`] parsed, to compare with what a module wants.
    pub fn module_value(&self, kind: &Kind) -> Value {
        // Text this type wrote from a JSON object parses back.
        serde_json::from_str(&self.module_json(kind)).unwrap_or_default()
    }

    /// The `status` member; `Null` when absent. The other members are
    /// skipped, not built: this runs once per reconcile.
    pub fn status(&self) -> Value {
        #[derive(Deserialize)]
        struct StatusOnly {
            #[serde(default)]
            status: Value,
        }
        serde_json::from_str::<StatusOnly>(&self.text()).map(|o| o.status).unwrap_or_default()
    }

    /// `metadata.labels` (kept in the text, not in the parsed metadata: only
    /// a canary's selector reads them).
    pub fn labels(&self) -> std::collections::BTreeMap<String, String> {
        #[derive(Deserialize)]
        struct Metadata {
            #[serde(default)]
            labels: Option<std::collections::BTreeMap<String, String>>,
        }
        #[derive(Deserialize)]
        struct LabelsOnly {
            metadata: Option<Metadata>,
        }
        serde_json::from_str::<LabelsOnly>(&self.text())
            .ok()
            .and_then(|o| o.metadata)
            .and_then(|m| m.labels)
            .unwrap_or_default()
    }

    /// Built from the members of a served object, each kept as the text it
    /// came in: a watch event costs no JSON tree of its spec, its status or
    /// even its metadata (whose managedFields were most of the allocations
    /// of decoding one).
    fn assemble(metadata: Option<MetadataMembers>, members: Vec<(String, Box<RawValue>)>) -> Self {
        let mut json = Vec::with_capacity(1024);
        json.push(b'{');
        let mut meta = ObjectMeta::default();
        let mut applied = None;
        if let Some(metadata) = metadata {
            meta = slim_metadata(&metadata.members);
            json.extend_from_slice(b"\"metadata\":");
            write_members(&mut json, &metadata.members);
            applied = (!metadata.applied.is_empty()).then(|| metadata.applied.into_boxed_slice());
        }
        for member in &members {
            if json.len() > 1 {
                json.push(b',');
            }
            write_member(&mut json, member);
        }
        json.push(b'}');
        Self { metadata: meta, json: Self::pack(&json), applied }
    }
}

/// `{"key":value,...}`.
fn write_members(json: &mut Vec<u8>, members: &[(String, Box<RawValue>)]) {
    json.push(b'{');
    for (n, member) in members.iter().enumerate() {
        if n > 0 {
            json.push(b',');
        }
        write_member(json, member);
    }
    json.push(b'}');
}

/// `"key":value`, the key escaped as JSON, the value as it came.
fn write_member(json: &mut Vec<u8>, (key, value): &(String, Box<RawValue>)) {
    // A string always serializes, and into a Vec nothing fails.
    let _ = serde_json::to_writer(&mut *json, key);
    json.push(b':');
    json.extend_from_slice(value.get().as_bytes());
}

/// An object's metadata as its members' texts, without managedFields, and
/// the fields each manager applied. A member named twice is kept once, the
/// last, as a JSON tree of it would (an API server never repeats one).
struct MetadataMembers {
    members: Vec<(String, Box<RawValue>)>,
    applied: Vec<AppliedFields>,
}

impl<'de> Deserialize<'de> for MetadataMembers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = MetadataMembers;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetadataMembers, A::Error> {
        let mut members: Vec<(String, Box<RawValue>)> = Vec::new();
        let mut applied = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "managedFields" {
                applied = map.next_value::<ManagedFields>()?.into_applied();
                continue;
            }
            let value = map.next_value::<Box<RawValue>>()?;
            match members.iter_mut().find(|(seen, _)| *seen == key) {
                Some(member) => member.1 = value,
                None => members.push((key, value)),
            }
        }
        Ok(MetadataMembers { members, applied })
    }
}

/// name, namespace, uid, resourceVersion, generation, deletionTimestamp,
/// ownerReferences and finalizers: what the host reads; the rest stays in
/// the JSON. Each
/// is read as it would be from a JSON tree of the metadata (a member of
/// the wrong type is absent).
fn slim_metadata(members: &[(String, Box<RawValue>)]) -> ObjectMeta {
    let raw = |key: &str| members.iter().find(|(name, _)| name == key).map(|(_, value)| value.get());
    let text = |key: &str| raw(key).and_then(|value| serde_json::from_str::<String>(value).ok());
    let tree = |key: &str| raw(key).and_then(|value| serde_json::from_str::<Value>(value).ok());
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        uid: text("uid"),
        resource_version: text("resourceVersion"),
        generation: tree("generation").and_then(|g| g.as_i64()),
        deletion_timestamp: tree("deletionTimestamp").and_then(|t| Time::deserialize(t).ok()),
        owner_references: tree("ownerReferences").and_then(|r| Vec::<OwnerReference>::deserialize(r).ok()),
        finalizers: tree("finalizers").and_then(|f| Vec::<String>::deserialize(f).ok()),
        ..ObjectMeta::default()
    }
}

impl<'de> Deserialize<'de> for CachedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = CachedObject;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CachedObject, A::Error> {
        let mut metadata = None;
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                // The cache's kind supplies them (list items lack them).
                "apiVersion" | "kind" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "metadata" => metadata = Some(map.next_value::<MetadataMembers>()?),
                _ => members.push((key, map.next_value::<Box<RawValue>>()?)),
            }
        }
        Ok(CachedObject::assemble(metadata, members))
    }
}

impl Resource for CachedObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(resource: &ApiResource) -> Cow<'_, str> {
        resource.group.as_str().into()
    }

    fn version(resource: &ApiResource) -> Cow<'_, str> {
        resource.version.as_str().into()
    }

    fn kind(resource: &ApiResource) -> Cow<'_, str> {
        resource.kind.as_str().into()
    }

    fn api_version(resource: &ApiResource) -> Cow<'_, str> {
        resource.api_version.as_str().into()
    }

    fn plural(resource: &ApiResource) -> Cow<'_, str> {
        resource.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
pub(super) mod tests {
    use kube::ResourceExt;
    use serde_json::json;

    use super::*;
    use crate::runtime::bindings::KindInfo;

    pub(in crate::operator::watching) fn deployments() -> Kind {
        let info = KindInfo {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            namespaced: true,
        };
        Kind::from_info(&info).expect("namespaced")
    }

    #[test]
    fn keeps_what_the_host_reads_and_the_object_without_managed_fields() {
        let server = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "team", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                "labels": {"app": "web"},
                "deletionTimestamp": "2026-11-23T10:00:00Z",
                "ownerReferences": [{"apiVersion": "x/v1", "kind": "X", "name": "p", "uid": "p-1", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "finalizers": ["example.com/keep"],
            },
            "spec": {"replicas": 2, "template": {"metadata": {"creationTimestamp": null}}},
        });
        let cached: CachedObject = serde_json::from_str(&server.to_string()).expect("an object");
        assert_eq!((cached.name_any(), cached.namespace()), ("web".to_owned(), Some("team".to_owned())));
        assert_eq!(cached.uid().as_deref(), Some("u-1"));
        assert_eq!(cached.resource_version().as_deref(), Some("42"));
        assert_eq!(cached.meta().generation, Some(3));
        assert!(cached.meta().deletion_timestamp.is_some());
        assert_eq!(cached.owner_references()[0].uid, "p-1");
        assert_eq!(cached.finalizers(), ["example.com/keep"], "the host holds its own finalizers by them");
        assert!(cached.meta().labels.is_none(), "labels stay in the JSON only");

        let mut expected = server;
        expected["metadata"].as_object_mut().expect("metadata").remove("managedFields");
        assert_eq!(cached.module_value(&deployments()), expected);
        assert_eq!(cached.status(), Value::Null);
    }

    #[test]
    fn a_list_item_gets_its_kind_from_the_cache() {
        let item: CachedObject = serde_json::from_str(r#"{"metadata":{"name":"web"}}"#).expect("an object");
        let json: Value = serde_json::from_str(&item.module_json(&deployments())).expect("JSON");
        assert_eq!(json, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}));
        let empty: CachedObject = serde_json::from_str("{}").expect("an object");
        assert_eq!(empty.module_value(&deployments()), json!({"apiVersion": "apps/v1", "kind": "Deployment"}));
        assert!(serde_json::from_str::<CachedObject>("[1]").is_err(), "not an object");
    }

    /// What a module reads comes back whole, and the cache holds it in less
    /// than its text (labels repeat in a Deployment's selector and template).
    #[test]
    fn a_deployment_is_held_compressed_and_read_back_whole() {
        let labels = json!({"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "full-cache",
            "app.kubernetes.io/managed-by": "memcached-operator", "app.kubernetes.io/component": "cache"});
        let server = json!({
            "metadata": {"name": "full-cache", "namespace": "team", "uid": "0b7c4f1e-5a2d-4e8b-9c3f-6d1a2b3c4d5e",
                "labels": labels, "resourceVersion": "812"},
            "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6.38",
                        "args": ["-m", "1024", "-c", "1024", "-t", "4"], "ports": [{"containerPort": 11211, "name": "memcached"}]}]}}},
        });
        let text = server.to_string();
        let cached: CachedObject = serde_json::from_str(&text).expect("an object");
        let mut expected = server;
        expected["apiVersion"] = "apps/v1".into();
        expected["kind"] = "Deployment".into();
        assert_eq!(cached.module_value(&deployments()), expected);
        assert_eq!(cached.labels().get("app.kubernetes.io/name").map(String::as_str), Some("memcached"));
        assert!(cached.held_bytes() * 10 < text.len() * 8, "{} bytes held for {}", cached.held_bytes(), text.len());
    }

    /// A member of the metadata named twice counts once, the last, as in a
    /// JSON tree of the object; the host's fields and labels agree with it.
    #[test]
    fn a_metadata_member_named_twice_reads_as_its_last() {
        let text = r#"{"metadata":{"name":"old","labels":{"a":"1"},"managedFields":[{"manager":"x"}],
            "name":"web","labels":{"b":"2"},"namespace":"team"},"spec":{"replicas":1}}"#;
        let cached: CachedObject = serde_json::from_str(text).expect("an object");
        assert_eq!((cached.name_any(), cached.namespace()), ("web".to_owned(), Some("team".to_owned())));
        assert_eq!(cached.labels(), [("b".to_owned(), "2".to_owned())].into());
        let mut expected: Value = serde_json::from_str(text).expect("JSON");
        expected["metadata"].as_object_mut().expect("metadata").remove("managedFields");
        expected["apiVersion"] = "apps/v1".into();
        expected["kind"] = "Deployment".into();
        assert_eq!(cached.module_value(&deployments()), expected);
        assert!(!cached.module_json(&deployments()).contains("old"), "the first name is not kept");
    }

    /// Through the scratch buffer or not, the packed bytes are lz4's own
    /// size-prepended block, in an allocation of exactly their length.
    #[test]
    fn a_packed_text_is_lz4s_block_with_nothing_reserved() {
        let small = r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#.to_owned();
        let medium = format!(r#"{{"data":{{"k":"{}"}}}}"#, "abcdefgh".repeat(500));
        let large =
            format!(r#"{{"data":{{"k":"{}"}}}}"#, (0..20_000).map(|i| (i % 7919).to_string()).collect::<String>());
        assert!(4 + lz4_flex::block::get_maximum_output_size(large.len()) > SCRATCH_MAX_BYTES);
        for text in [&small, &medium, &large, &small] {
            let packed = CachedObject::pack(text.as_bytes());
            assert_eq!(packed.as_ref(), lz4_flex::block::compress_prepend_size(text.as_bytes()).as_slice());
            let unpacked = lz4_flex::block::decompress_size_prepended(&packed).expect("a block");
            assert_eq!(unpacked, text.as_bytes());
        }
    }

    /// The two ways objects reach a cache: watch events and list pages,
    /// as kube-runtime's watcher decodes them.
    #[test]
    fn watch_events_and_list_pages_decode() {
        let event = r#"{"type":"MODIFIED","object":{"apiVersion":"apps/v1","kind":"Deployment",
            "metadata":{"name":"web","namespace":"team","resourceVersion":"7","managedFields":[{"manager":"x"}]},
            "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}}},"status":{"replicas":3}}}"#;
        let event: kube::core::WatchEvent<CachedObject> = serde_json::from_str(event).expect("a watch event");
        let kube::core::WatchEvent::Modified(object) = event else { panic!("a modification") };
        assert_eq!(object.resource_version().as_deref(), Some("7"));
        assert_eq!(
            object.module_value(&deployments()),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "team", "resourceVersion": "7"},
                   "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 3}})
        );

        let page = r#"{"apiVersion":"apps/v1","kind":"DeploymentList","metadata":{"resourceVersion":"9"},
            "items":[{"metadata":{"name":"a"},"spec":{"replicas":1}},{"metadata":{"name":"b"}}]}"#;
        let page: kube::core::ObjectList<CachedObject> = serde_json::from_str(page).expect("a list page");
        let names: Vec<String> = page.items.iter().map(ResourceExt::name_any).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(page.items[0].module_value(&deployments())["spec"], json!({"replicas": 1}));
    }
}
