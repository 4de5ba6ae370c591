//! A version's compiled code: checked against the contract, linked
//! (`InstancePre`), with where its exports are; and a fresh instance of it
//! in its own store for each call.

use wasmtime::component::{Component, ComponentExportIndex, InstancePre, Linker};

use crate::runtime::bindings;
use crate::runtime::bindings::exports::wasm_operator::controller::{admission, reach, reconciler as wit, writes};
use crate::runtime::call_error::{CallResult, failure};
use crate::runtime::call_state::{CallState, call_store};
use crate::runtime::compiler::Tier;
use crate::runtime::contract::{self, ADMISSION, CONTRACT_VERSION, Checked, ContractError, REACH, WRITES};
use crate::runtime::reconciler::{Exported, Reconciler};
use crate::runtime::wasi;

/// Why a component could not be linked.
#[derive(Debug)]
pub(super) enum LinkError {
    /// It does not honour the contract.
    Contract(ContractError),
    /// Its imports or exports do not match what the host links.
    Link(wasmtime::Error),
}

/// A version's compiled code, pre-linked, and where its exports are.
pub(super) struct Code {
    pub(super) instance_pre: InstancePre<CallState>,
    indices: wit::GuestIndices,
    /// `writes` (1.2), when the module exports it.
    writes: Option<writes::GuestIndices>,
    /// `reach` (1.3), when the module exports it, and its `answer` and
    /// `finalize`, called by index for their bounded answers.
    reach: Option<(reach::GuestIndices, [ComponentExportIndex; 2])>,
    /// `admission` (1.3), when the module exports it.
    admission: Option<admission::GuestIndices>,
    /// `desired` and `status`, called through [`BoundedTexts`] and
    /// [`BoundedText`] (`answer.rs`) rather than the bindings' own types.
    desired_export: ComponentExportIndex,
    status_export: ComponentExportIndex,
    pub(super) tier: Tier,
}

impl Code {
    /// `component` checked against the contract and linked.
    pub(super) fn link(component: &Component, tier: Tier) -> Result<(Self, Checked), LinkError> {
        let engine = component.engine();
        let checked = contract::check(engine, component).map_err(LinkError::Contract)?;
        let mut linker: Linker<CallState> = Linker::new(engine);
        if checked.imports_wasi {
            wasi::link(&mut linker).map_err(LinkError::Link)?;
        }
        if checked.imports_log {
            bindings::wasm_operator::controller::log::add_to_linker::<CallState, wasmtime::component::HasSelf<CallState>>(
                &mut linker,
                |state| state,
            )
            .map_err(LinkError::Link)?;
        }
        let instance_pre = linker.instantiate_pre(component).map_err(LinkError::Link)?;
        let indices = wit::GuestIndices::new(&instance_pre).map_err(LinkError::Link)?;
        // Absent from 1.0 and 1.1 modules; present but not as the contract
        // says, the module is refused.
        let writes = match component.get_export_index(None, format!("{WRITES}@{CONTRACT_VERSION}").as_str()) {
            None => None,
            Some(_) => Some(writes::GuestIndices::new(&instance_pre).map_err(LinkError::Link)?),
        };
        // Absent before 1.3.
        let reach = match component.get_export_index(None, format!("{REACH}@{CONTRACT_VERSION}").as_str()) {
            None => None,
            Some(interface) => {
                let indices = reach::GuestIndices::new(&instance_pre).map_err(LinkError::Link)?;
                let export = |name: &str| {
                    component
                        .get_export_index(Some(&interface), name)
                        .ok_or_else(|| LinkError::Link(wasmtime::Error::msg(format!("{REACH} exports no {name}"))))
                };
                Some((indices, [export("answer")?, export("finalize")?]))
            }
        };
        let admission = match component.get_export_index(None, format!("{ADMISSION}@{CONTRACT_VERSION}").as_str()) {
            None => None,
            Some(_) => Some(admission::GuestIndices::new(&instance_pre).map_err(LinkError::Link)?),
        };
        let export = |name: &str| {
            let interface = component.get_export_index(None, &checked.export);
            component
                .get_export_index(interface.as_ref(), name)
                .ok_or_else(|| LinkError::Link(wasmtime::Error::msg(format!("{} exports no {name}", checked.export))))
        };
        let (desired_export, status_export) = (export("desired")?, export("status")?);
        Ok((Self { instance_pre, indices, writes, reach, admission, desired_export, status_export, tier }, checked))
    }

    /// A fresh instance of the reconciler, in its own store.
    pub(super) fn reconciler(&self, imports_wasi: bool) -> CallResult<Reconciler> {
        let mut store = call_store(self.instance_pre.engine());
        let instance = self.instance_pre.instantiate(&mut store).map_err(|error| failure(&store, error))?;
        let guest = self.indices.load(&mut store, &instance).map_err(|error| failure(&store, error))?;
        let writes = match &self.writes {
            Some(indices) => Some(indices.load(&mut store, &instance).map_err(|error| failure(&store, error))?),
            None => None,
        };
        let reach = match &self.reach {
            Some((indices, exports)) => {
                Some((indices.load(&mut store, &instance).map_err(|error| failure(&store, error))?, *exports))
            }
            None => None,
        };
        let admission = match &self.admission {
            Some(indices) => Some(indices.load(&mut store, &instance).map_err(|error| failure(&store, error))?),
            None => None,
        };
        let exported = Exported { writes, reach, admission, desired: self.desired_export, status: self.status_export };
        Ok(Reconciler::new(store, guest, instance, exported, imports_wasi))
    }
}
