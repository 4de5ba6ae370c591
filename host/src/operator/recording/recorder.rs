//! The recent reconciles of one module, in a store bounded by bytes: each
//! record the inputs `desired` and `status` were given and what they
//! answered, as the JSON texts the reconcile already had (no
//! re-serialising), Secret values redacted. The oldest go first when the
//! budget is reached; a reconcile of a parent identical to its latest record
//! (a resync of an unchanged parent) replaces that record instead of adding
//! one.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::gauge::Gauge;

use super::redact::redact_all;
use crate::operator::endpoints::metric_labels::NameLabels;
use crate::operator::endpoints::metrics::Metrics;
use crate::planning::step::StatusAnswer;
use crate::runtime::call_error::LogicError;
use crate::runtime::logic_module::LogicModule;
use crate::runtime::slot::ModuleSlot;

/// What a record costs beyond its texts: the record itself, its vectors'
/// and strings' headers and its place in the store's maps.
pub const RECORD_OVERHEAD: usize = 512;

/// One reconcile, as the hook in `reconcile.rs` sees it (borrowed; copied
/// only when it is stored).
pub struct Reconciled<'a> {
    /// The module version that answered.
    pub version: &'a str,
    pub digest: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// What `desired` was given.
    pub parent: &'a str,
    pub owned: &'a [String],
    pub related: &'a [String],
    /// What `desired` answered: the objects, or its error (an invalid spec).
    pub desired: Result<&'a [String], &'a LogicError>,
    /// What `status` was given as the owned objects, when not `owned` (after
    /// the writes: the objects as the API server answered them).
    pub status_owned: Option<&'a [String]>,
    pub problem: Option<&'a str>,
    /// What `status` was told the time is and answered.
    pub status: &'a StatusAnswer,
}

/// What `desired` answered.
#[derive(Clone, Debug)]
pub enum Answer {
    Desired(Vec<String>),
    Invalid(LogicError),
}

/// One recorded reconcile; Secret values redacted.
#[derive(Clone, Debug)]
pub struct Record {
    pub namespace: String,
    pub name: String,
    /// When it was recorded (RFC 3339).
    pub at: String,
    /// The module version that answered.
    pub version: String,
    pub digest: String,
    pub parent: String,
    pub owned: Vec<String>,
    pub related: Vec<String>,
    pub answer: Answer,
    pub status_owned: Option<Vec<String>>,
    pub now: String,
    pub problem: Option<String>,
    pub status: String,
    /// The Secrets whose values were replaced (`namespace/name`).
    pub redacted: Vec<String>,
    /// Of the inputs and answers before redaction, `now` aside: equal for
    /// a resync of an unchanged parent.
    fingerprint: u64,
    bytes: usize,
}

impl Record {
    fn new(reconciled: &Reconciled<'_>, fingerprint: u64) -> Self {
        let mut redacted = Vec::new();
        let mut parent = reconciled.parent.to_owned();
        redact_all(std::slice::from_mut(&mut parent), &mut redacted);
        let mut owned = reconciled.owned.to_vec();
        redact_all(&mut owned, &mut redacted);
        let mut related = reconciled.related.to_vec();
        redact_all(&mut related, &mut redacted);
        let answer = match reconciled.desired {
            Ok(desired) => {
                let mut desired = desired.to_vec();
                redact_all(&mut desired, &mut redacted);
                Answer::Desired(desired)
            }
            Err(error) => Answer::Invalid(error.clone()),
        };
        let status_owned = reconciled.status_owned.map(|objects| {
            let mut objects = objects.to_vec();
            redact_all(&mut objects, &mut redacted);
            objects
        });
        let mut record = Record {
            namespace: reconciled.namespace.to_owned(),
            name: reconciled.name.to_owned(),
            at: jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            version: reconciled.version.to_owned(),
            digest: reconciled.digest.to_owned(),
            parent,
            owned,
            related,
            answer,
            status_owned,
            now: reconciled.status.now.clone(),
            problem: reconciled.problem.map(str::to_owned),
            status: reconciled.status.text.clone(),
            redacted,
            fingerprint,
            bytes: 0,
        };
        record.bytes = record.size();
        record
    }

    /// The bytes it is counted for: its texts and [`RECORD_OVERHEAD`].
    fn size(&self) -> usize {
        let texts = |texts: &[String]| texts.iter().map(String::len).sum::<usize>();
        let answer = match &self.answer {
            Answer::Desired(desired) => texts(desired),
            Answer::Invalid(error) => error.to_string().len(),
        };
        RECORD_OVERHEAD
            + self.namespace.len()
            + self.name.len()
            + self.at.len()
            + self.version.len()
            + self.digest.len()
            + self.parent.len()
            + texts(&self.owned)
            + texts(&self.related)
            + answer
            + self.status_owned.as_deref().map_or(0, texts)
            + self.now.len()
            + self.problem.as_ref().map_or(0, String::len)
            + self.status.len()
            + texts(&self.redacted)
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The inputs and answers of a reconcile, `now` and the time aside.
fn fingerprint(reconciled: &Reconciled<'_>) -> u64 {
    // Fixed seed: the same reconcile, the same fingerprint.
    let mut hasher = foldhash::quality::FixedState::with_seed(0).build_hasher();
    reconciled.digest.hash(&mut hasher);
    reconciled.parent.hash(&mut hasher);
    reconciled.owned.hash(&mut hasher);
    reconciled.related.hash(&mut hasher);
    match reconciled.desired {
        Ok(desired) => desired.hash(&mut hasher),
        Err(error) => error.to_string().hash(&mut hasher),
    }
    reconciled.status_owned.hash(&mut hasher);
    reconciled.problem.hash(&mut hasher);
    reconciled.status.text.hash(&mut hasher);
    hasher.finish()
}

type ParentKey = (String, String);

#[derive(Default)]
struct Store {
    next: u64,
    /// By arrival, oldest first.
    records: BTreeMap<u64, Arc<Record>>,
    /// Each parent's latest record.
    latest: HashMap<ParentKey, u64>,
    bytes: usize,
}

impl Store {
    fn remove(&mut self, sequence: u64) -> Option<Arc<Record>> {
        let record = self.records.remove(&sequence)?;
        self.bytes -= record.bytes;
        let key = (record.namespace.clone(), record.name.clone());
        if self.latest.get(&key) == Some(&sequence) {
            self.latest.remove(&key);
        }
        Some(record)
    }
}

/// One module's records, at most `budget` bytes of them.
pub struct Recorder {
    module: String,
    budget: usize,
    /// The version serving now: the one an export replays.
    slot: Option<ModuleSlot>,
    store: Mutex<Store>,
    held: Gauge,
    held_bytes: Gauge,
}

impl Recorder {
    pub fn new(module: &str, budget: usize, slot: Option<ModuleSlot>, metrics: &Metrics) -> Self {
        let labels = NameLabels { module: module.to_owned() };
        let held = metrics.recorded_reconciles.get_or_create(&labels).clone();
        let held_bytes = metrics.recorded_reconcile_bytes.get_or_create(&labels).clone();
        Recorder { module: module.to_owned(), budget, slot, store: Mutex::default(), held, held_bytes }
    }

    /// Whether it records at all (`--record-budget` above 0).
    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    pub fn module(&self) -> &str {
        &self.module
    }

    /// The module version serving now, when known.
    pub fn serving(&self) -> Option<Arc<LogicModule>> {
        self.slot.as_ref().map(ModuleSlot::current)
    }

    /// Keeps `reconciled`: a new record (the oldest going while over the
    /// budget), or, identical to the parent's latest, that one renewed.
    pub fn record(&self, reconciled: &Reconciled<'_>) {
        if !self.enabled() {
            return;
        }
        let fingerprint = fingerprint(reconciled);
        let key = (reconciled.namespace.to_owned(), reconciled.name.to_owned());
        let same_as_latest = {
            let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
            store
                .latest
                .get(&key)
                .and_then(|sequence| store.records.get(sequence))
                .is_some_and(|latest| latest.fingerprint == fingerprint)
        };
        let record = if same_as_latest {
            None
        } else {
            // Copied and redacted outside the lock.
            Some(Record::new(reconciled, fingerprint))
        };
        let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        let latest = store.latest.get(&key).copied();
        let record = match record {
            Some(record) => record,
            // Renewed: the same inputs and answers, a later time.
            None => {
                let Some(previous) = latest.and_then(|sequence| store.remove(sequence)) else { return };
                let mut renewed = Record {
                    at: jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                    now: reconciled.status.now.clone(),
                    ..Arc::unwrap_or_clone(previous)
                };
                renewed.bytes = renewed.size();
                renewed
            }
        };
        if record.bytes > self.budget {
            tracing::debug!(
                module = self.module,
                bytes = record.bytes,
                "a reconcile larger than the record budget is not recorded"
            );
            self.publish(&store);
            return;
        }
        while store.bytes + record.bytes > self.budget {
            let Some((&oldest, _)) = store.records.first_key_value() else { break };
            store.remove(oldest);
        }
        let sequence = store.next;
        store.next += 1;
        store.bytes += record.bytes;
        store.records.insert(sequence, Arc::new(record));
        store.latest.insert(key, sequence);
        self.publish(&store);
    }

    fn publish(&self, store: &Store) {
        self.held.set(i64::try_from(store.records.len()).unwrap_or(i64::MAX));
        self.held_bytes.set(i64::try_from(store.bytes).unwrap_or(i64::MAX));
    }

    /// The records held, oldest first; only `parent`'s (namespace, name)
    /// when given.
    pub fn records(&self, parent: Option<(&str, &str)>) -> Vec<Arc<Record>> {
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        store
            .records
            .values()
            .filter(|r| parent.is_none_or(|(namespace, name)| r.namespace == namespace && r.name == name))
            .cloned()
            .collect()
    }

    /// Records held and the bytes they are counted for.
    pub fn held(&self) -> (usize, usize) {
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        (store.records.len(), store.bytes)
    }
}

/// Every module's recorder in the process, for the export route.
pub struct Records {
    budget: usize,
    metrics: Arc<Metrics>,
    modules: Mutex<BTreeMap<String, Arc<Recorder>>>,
}

impl Records {
    /// `budget` bytes per module; 0 records nothing.
    pub fn new(budget: u64, metrics: Arc<Metrics>) -> Self {
        Records { budget: usize::try_from(budget).unwrap_or(usize::MAX), metrics, modules: Mutex::default() }
    }

    /// The recorder of module `name` (one per name), which replays on the
    /// version `slot` serves.
    pub fn for_module(&self, name: &str, slot: ModuleSlot) -> Arc<Recorder> {
        let mut modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        modules
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Recorder::new(name, self.budget, Some(slot), &self.metrics)))
            .clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<Recorder>> {
        self.modules.lock().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
    }

    /// The modules recorded, by name.
    pub fn names(&self) -> Vec<String> {
        self.modules.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }

    pub fn enabled(&self) -> bool {
        self.budget > 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    struct Parent {
        name: String,
        parent: String,
        related: Vec<String>,
        desired: Vec<String>,
        status: StatusAnswer,
    }

    fn parent(name: &str, message: &str) -> Parent {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sig", "namespace": "ns"},
            "data": {"key": "c2VjcmV0LXZhbHVl"}});
        Parent {
            name: name.to_owned(),
            parent: json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"message": message}}).to_string(),
            related: vec![secret.to_string()],
            desired: vec![json!({"kind": "ConfigMap", "data": {"message": message}}).to_string()],
            status: StatusAnswer {
                now: "2026-01-01T00:00:00Z".into(),
                text: json!({"phase": message}).to_string(),
                value: json!({"phase": message}),
                pruned: Vec::new(),
            },
        }
    }

    fn reconciled(p: &Parent) -> Reconciled<'_> {
        Reconciled {
            version: "1.0.0",
            digest: "sha256:1",
            namespace: "ns",
            name: &p.name,
            parent: &p.parent,
            owned: &[],
            related: &p.related,
            desired: Ok(&p.desired),
            status_owned: Some(&p.desired),
            problem: None,
            status: &p.status,
        }
    }

    fn names(recorder: &Recorder) -> Vec<String> {
        recorder.records(None).iter().map(|r| r.name.clone()).collect()
    }

    #[test]
    fn the_oldest_records_go_when_the_budget_is_reached() {
        let metrics = Metrics::default();
        let one = Record::new(&reconciled(&parent("p0", "hi")), 0).bytes();
        let recorder = Recorder::new("m", 3 * one + one / 2, None, &metrics);
        for index in 0..5 {
            recorder.record(&reconciled(&parent(&format!("p{index}"), "hi")));
            let (_, bytes) = recorder.held();
            assert!(bytes <= 3 * one + one / 2, "{bytes} held");
        }
        assert_eq!(names(&recorder), ["p2", "p3", "p4"]);
        assert!(metrics.encode().contains("wasm_operator_recorded_reconciles{module=\"m\"} 3"), "{}", metrics.encode());
        // Larger than the whole budget: not kept, and nothing evicted for it.
        let mut huge = parent("huge", "hi");
        huge.status.text = "x".repeat(4 * one);
        recorder.record(&reconciled(&huge));
        assert_eq!(names(&recorder), ["p2", "p3", "p4"]);
        // Off: nothing.
        let off = Recorder::new("off", 0, None, &metrics);
        off.record(&reconciled(&parent("p", "hi")));
        assert_eq!(off.held(), (0, 0));
    }

    #[test]
    fn an_unchanged_parent_renews_its_latest_record_and_a_change_adds_one() {
        let recorder = Recorder::new("m", 1 << 20, None, &Metrics::default());
        recorder.record(&reconciled(&parent("a", "hi")));
        recorder.record(&reconciled(&parent("b", "hi")));
        let mut resync = parent("a", "hi");
        resync.status.now = "2026-01-01T00:10:00Z".into();
        recorder.record(&reconciled(&resync));
        assert_eq!(names(&recorder), ["b", "a"], "renewed, now the newest");
        assert_eq!(recorder.records(Some(("ns", "a")))[0].now, "2026-01-01T00:10:00Z");
        recorder.record(&reconciled(&parent("a", "changed")));
        assert_eq!(names(&recorder), ["b", "a", "a"]);
        // Only the latest is compared: back to the first answer is a change too.
        recorder.record(&reconciled(&parent("a", "hi")));
        assert_eq!(recorder.records(Some(("ns", "a"))).len(), 3);
    }

    #[test]
    fn a_record_holds_no_secret_value() {
        let recorder = Recorder::new("m", 1 << 20, None, &Metrics::default());
        recorder.record(&reconciled(&parent("a", "hi")));
        let record = &recorder.records(None)[0];
        assert_eq!(record.redacted, ["ns/sig"]);
        let texts = format!("{record:?}");
        assert!(!texts.contains("c2VjcmV0LXZhbHVl") && !texts.contains("secret-value"), "{texts}");
    }
}
