//! One instance of a module, and its calls: each with a fresh deadline,
//! its answer bounded as it crosses the component boundary.

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Instance};

use super::answer::{BoundedText, BoundedTexts};
use super::bindings::exports::wasm_operator::controller::{reconciler as wit, writes};
use super::bindings::{Manifest, ObjectRef, WriteModel};
use super::call_error::{CallError, CallResult, LogicError, failure};
use super::call_state::CallState;
use super::engine::DEADLINE_TICKS;
use super::module_log::ModuleLog;

/// One instance of a module's reconciler. Every method is one call.
pub struct Reconciler {
    store: Store<CallState>,
    guest: wit::Guest,
    /// `writes` (1.2), when the module exports it.
    writes: Option<writes::Guest>,
    instance: Instance,
    desired_export: ComponentExportIndex,
    status_export: ComponentExportIndex,
    imports_wasi: bool,
}

/// What one call reaches of an instance: the bindings' functions, and
/// `desired` and `status` by export index for their bounded answers.
struct Exports<'a> {
    guest: &'a wit::Guest,
    instance: Instance,
    desired: &'a ComponentExportIndex,
    status: &'a ComponentExportIndex,
}

impl Reconciler {
    pub(super) fn new(
        store: Store<CallState>,
        guest: wit::Guest,
        writes: Option<writes::Guest>,
        instance: Instance,
        (desired_export, status_export): (ComponentExportIndex, ComponentExportIndex),
        imports_wasi: bool,
    ) -> Self {
        Self { store, guest, writes, instance, desired_export, status_export, imports_wasi }
    }

    /// The store, with a fresh deadline: the timeout is per call, even on an
    /// instance that is reused for several.
    ///
    /// A module that imports WASI is called on a thread of its own when the
    /// caller is on a tokio runtime: wasmtime's synchronous WASI blocks on
    /// the current runtime for some calls (a write to stdout or stderr, a
    /// poll), which panics inside one.
    fn call<T: Send, E: Into<LogicError> + Send>(
        &mut self,
        call: impl FnOnce(&Exports<'_>, &mut Store<CallState>) -> wasmtime::Result<Result<T, E>> + Send,
    ) -> CallResult<T> {
        self.store.set_epoch_deadline(DEADLINE_TICKS);
        let guest = self.guest.clone();
        let exports = Exports {
            guest: &guest,
            instance: self.instance,
            desired: &self.desired_export,
            status: &self.status_export,
        };
        let store = &mut self.store;
        let answer = if self.imports_wasi && tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| call(&exports, store))
                    .join()
                    .unwrap_or_else(|_| Err(wasmtime::Error::msg("the host's thread for this call panicked")))
            })
        } else {
            call(&exports, store)
        };
        match answer {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(CallError::Logic(error.into())),
            Err(error) => Err(failure(&self.store, error)),
        }
    }

    /// What the module logged since the last time this was asked: the
    /// caller emits it with the parent it was reconciling.
    pub fn take_log(&mut self) -> ModuleLog {
        std::mem::take(&mut self.store.data_mut().log)
    }

    pub fn manifest(&mut self) -> CallResult<Manifest> {
        self.call(|exports, store| exports.guest.call_manifest(store).map(Ok::<_, wit::Error>))
    }

    /// How the host writes this module's answers: what its `writes` says,
    /// `replace` when it exports none (1.0, 1.1).
    pub fn write_model(&mut self) -> CallResult<WriteModel> {
        let Some(writes) = self.writes.clone() else { return Ok(WriteModel::Replace) };
        self.call(|_, store| writes.call_model(store).map(Ok::<_, wit::Error>))
    }

    pub fn references(&mut self, parent: &str) -> CallResult<Vec<ObjectRef>> {
        self.call(|exports, store| exports.guest.call_references(store, parent))
    }

    pub fn desired(&mut self, parent: &str, owned: &[String], related: &[String]) -> CallResult<Vec<String>> {
        self.call(|exports, store| {
            let desired =
                exports.instance.get_typed_func::<(&str, &[String], &[String]), (Result<BoundedTexts, wit::Error>,)>(
                    &mut *store,
                    exports.desired,
                )?;
            let (answer,) = desired.call(&mut *store, (parent, owned, related))?;
            Ok(answer.map(|texts| texts.0))
        })
    }

    pub fn status(
        &mut self,
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
        problem: Option<&str>,
    ) -> CallResult<String> {
        self.call(|exports, store| {
            let status = exports
                .instance
                .get_typed_func::<(&str, &[String], &[String], &str, Option<&str>), (Result<BoundedText, wit::Error>,)>(
                    &mut *store,
                    exports.status,
                )?;
            let (answer,) = status.call(&mut *store, (parent, owned, related, now, problem))?;
            Ok(answer.map(|text| text.0))
        })
    }
}
