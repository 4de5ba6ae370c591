//! `componentize CORE.wasm OUT.wasm [--allow-log]`: wraps the core module
//! that wit-bindgen produced into a WebAssembly component, then refuses to
//! write it unless the component imports nothing at all (no WASI, no host
//! functions), or with `--allow-log` nothing but the contract's `log` (what
//! a module written with the Rust SDK imports for its lines and panics).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use wasmparser::{Parser, Payload};

fn main() -> Result<()> {
    let mut args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let allow_log = args.iter().any(|a| a.as_os_str() == "--allow-log");
    args.retain(|a| a.as_os_str() != "--allow-log");
    let [input, output] = args.as_slice() else {
        bail!("usage: componentize CORE.wasm OUT.wasm [--allow-log]");
    };
    let core = std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&core)
        .context("reading the core module's component-type section")?
        .validate(true)
        .encode()
        .context("encoding the component")?;

    let imports = top_level_imports(&component)?;
    let allowed = |name: &str| allow_log && name.starts_with("wasm-operator:controller/log@1.");
    let forbidden: Vec<&String> = imports.iter().filter(|name| !allowed(name)).collect();
    if !forbidden.is_empty() {
        let only = if allow_log { "nothing but wasm-operator:controller/log" } else { "nothing" };
        bail!("the component must import {only}, but imports: {}", imports.join(", "));
    }
    std::fs::write(output, &component).with_context(|| format!("writing {}", output.display()))?;
    eprintln!(
        "componentize: wrote {} ({} bytes, imports: {})",
        output.display(),
        component.len(),
        if imports.is_empty() { "none".to_owned() } else { imports.join(", ") }
    );
    Ok(())
}

/// Names the component imports at its top level (nested core modules'
/// imports are satisfied inside the component and do not count).
fn top_level_imports(component: &[u8]) -> Result<Vec<String>> {
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
