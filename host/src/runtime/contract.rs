//! What a component must export and may import to be a logic module,
//! checked from its type before anything is instantiated, so a wrong file
//! is refused with a message that says what is missing.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

/// The interface every module exports (`wit/controller/controller.wit`).
pub const CONTRACT: &str = "wasm-operator:controller/reconciler";
/// The contract version this host was built against; it runs modules built
/// against any 1.x (semver: a 1.y module uses nothing a 1.0 host lacks).
pub const CONTRACT_VERSION: &str = "1.3.0";
pub const CONTRACT_MAJOR: u64 = 1;
/// The one interface of the host a module may import (1.1): its log.
pub const LOG: &str = "wasm-operator:controller/log";
/// How the host writes a module's answers (1.2); a module may export it.
pub const WRITES: &str = "wasm-operator:controller/writes";
/// What a module does beyond its parent's namespace, and its timers (1.3);
/// a module may export it.
pub const REACH: &str = "wasm-operator:controller/reach";
/// The module's rules at admission (1.3); a module may export it.
pub const ADMISSION: &str = "wasm-operator:controller/admission";

/// The finalizer the host holds on a parent for a module whose `reach`
/// finalizes.
pub fn finalizer_of(module: &str) -> String {
    format!("wasm-operator.c5c3.io/{module}")
}

/// The functions the host calls.
const FUNCTIONS: [&str; 4] = ["manifest", "references", "desired", "status"];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ContractError {
    #[error("it exports no {CONTRACT} interface (it exports: {}); build it against wit/controller (world logic-module)", list(.exports))]
    NoContract { exports: Vec<String> },
    #[error("it exports {found}, a contract version this host does not run (it runs {CONTRACT}@{CONTRACT_MAJOR}.x)")]
    UnsupportedVersion { found: String },
    #[error("its {export} lacks {}: build it against wit/controller", list(.missing))]
    MissingFunctions { export: String, missing: Vec<String> },
    #[error(
        "it imports {import}; a logic module may import nothing but {LOG}@{CONTRACT_MAJOR}.x and WASI (given with nothing granted)"
    )]
    ForbiddenImport { import: String },
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "nothing".to_owned() } else { names.join(", ") }
}

/// What the check found: the exported contract's full name, and whether the
/// module imports WASI and the host's log.
#[derive(Debug)]
pub struct Checked {
    pub export: String,
    pub imports_wasi: bool,
    pub imports_log: bool,
}

pub fn check(engine: &Engine, component: &Component) -> Result<Checked, ContractError> {
    let ty = component.component_type();
    let mut imports_wasi = false;
    let mut imports_log = false;
    for (import, _) in ty.imports(engine) {
        if import.starts_with("wasi:") {
            imports_wasi = true;
        } else if unversioned(import) == LOG && major_version(import) == Some(CONTRACT_MAJOR) {
            imports_log = true;
        } else {
            return Err(ContractError::ForbiddenImport { import: import.to_owned() });
        }
    }
    let exports: Vec<(String, ComponentItem)> =
        ty.exports(engine).map(|(name, item)| (name.to_owned(), item.ty)).collect();
    let Some((export, item)) = exports.iter().find(|(name, _)| unversioned(name) == CONTRACT) else {
        return Err(ContractError::NoContract { exports: exports.into_iter().map(|(name, _)| name).collect() });
    };
    if major_version(export) != Some(CONTRACT_MAJOR) {
        return Err(ContractError::UnsupportedVersion { found: export.clone() });
    }
    let functions: Vec<String> = match item {
        ComponentItem::ComponentInstance(instance) => {
            instance.exports(engine).map(|(name, _)| name.to_owned()).collect()
        }
        _ => Vec::new(),
    };
    let missing: Vec<String> =
        FUNCTIONS.iter().filter(|f| !functions.iter().any(|g| g == *f)).map(|f| (*f).to_owned()).collect();
    if !missing.is_empty() {
        return Err(ContractError::MissingFunctions { export: export.clone(), missing });
    }
    Ok(Checked { export: export.clone(), imports_wasi, imports_log })
}

fn unversioned(name: &str) -> &str {
    name.split_once('@').map_or(name, |(name, _)| name)
}

/// `1` of `...@1.2.3`; none when unversioned or unreadable.
fn major_version(name: &str) -> Option<u64> {
    let (_, version) = name.split_once('@')?;
    version.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_finalizer_names_the_module_under_the_hosts_domain() {
        assert_eq!(finalizer_of("greeting"), "wasm-operator.c5c3.io/greeting");
    }

    #[test]
    fn versions_are_read_from_the_export_name() {
        assert_eq!(major_version("wasm-operator:controller/reconciler@1.0.0"), Some(1));
        assert_eq!(major_version("wasm-operator:controller/reconciler@2.1.0"), Some(2));
        assert_eq!(major_version("wasm-operator:controller/reconciler"), None);
        assert_eq!(unversioned("wasm-operator:controller/reconciler@1.0.0"), CONTRACT);
    }

    #[test]
    fn errors_say_what_is_missing() {
        let error = ContractError::MissingFunctions {
            export: format!("{CONTRACT}@1.0.0"),
            missing: vec!["desired".into(), "status".into()],
        };
        assert_eq!(
            error.to_string(),
            "its wasm-operator:controller/reconciler@1.0.0 lacks desired, status: build it against wit/controller"
        );
        let none = ContractError::NoContract { exports: vec![] };
        assert!(none.to_string().contains("it exports: nothing"), "{none}");
    }
}
