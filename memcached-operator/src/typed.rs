//! The Memcached component's typed interface (`wit/memcached`), bound on
//! top of the generic loader: the same compiled module and store limits,
//! one fresh instance per use.

use std::path::Path;

use wasm_operator::runtime::call_error::{CallError, CallResult, FieldError, LogicError, failure};
use wasm_operator::runtime::call_state::{CallState, call_store};
use wasm_operator::runtime::engine::ModuleEngine;
use wasm_operator::runtime::logic_module::{LoadError, LogicModule, ModuleSource};
use wasmtime::Store;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/memcached",
        world: "c5c3:memcached/memcached-logic",
    });
}

use bindings::exports::c5c3::memcached::memcached as wit;
use bindings::exports::wasm_operator::controller::reconciler as wit_errors;

/// A Memcached logic module: the generic module plus its typed interface.
pub struct MemcachedModule {
    module: LogicModule,
    pre: bindings::MemcachedLogicPre<CallState>,
}

#[derive(Debug, thiserror::Error)]
pub enum TypedLoadError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{source_name} does not export the typed c5c3:memcached interface: {error:#}")]
    NotMemcached { source_name: ModuleSource, error: wasmtime::Error },
}

impl MemcachedModule {
    /// The component built into this binary.
    pub fn builtin(engine: &ModuleEngine) -> Result<Self, TypedLoadError> {
        let module =
            LogicModule::from_bytes(engine, ModuleSource::BuiltIn("memcached"), crate::BUILTIN_COMPONENT, false)?;
        Self::new(module)
    }

    pub fn from_file(engine: &ModuleEngine, path: &Path, allow_precompiled: bool) -> Result<Self, TypedLoadError> {
        Self::new(LogicModule::from_file(engine, path, allow_precompiled)?)
    }

    pub fn new(module: LogicModule) -> Result<Self, TypedLoadError> {
        let pre = bindings::MemcachedLogicPre::new(module.instance_pre())
            .map_err(|error| TypedLoadError::NotMemcached { source_name: module.source().clone(), error })?;
        Ok(Self { module, pre })
    }

    /// The generic side: manifest, reconciler, digest.
    pub fn logic(&self) -> &LogicModule {
        &self.module
    }

    pub fn into_logic(self) -> LogicModule {
        self.module
    }

    /// A fresh instance of the typed interface in its own store. Use one per
    /// call (or per command): a trap poisons only this instance.
    pub fn instance(&self) -> CallResult<Instance> {
        let mut store = call_store(self.pre.engine());
        let bindings = self.pre.instantiate(&mut store).map_err(|error| failure(&store, error))?;
        Ok(Instance { store, bindings })
    }
}

fn field_errors(list: Vec<wit_errors::FieldError>) -> Vec<FieldError> {
    list.into_iter().map(|e| FieldError { path: e.path, message: e.message }).collect()
}

fn logic_error(error: wit_errors::Error) -> LogicError {
    match error {
        wit_errors::Error::Malformed(list) => LogicError::Malformed(field_errors(list)),
        wit_errors::Error::Invalid(list) => LogicError::Invalid(field_errors(list)),
        wit_errors::Error::Unsupported(message) => LogicError::Unsupported(message),
    }
}

/// One instance of the typed interface. Every method is one call.
pub struct Instance {
    store: Store<CallState>,
    bindings: bindings::MemcachedLogic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    ServiceMonitor,
    NetworkPolicy,
    Pdb,
    Hpa,
}

impl Instance {
    fn call<T>(
        &mut self,
        call: impl FnOnce(&wit::Guest, &mut Store<CallState>) -> wasmtime::Result<Result<T, wit_errors::Error>>,
    ) -> CallResult<T> {
        let guest = self.bindings.c5c3_memcached_memcached().clone();
        match call(&guest, &mut self.store) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(CallError::Logic(logic_error(error))),
            Err(error) => Err(failure(&self.store, error)),
        }
    }

    pub fn render(&mut self, memcached: &str) -> CallResult<Vec<String>> {
        self.call(|guest, store| guest.call_render(store, memcached))
    }

    pub fn to_yaml(&mut self, objects: &str) -> CallResult<String> {
        self.call(|guest, store| guest.call_to_yaml(store, objects))
    }

    pub fn validate(&mut self, memcached: &str) -> CallResult<Vec<FieldError>> {
        self.call(|guest, store| guest.call_validate(store, memcached)).map(field_errors)
    }

    pub fn default(&mut self, memcached: &str) -> CallResult<String> {
        self.call(|guest, store| guest.call_default(store, memcached))
    }

    pub fn labels_for_memcached(&mut self, name: &str) -> CallResult<Vec<(String, String)>> {
        self.call(|guest, store| guest.call_labels_for_memcached(store, name).map(Ok))
    }

    /// A skip guard by its WIT name (`pdb-enabled`, ...).
    pub fn guard(&mut self, guard: Guard, memcached: &str) -> CallResult<bool> {
        self.call(|guest, store| match guard {
            Guard::ServiceMonitor => guest.call_service_monitor_enabled(store, memcached),
            Guard::NetworkPolicy => guest.call_network_policy_enabled(store, memcached),
            Guard::Pdb => guest.call_pdb_enabled(store, memcached),
            Guard::Hpa => guest.call_hpa_enabled(store, memcached),
        })
    }

    /// A typed builder, by the kind it builds.
    pub fn construct(
        &mut self,
        kind: &str,
        memcached: &str,
        current: Option<&str>,
        secrets: &[String],
    ) -> CallResult<String> {
        let known = [
            "Deployment",
            "Service",
            "PodDisruptionBudget",
            "HorizontalPodAutoscaler",
            "ServiceMonitor",
            "NetworkPolicy",
        ];
        if !known.contains(&kind) {
            return Err(LogicError::Unsupported(format!("no typed builder for {kind}")).into());
        }
        self.call(|guest, store| match kind {
            "Deployment" => guest.call_construct_deployment(store, memcached, current, secrets),
            "Service" => guest.call_construct_service(store, memcached, current),
            "PodDisruptionBudget" => guest.call_construct_pdb(store, memcached, current),
            "HorizontalPodAutoscaler" => guest.call_construct_hpa(store, memcached, current),
            "ServiceMonitor" => guest.call_construct_service_monitor(store, memcached, current),
            _ => guest.call_construct_network_policy(store, memcached, current),
        })
    }

    pub fn compute_status(
        &mut self,
        memcached: &str,
        deployment: Option<&str>,
        secrets: &[String],
        now: &str,
    ) -> CallResult<String> {
        self.call(|guest, store| guest.call_compute_status(store, memcached, deployment, secrets, now))
    }
}
