//! A module version as it serves: the module, and the caches of the kinds
//! its manifest names. Every reconcile takes one `Serving` at its start and
//! uses nothing else, so a version swapped in with other owned or read
//! kinds never meets another version's caches. Holding a `Serving` keeps
//! its caches' watches running: a version that adds a kind starts its watch
//! when it is verified, and the watch of a kind no version uses any more
//! stops once the last `Serving` holding it (the serving one, the one kept
//! for a rollback, a reconcile still in flight) is gone.

use std::sync::Arc;
use std::time::Duration;

use crate::operator::watching::caches::{self, Availability, Cache, CacheEvents, Caches};
use crate::operator::watching::kind_schemas::KindSchemaError;
use crate::planning::kind_schema::Schemas;
use crate::planning::kinds::{Kind, KindError, Kinds};
use crate::runtime::bindings::WriteModel;
use crate::runtime::logic_module::LogicModule;

pub struct Serving {
    pub module: Arc<LogicModule>,
    /// The owned kinds, in manifest order: a desired object's kind index
    /// points here and into `owned`.
    pub owned_kinds: Vec<Kind>,
    /// One cache per owned kind, in manifest order.
    pub owned: Vec<Arc<Cache>>,
    /// One cache per read kind, in manifest order (a kind both owned and
    /// read shares its cache).
    pub reads: Vec<Arc<Cache>>,
    /// Set once the owned kinds' schemas were read together
    /// ([`Serving::read_owned_schemas`]): the many reconciles of a start
    /// wait for one read.
    schemas_read: tokio::sync::OnceCell<()>,
}

impl Serving {
    /// `module` with the caches of its kinds, starting those no serving
    /// version watches yet.
    pub fn new(module: Arc<LogicModule>, caches: &Caches) -> Result<Self, KindError> {
        let kinds = Kinds::from_manifest(module.manifest())?;
        let owned = kinds.owned.iter().map(|kind| caches.of(kind)).collect();
        let reads = kinds.reads.iter().map(|kind| caches.of(kind)).collect();
        Ok(Self { module, owned_kinds: kinds.owned, owned, reads, schemas_read: tokio::sync::OnceCell::new() })
    }

    /// Subscribes `triggers` to every cache of this version (once each).
    pub fn subscribe(&self, triggers: &Arc<dyn CacheEvents>) {
        for cache in self.owned.iter().chain(&self.reads) {
            cache.subscribe(triggers);
        }
    }

    pub fn owns(&self, kind: &Kind) -> bool {
        self.owned_kinds.iter().any(|owned| owned.key() == kind.key())
    }

    pub fn reads(&self, kind: &Kind) -> bool {
        self.reads.iter().any(|cache| cache.kind.key() == kind.key())
    }

    /// Until every cache of this version has answered its first list (with
    /// objects, or with "not served"); after `timeout`, the kinds still
    /// unknown and why their watches fail (RBAC, say).
    pub async fn wait_until_known(&self, timeout: Duration) -> Result<(), String> {
        let caches: Vec<&Arc<Cache>> = self.owned.iter().chain(&self.reads).collect();
        let all_known = async {
            for cache in &caches {
                cache.wait_until_known().await;
            }
        };
        if tokio::time::timeout(timeout, all_known).await.is_ok() {
            return Ok(());
        }
        let unknown: Vec<String> = caches
            .iter()
            .filter(|cache| cache.availability() == Availability::Unknown)
            .map(|cache| {
                let why = cache.last_error().unwrap_or_else(|| "no answer yet".to_owned());
                format!("{} ({}): {why}", cache.kind.name(), cache.kind.resource.api_version)
            })
            .collect();
        Err(format!(
            "its kinds could not be listed within {} s (can the operator list and watch them?): {}",
            timeout.as_secs(),
            unknown.join("; ")
        ))
    }

    /// Reads the schemas of the owned kinds the API server serves, all
    /// together, once per version (each cache keeps its kind's, shared
    /// with other versions); a failed read is tried again by the next
    /// caller. A kind served only later reads its own (`Cache::schema`).
    pub async fn read_owned_schemas(&self) -> Result<(), KindSchemaError> {
        self.schemas_read
            .get_or_try_init(|| async {
                let served: Vec<&Arc<Cache>> =
                    self.owned.iter().filter(|cache| cache.availability() == Availability::Served).collect();
                caches::read_schemas(&served).await
            })
            .await
            .map(|&()| ())
    }

    /// Reads the owned kinds' schemas of a version that applies its
    /// answers, so that a dry run or a shadow decides its applies as its
    /// reconciles will. A schema that cannot be read is logged: a dry run
    /// then merges that kind as one without a published schema (lists
    /// whole), and its reconciles retry.
    pub async fn read_schemas(&self) {
        if self.module.write_model() != WriteModel::Apply {
            return;
        }
        if let Err(error) = self.read_owned_schemas().await {
            tracing::warn!(module = self.module.name(), %error, "reading the owned kinds' schemas");
        }
    }

    /// Adds the owned kinds' schemas read so far to `schemas`.
    pub fn add_schemas(&self, schemas: &mut Schemas) {
        for cache in &self.owned {
            if let Some(schema) = cache.known_schema() {
                schemas.insert(&cache.kind, schema);
            }
        }
    }

    /// The kinds this version watches and `other` does not, as
    /// `apiVersion/Kind`.
    pub fn kinds_beyond(&self, other: &Serving) -> Vec<String> {
        let mut beyond: Vec<String> = self
            .owned
            .iter()
            .chain(&self.reads)
            .filter(|cache| !other.owned.iter().chain(&other.reads).any(|o| o.kind.key() == cache.kind.key()))
            .map(|cache| format!("{}/{}", cache.kind.resource.api_version, cache.kind.name()))
            .collect();
        beyond.sort();
        beyond.dedup();
        beyond
    }
}
