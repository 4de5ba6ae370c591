//! `wasm-operator componentize CORE.wasm OUT.wasm`: wraps the core module a
//! Rust module's build produced (wit-bindgen's component-type section in
//! it) into a component, and refuses to write it if it imports anything but
//! the contract's `log` (or, with `--no-imports`, anything at all: the
//! Memcached module).

use std::path::Path;

use wasmparser::{Parser, Payload};

use super::function_order::FunctionOrderError;
use super::function_order::reorder::order_functions;

#[derive(Debug, thiserror::Error)]
pub enum ComponentizeError {
    #[error("reading {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{path}: {error:#}")]
    Encode { path: String, error: anyhow::Error },
    #[error("{path}: the component must import {allowed}, but imports: {imports}")]
    Imports { path: String, allowed: &'static str, imports: String },
    #[error("writing {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("{path}: laying out its functions: {error}")]
    Order { path: String, error: FunctionOrderError },
}

/// What the component may import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    Nothing,
    Log,
}

/// What `componentize` did.
#[derive(Debug)]
pub struct Componentized {
    /// The names the component imports.
    pub imports: Vec<String>,
    /// With a function order: the functions moved first, and listed names
    /// the module has no function of.
    pub ordered: Option<(usize, usize)>,
}

/// Encodes `core` as a component at `out`, with the functions named in
/// `first_functions` laid out first (see `function_order`).
pub fn componentize(
    core: &Path,
    out: &Path,
    allowed: Allowed,
    first_functions: Option<&[String]>,
) -> Result<Componentized, ComponentizeError> {
    let path = core.display().to_string();
    let mut bytes = std::fs::read(core).map_err(|error| ComponentizeError::Read { path: path.clone(), error })?;
    let mut ordered = None;
    if let Some(first) = first_functions {
        let result =
            order_functions(&bytes, first).map_err(|error| ComponentizeError::Order { path: path.clone(), error })?;
        ordered = Some((result.moved, result.unknown));
        bytes = result.module;
    }
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|error| ComponentizeError::Encode { path: path.clone(), error })?;
    let imports =
        top_level_imports(&component).map_err(|error| ComponentizeError::Encode { path: path.clone(), error })?;
    let permitted = |name: &str| allowed == Allowed::Log && name.starts_with("wasm-operator:controller/log@1.");
    if imports.iter().any(|name| !permitted(name)) {
        let allowed = if allowed == Allowed::Log { "nothing but wasm-operator:controller/log" } else { "nothing" };
        return Err(ComponentizeError::Imports { path, allowed, imports: imports.join(", ") });
    }
    // Written beside the output and renamed: a failed write leaves no half file.
    let partial = out.with_extension("wasm.partial");
    let write = |error| ComponentizeError::Write { path: out.display().to_string(), error };
    std::fs::write(&partial, &component).map_err(write)?;
    std::fs::rename(&partial, out).map_err(write)?;
    Ok(Componentized { imports, ordered })
}

/// Names the component imports at its top level (nested core modules'
/// imports are satisfied inside the component and do not count).
fn top_level_imports(component: &[u8]) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload? {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    names.push(import?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok(names)
}
