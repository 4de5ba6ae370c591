//! One instance of a module, and its calls: each with a fresh deadline,
//! its answer bounded as it crosses the component boundary.

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, ComponentType, Instance, Lift};

use super::answer::{BoundedText, BoundedTexts, DesiredState, Finalizing, LiftedDesiredState, LiftedFinalizing};
use super::bindings::exports::wasm_operator::controller::{admission, reach, reconciler as wit, writes};
use super::bindings::{Manifest, ObjectRef, ReachManifest, WriteModel};
use super::call_error::{CallError, CallResult, LogicError, failure};
use super::call_state::CallState;
use super::engine::DEADLINE_TICKS;
use super::module_log::ModuleLog;

/// Where `reach`'s `answer` and `finalize` are among its exports called by
/// index.
const ANSWER: usize = 0;
const FINALIZE: usize = 1;

/// One instance of a module's reconciler. Every method is one call.
pub struct Reconciler {
    store: Store<CallState>,
    guest: wit::Guest,
    /// `writes` (1.2), when the module exports it.
    writes: Option<writes::Guest>,
    /// `reach` (1.3), when the module exports it, and its `answer`.
    reach: Option<(reach::Guest, [ComponentExportIndex; 2])>,
    /// `admission` (1.3), when the module exports it.
    admission: Option<admission::Guest>,
    instance: Instance,
    desired_export: ComponentExportIndex,
    status_export: ComponentExportIndex,
    imports_wasi: bool,
}

/// The exports of one instance the bindings do not call: `desired` and
/// `status` by index for their bounded answers, and `reach` (1.3) when the
/// module exports it, with its `answer` and `finalize` by index.
pub(super) struct Exported {
    pub(super) writes: Option<writes::Guest>,
    pub(super) reach: Option<(reach::Guest, [ComponentExportIndex; 2])>,
    pub(super) admission: Option<admission::Guest>,
    pub(super) desired: ComponentExportIndex,
    pub(super) status: ComponentExportIndex,
}

/// What one call reaches of an instance: the bindings' functions, and
/// `desired`, `status` and `answer` by export index for their bounded
/// answers.
struct Exports<'a> {
    guest: &'a wit::Guest,
    instance: Instance,
    desired: &'a ComponentExportIndex,
    status: &'a ComponentExportIndex,
    /// `reach`'s `answer` and `finalize`.
    reach: Option<&'a [ComponentExportIndex; 2]>,
}

impl Reconciler {
    pub(super) fn new(
        store: Store<CallState>,
        guest: wit::Guest,
        instance: Instance,
        exported: Exported,
        imports_wasi: bool,
    ) -> Self {
        let Exported { writes, reach, admission, desired, status } = exported;
        Self {
            store,
            guest,
            writes,
            reach,
            admission,
            instance,
            desired_export: desired,
            status_export: status,
            imports_wasi,
        }
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
            reach: self.reach.as_ref().map(|(_, exports)| exports),
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

    /// What the module reaches (`reach`, 1.3); none for a module that
    /// exports no `reach`.
    pub fn reach_manifest(&mut self) -> CallResult<Option<ReachManifest>> {
        let Some((reach, _)) = self.reach.clone() else { return Ok(None) };
        self.call(|_, store| reach.call_manifest(store).map(|manifest| Ok::<_, wit::Error>(Some(manifest))))
    }

    /// Whether the module takes part in admission (`admission`, 1.3); no
    /// for a module that exports no `admission`.
    pub fn takes_part_in_admission(&mut self) -> CallResult<bool> {
        let Some(admission) = self.admission.clone() else { return Ok(false) };
        self.call(|_, store| admission.call_takes_part(store).map(Ok::<_, wit::Error>))
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

    /// What the parent should have: `reach`'s `answer` (1.3) when the
    /// module exports it, told the time `now`; otherwise `desired`'s
    /// objects, with no timer and no labels for the parent.
    pub fn answer(
        &mut self,
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
    ) -> CallResult<DesiredState> {
        if self.reach.is_none() {
            return self.desired(parent, owned, related).map(DesiredState::objects);
        }
        self.call_reach::<LiftedDesiredState, _>(ANSWER, (parent, owned, related, now))
    }

    /// What should still exist while the parent is being deleted (`reach`'s
    /// `finalize`, 1.3). A module that exports no `reach` is never asked.
    pub fn finalize(
        &mut self,
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
    ) -> CallResult<Finalizing> {
        if self.reach.is_none() {
            let unsupported = wit::Error::Unsupported("the module exports no reach: it does not finalize".into());
            return Err(CallError::Logic(unsupported.into()));
        }
        self.call_reach::<LiftedFinalizing, _>(FINALIZE, (parent, owned, related, now))
    }

    /// `reach`'s function `export` (its index among the two the host calls
    /// by index), its answer lifted as `L` and taken as `T`.
    fn call_reach<L, T>(&mut self, export: usize, args: (&str, &[String], &[String], &str)) -> CallResult<T>
    where
        L: ComponentType + Lift + Send + Sync + 'static,
        T: From<L> + Send,
    {
        self.call(|exports, store| {
            let Some(index) = exports.reach.map(|indices| &indices[export]) else {
                return Err(wasmtime::Error::msg("the module exports no reach"));
            };
            let function = exports
                .instance
                .get_typed_func::<(&str, &[String], &[String], &str), (Result<L, wit::Error>,)>(&mut *store, index)?;
            let (answered,) = function.call(&mut *store, args)?;
            Ok(answered.map(T::from))
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
