//! What `dev` prints, as it changes: every parent of the module's kind (its
//! status), the objects of the owned kinds it controls, and the events
//! about either, polled from the API server; and, with `--once`, when the
//! samples converged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use serde_json::Value;
use tokio::sync::watch;

use super::Output;
use super::cluster::Applied;
use super::summary;
use crate::runtime::bindings::{KindInfo, Manifest};

/// Nothing printed for this long, and the samples' parents converged: done.
const QUIET: Duration = Duration::from_secs(2);

pub struct Options {
    /// Only this namespace (`run --namespace`), else every one.
    pub namespace: Option<String>,
    pub output: Output,
    pub poll_interval: Duration,
    /// `--once`: stop when converged, or after this long.
    pub once: Option<Duration>,
}

pub enum Outcome {
    Converged,
    TimedOut,
    Stopped,
}

/// Prints a line (the rest of a text indented under it), the time first.
pub fn emit(text: &str) {
    use std::io::Write;
    let time = jiff::Zoned::now().strftime("%H:%M:%S").to_string();
    let mut out = String::new();
    for (index, line) in text.lines().enumerate() {
        if index == 0 {
            out.push_str(&format!("{time} {line}\n"));
        } else {
            out.push_str(&format!("{:width$} {line}\n", "", width = time.len()));
        }
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
}

fn resource(kind: &KindInfo) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind), &kind.plural)
}

fn api_version(kind: &KindInfo) -> String {
    if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) }
}

struct Printer<'a> {
    client: &'a kube::Client,
    manifest: &'a Manifest,
    options: &'a Options,
    /// What was printed last, by key: (the object's name, the text).
    shown: BTreeMap<String, (String, String)>,
    /// Events printed, by uid: the text.
    events: HashMap<String, String>,
    /// Events from before this are old news.
    since: jiff::Timestamp,
    /// Errors said once each, until they change.
    said: BTreeSet<String>,
    /// The parents of the last poll.
    parents: Vec<Value>,
}

pub async fn print_until_stopped(
    client: &kube::Client,
    manifest: &Manifest,
    applied: &[Applied],
    options: Options,
    mut stopped: watch::Receiver<bool>,
) -> Result<Outcome> {
    let started = Instant::now();
    let mut printer = Printer {
        client,
        manifest,
        options: &options,
        shown: BTreeMap::new(),
        events: HashMap::new(),
        since: jiff::Timestamp::now() - jiff::SignedDuration::from_secs(5),
        said: BTreeSet::new(),
        parents: Vec::new(),
    };
    let parent_version = api_version(&manifest.parent);
    let targets: Vec<&Applied> =
        applied.iter().filter(|a| a.kind == manifest.parent.kind && a.api_version == parent_version).collect();
    let mut last_change = Instant::now();
    loop {
        if printer.poll().await {
            last_change = Instant::now();
        }
        if let Some(timeout) = options.once {
            let pending = printer.pending(&targets);
            if pending.is_empty() && last_change.elapsed() >= QUIET {
                emit("converged");
                return Ok(Outcome::Converged);
            }
            if started.elapsed() > timeout {
                emit(&format!("not converged in {}s: {}", timeout.as_secs(), pending.join(", ")));
                return Ok(Outcome::TimedOut);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(options.poll_interval) => {}
            _ = stopped.wait_for(|stop| *stop) => return Ok(Outcome::Stopped),
        }
    }
}

impl Printer<'_> {
    fn api(&self, resource: &ApiResource) -> Api<DynamicObject> {
        match &self.options.namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }

    /// A failure to list, said once (until it is another).
    fn say(&mut self, what: String) {
        if self.said.insert(what.clone()) {
            eprintln!("dev: {what}");
        }
    }

    async fn list(&mut self, kind: &KindInfo) -> Option<Vec<Value>> {
        match self.api(&resource(kind)).list(&ListParams::default()).await {
            Ok(list) => {
                let mut objects: Vec<Value> = list
                    .items
                    .into_iter()
                    .filter_map(|object| serde_json::to_value(object).ok())
                    .map(|mut object| {
                        // A list's items come without apiVersion and kind.
                        object["apiVersion"] = Value::String(api_version(kind));
                        object["kind"] = Value::String(kind.kind.clone());
                        object
                    })
                    .collect();
                objects.sort_by_key(summary::name_of);
                Some(objects)
            }
            Err(error) => {
                self.say(format!("cannot list {}: {error}", kind.plural));
                None
            }
        }
    }

    /// One look at the cluster; prints what changed. Whether anything did.
    async fn poll(&mut self) -> bool {
        let manifest = self.manifest;
        let Some(parents) = self.list(&manifest.parent).await else { return false };
        let by_uid: HashMap<String, String> = parents
            .iter()
            .filter_map(|parent| {
                let uid = parent.pointer("/metadata/uid")?.as_str()?;
                let name = parent.pointer("/metadata/name")?.as_str()?;
                Some((uid.to_owned(), format!("{} {name}", manifest.parent.kind)))
            })
            .collect();
        let mut uids: BTreeSet<String> = by_uid.keys().cloned().collect();
        // (key, name, text), parents' owned objects before the parent.
        let mut now: Vec<(String, String, String)> = Vec::new();
        let mut owned_of: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
        for kind in &manifest.owned {
            let Some(objects) = self.list(kind).await else { continue };
            for object in objects {
                let Some(owner) = controller_uid(&object).filter(|uid| by_uid.contains_key(uid)) else { continue };
                if let Some(uid) = object.pointer("/metadata/uid").and_then(Value::as_str) {
                    uids.insert(uid.to_owned());
                }
                let name = summary::name_of(&object);
                let key = format!("owned {}/{} {name}", api_version(kind), kind.kind);
                let text = match self.options.output {
                    Output::Summary => format!("{name} (of {}): {}", by_uid[&owner], summary::line(&object)),
                    Output::Yaml => format!("{name} (of {}):\n{}", by_uid[&owner], indent(&summary::yaml(&object))),
                };
                owned_of.entry(owner).or_default().push((key, name, text));
            }
        }
        for parent in &parents {
            let uid = parent.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
            now.extend(owned_of.remove(uid).unwrap_or_default());
            let name = summary::name_of(parent);
            let text = match self.options.output {
                Output::Summary => parent_summary(parent),
                Output::Yaml => format!("{name}:\n{}", indent(&summary::yaml(parent))),
            };
            now.push((format!("parent {name}"), name, text));
        }
        self.parents = parents;

        let mut changed = false;
        let keys: BTreeSet<&String> = now.iter().map(|(key, _, _)| key).collect();
        let gone: Vec<String> = self.shown.keys().filter(|key| !keys.contains(key)).cloned().collect();
        for (key, name, text) in &now {
            if self.shown.get(key).is_none_or(|(_, shown)| shown != text) {
                emit(text);
                self.shown.insert(key.clone(), (name.clone(), text.clone()));
                changed = true;
            }
        }
        for key in gone {
            if let Some((name, _)) = self.shown.remove(&key) {
                emit(&format!("{name}: deleted"));
                changed = true;
            }
        }
        changed | self.print_events(&uids).await
    }

    /// Events about the parents and their objects, new or repeated since
    /// they were last printed.
    async fn print_events(&mut self, uids: &BTreeSet<String>) -> bool {
        let api: Api<Event> = match &self.options.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        let events = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(error) => {
                self.say(format!("cannot list events: {error}"));
                return false;
            }
        };
        let mut fresh: Vec<(jiff::Timestamp, String, String)> = Vec::new();
        for event in events {
            let Ok(event) = serde_json::to_value(event) else { continue };
            let about = event.pointer("/involvedObject/uid").and_then(Value::as_str).unwrap_or_default();
            if !uids.contains(about) {
                continue;
            }
            let Some(time) = event_time(&event).filter(|time| *time >= self.since) else { continue };
            let uid = event.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned();
            let text = event_line(&event);
            if self.events.get(&uid) != Some(&text) {
                fresh.push((time, uid, text));
            }
        }
        fresh.sort();
        let changed = !fresh.is_empty();
        for (_, uid, text) in fresh {
            emit(&text);
            self.events.insert(uid, text);
        }
        changed
    }

    /// The samples' parents (every parent when no sample is one) not yet
    /// converged: no status yet, or one of an older generation.
    fn pending(&self, targets: &[&Applied]) -> Vec<String> {
        let find = |namespace: Option<&str>, name: &str| {
            self.parents.iter().find(|parent| {
                parent.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                    && parent.pointer("/metadata/namespace").and_then(Value::as_str) == namespace
            })
        };
        if targets.is_empty() {
            return self.parents.iter().filter(|p| !converged(p)).map(summary::name_of).collect();
        }
        targets
            .iter()
            .filter(|target| find(target.namespace.as_deref(), &target.name).is_none_or(|p| !converged(p)))
            .map(|target| target.describe())
            .collect()
    }
}

/// A status, of the parent's generation when it says which.
fn converged(parent: &Value) -> bool {
    let Some(status) = parent.get("status").and_then(Value::as_object).filter(|s| !s.is_empty()) else {
        return false;
    };
    match status.get("observedGeneration") {
        Some(observed) => parent.pointer("/metadata/generation") == Some(observed),
        None => true,
    }
}

fn controller_uid(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|owner| owner["controller"] == Value::Bool(true))
        .and_then(|owner| owner["uid"].as_str())
        .map(str::to_owned)
}

fn parent_summary(parent: &Value) -> String {
    let name = summary::name_of(parent);
    let generation = parent.pointer("/metadata/generation").map(summary::flow).unwrap_or_else(|| "?".to_owned());
    match parent.get("status").filter(|status| status.as_object().is_some_and(|s| !s.is_empty())) {
        Some(status) => {
            format!("{name} (generation {generation}) status:\n{}", indent(&crate::authoring::documents::yaml(status)))
        }
        None => format!("{name} (generation {generation}): no status yet"),
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

/// The latest time an event says it happened.
fn event_time(event: &Value) -> Option<jiff::Timestamp> {
    ["/lastTimestamp", "/series/lastObservedTime", "/eventTime", "/firstTimestamp", "/metadata/creationTimestamp"]
        .iter()
        .filter_map(|pointer| event.pointer(pointer)?.as_str()?.parse::<jiff::Timestamp>().ok())
        .max()
}

fn event_line(event: &Value) -> String {
    let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    let about = match text("/involvedObject/namespace") {
        "" => format!("{} {}", text("/involvedObject/kind"), text("/involvedObject/name")),
        namespace => format!("{} {namespace}/{}", text("/involvedObject/kind"), text("/involvedObject/name")),
    };
    let count = event
        .pointer("/series/count")
        .or_else(|| event.pointer("/count"))
        .and_then(Value::as_u64)
        .filter(|count| *count > 1)
        .map(|count| format!(" (x{count})"))
        .unwrap_or_default();
    format!("event {} {} {about}: {}{count}", text("/type"), text("/reason"), text("/message"))
}
