//! `componentize CORE.wasm OUT.wasm`: wraps the core module that wit-bindgen
//! produced into a WebAssembly component, then refuses to write it unless the
//! component imports nothing at all (no WASI, no host functions).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use wasmparser::{Parser, Payload};

fn main() -> Result<()> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(input), Some(output), None) = (args.next(), args.next(), args.next()) else {
        bail!("usage: componentize CORE.wasm OUT.wasm");
    };
    let core = std::fs::read(&input).with_context(|| format!("reading {}", input.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&core)
        .context("reading the core module's component-type section")?
        .validate(true)
        .encode()
        .context("encoding the component")?;

    let imports = top_level_imports(&component)?;
    if !imports.is_empty() {
        bail!("the component must import nothing, but imports: {}", imports.join(", "));
    }
    std::fs::write(&output, &component).with_context(|| format!("writing {}", output.display()))?;
    eprintln!("componentize: wrote {} ({} bytes, 0 imports)", output.display(), component.len());
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
