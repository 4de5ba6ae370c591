//! Write a [wasm-operator] logic module in Rust.
//!
//! A module implements [`Reconciler`] on typed objects: the parent is a
//! `#[derive(CustomResource)]` type (its schema is the CRD the manifest
//! ships), children are k8s-openapi types. [`export_reconciler!`] exports
//! it as the `wasm-operator:controller` contract; the SDK parses and writes
//! the JSON, sets namespaces and controller owner references (adopting an
//! orphan, refusing another controller's object), and merges each answer
//! onto the object the server has, so an unchanged parent writes nothing.
//!
//! ```ignore
//! use wasm_operator_sdk::{Context, Error, Manifest, Object, Reconciler, export_reconciler};
//!
//! struct Sites;
//!
//! impl Reconciler for Sites {
//!     type Parent = StaticSite;
//!     type Status = StaticSiteStatus;
//!     fn manifest() -> Manifest {
//!         Manifest::new::<StaticSite>("static-site", env!("CARGO_PKG_VERSION")).owns::<ConfigMap>()
//!     }
//!     fn desired(site: &StaticSite, _ctx: &Context) -> Result<Vec<Object>, Error> { ... }
//!     fn status(site: &StaticSite, ctx: &Context) -> Result<StaticSiteStatus, Error> { ... }
//! }
//!
//! export_reconciler!(Sites);
//! ```
//!
//! [wasm-operator]: https://github.com/c5c3

mod conditions;
mod error;
mod kinds;
pub mod log;
mod merge;
mod objects;
mod owner;
mod reconciler;

pub use conditions::{condition, parse_time, set_condition};
pub use error::{Error, FieldError, Problems};
pub use kinds::{Kind, Manifest, ObjectRef, Scope, WriteModel};
pub use merge::merge;
pub use objects::{Context, Object, observed_generation};
pub use owner::{adopt, owner_reference};
pub use reconciler::{Finalizing, Reconciler};

/// What a module's types need, at the versions the SDK uses.
pub use {k8s_openapi, kube_core, serde_json};

/// What nearly every module uses, in one import: the SDK's types and
/// helpers, kube's `ResourceExt` (`name_any()`, `namespace()`, `labels()`)
/// and the metadata types objects are built from.
///
/// ```
/// use wasm_operator_sdk::prelude::*;
/// ```
pub mod prelude {
    pub use crate::{
        Context, Error, Finalizing, Kind, Manifest, Object, ObjectRef, Problems, Reconciler, WriteModel, condition,
        export_reconciler, observed_generation, set_condition,
    };
    pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta, Time};
    pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    pub use kube_core::ResourceExt;
}

/// The contract's calls on JSON texts, answered by a [`Reconciler`]: what the
/// host sends and receives, for a module's own tests.
pub mod run {
    pub use crate::reconciler::{Answer, Finalized, answer, desired, finalize, references, status};
}

#[cfg(all(target_arch = "wasm32", feature = "component"))]
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "logic-module-reach",
        pub_export_macro: true,
        export_macro_name: "__export_logic_module",
        default_bindings_module: "::wasm_operator_sdk::bindings",
    });
}

/// What `export_reconciler!` expands to; not for direct use.
#[cfg(all(target_arch = "wasm32", feature = "component"))]
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::exports::wasm_operator::controller::admission::{
        Guest as AdmissionGuest, Operation as WitOperation,
    };
    pub use crate::bindings::exports::wasm_operator::controller::reach::{
        DesiredState as WitDesiredState, Finalizing as WitFinalizing, Guest as ReachGuest,
        ReachManifest as WitReachManifest, Selection as WitSelection,
    };
    pub use crate::bindings::exports::wasm_operator::controller::reconciler::{
        Error as WitError, FieldError as WitFieldError, Guest, KindInfo, ModuleManifest, ObjectRef as WitObjectRef,
    };
    pub use crate::bindings::exports::wasm_operator::controller::writes::{
        Guest as WritesGuest, WriteModel as WitWriteModel,
    };
    use crate::{Error, Kind, Manifest, ObjectRef, Reconciler, WriteModel};

    fn kind(kind: Kind) -> KindInfo {
        KindInfo {
            group: kind.group,
            version: kind.version,
            kind: kind.kind,
            plural: kind.plural,
            namespaced: kind.namespaced,
        }
    }

    fn fields(list: Vec<crate::FieldError>) -> Vec<WitFieldError> {
        list.into_iter().map(|e| WitFieldError { path: e.path, message: e.message }).collect()
    }

    pub fn error(error: Error) -> WitError {
        match error {
            Error::Malformed(list) => WitError::Malformed(fields(list)),
            Error::Invalid(list) => WitError::Invalid(fields(list)),
            Error::Unsupported(message) => WitError::Unsupported(message),
        }
    }

    pub fn start() {
        #[cfg(feature = "log")]
        crate::log::install_panic_hook();
    }

    pub fn manifest<R: Reconciler>() -> ModuleManifest {
        start();
        let Manifest { name, version, parent, crd, owned, reads, field_manager, event_reporter } = R::manifest();
        ModuleManifest {
            name,
            version,
            parent: kind(parent),
            crd,
            owned: owned.into_iter().map(kind).collect(),
            reads: reads.into_iter().map(kind).collect(),
            field_manager,
            event_reporter,
        }
    }

    pub fn write_model<R: Reconciler>() -> WitWriteModel {
        start();
        match R::WRITES {
            WriteModel::Replace => WitWriteModel::Replace,
            WriteModel::Apply => WitWriteModel::Apply,
        }
    }

    pub fn references<R: Reconciler>(parent: &str) -> Result<Vec<WitObjectRef>, WitError> {
        start();
        let references = crate::run::references::<R>(parent).map_err(error)?;
        Ok(references
            .into_iter()
            .map(|ObjectRef { group, version, kind, namespace, name }| WitObjectRef {
                group,
                version,
                kind,
                namespace,
                name,
            })
            .collect())
    }

    pub fn desired<R: Reconciler>(parent: &str, owned: &[String], related: &[String]) -> Result<Vec<String>, WitError> {
        start();
        crate::run::desired::<R>(parent, owned, related).map_err(error)
    }

    /// What the module reaches beyond its parent's namespace: whether it
    /// finalizes (the answers' timers need no flag).
    pub fn reach_manifest<R: Reconciler>() -> WitReachManifest {
        start();
        WitReachManifest {
            any_namespace: false,
            selects: false,
            finalizes: R::FINALIZES,
            parent_label_keys: Vec::new(),
            parent_annotation_keys: Vec::new(),
            decorates: None,
        }
    }

    pub fn answer<R: Reconciler>(
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
    ) -> Result<WitDesiredState, WitError> {
        start();
        let answer = crate::run::answer::<R>(parent, owned, related, now).map_err(error)?;
        let again_after_ms = answer.again_after.map(milliseconds);
        Ok(WitDesiredState {
            objects: answer.objects,
            again_after_ms,
            parent_labels: Vec::new(),
            parent_annotations: Vec::new(),
        })
    }

    pub fn finalize<R: Reconciler>(
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
    ) -> Result<WitFinalizing, WitError> {
        start();
        let finalized = crate::run::finalize::<R>(parent, owned, related, now).map_err(error)?;
        Ok(WitFinalizing {
            objects: finalized.objects,
            done: finalized.done,
            again_after_ms: finalized.again_after.map(milliseconds),
        })
    }

    /// A timer past u32 milliseconds (49 days) is past any resync.
    fn milliseconds(after: std::time::Duration) -> u32 {
        u32::try_from(after.as_millis()).unwrap_or(u32::MAX)
    }

    /// What a module answers for what it does not do.
    pub fn unsupported(what: &str) -> WitError {
        WitError::Unsupported(format!("this module {what}"))
    }

    pub fn status<R: Reconciler>(
        parent: &str,
        owned: &[String],
        related: &[String],
        now: &str,
        problem: Option<&str>,
    ) -> Result<String, WitError> {
        start();
        crate::run::status::<R>(parent, owned, related, now, problem).map_err(error)
    }
}

/// Exports a [`Reconciler`] as the module's `wasm-operator:controller`
/// contract (on wasm32; natively it expands to nothing, so the same crate's
/// tests build).
#[macro_export]
macro_rules! export_reconciler {
    ($reconciler:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            use $crate::__private as sdk;

            struct Export;

            impl sdk::Guest for Export {
                fn manifest() -> sdk::ModuleManifest {
                    sdk::manifest::<$reconciler>()
                }

                fn references(parent: String) -> Result<Vec<sdk::WitObjectRef>, sdk::WitError> {
                    sdk::references::<$reconciler>(&parent)
                }

                fn desired(
                    parent: String,
                    owned: Vec<String>,
                    related: Vec<String>,
                ) -> Result<Vec<String>, sdk::WitError> {
                    sdk::desired::<$reconciler>(&parent, &owned, &related)
                }

                fn status(
                    parent: String,
                    owned: Vec<String>,
                    related: Vec<String>,
                    now: String,
                    problem: Option<String>,
                ) -> Result<String, sdk::WitError> {
                    sdk::status::<$reconciler>(&parent, &owned, &related, &now, problem.as_deref())
                }
            }

            impl sdk::WritesGuest for Export {
                fn model() -> sdk::WitWriteModel {
                    sdk::write_model::<$reconciler>()
                }
            }

            impl sdk::ReachGuest for Export {
                fn manifest() -> sdk::WitReachManifest {
                    sdk::reach_manifest::<$reconciler>()
                }

                fn selections(_parent: String) -> Result<Vec<sdk::WitSelection>, sdk::WitError> {
                    Ok(Vec::new())
                }

                fn answer(
                    parent: String,
                    owned: Vec<String>,
                    related: Vec<String>,
                    now: String,
                ) -> Result<sdk::WitDesiredState, sdk::WitError> {
                    sdk::answer::<$reconciler>(&parent, &owned, &related, &now)
                }

                fn finalize(
                    parent: String,
                    owned: Vec<String>,
                    related: Vec<String>,
                    now: String,
                ) -> Result<sdk::WitFinalizing, sdk::WitError> {
                    sdk::finalize::<$reconciler>(&parent, &owned, &related, &now)
                }
            }

            impl sdk::AdmissionGuest for Export {
                fn takes_part() -> bool {
                    false
                }

                fn review(
                    _parent: String,
                    _old: Option<String>,
                    _operation: sdk::WitOperation,
                ) -> Result<Vec<String>, sdk::WitError> {
                    Err(sdk::unsupported("takes no part in admission"))
                }
            }

    $crate::bindings::__export_logic_module!(Export with_types_in $crate::bindings);
        };
    };
}
