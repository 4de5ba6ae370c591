//! A loaded logic module: its bytes verified against the contract, compiled
//! once, pre-linked (`InstancePre`), its manifest read once; and its calls,
//! each on a fresh instance in its own store, so a trap, a timeout or a
//! memory blow-up poisons nothing that outlives the call.

mod code;
mod manifest_check;

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre};

use super::bindings::{Manifest, ReachManifest, WriteModel};
use super::call_error::{CallError, CallResult};
use super::call_state::CallState;
use super::compiler::{CompileError, OutOfProcess, Tier, millis};
use super::contract::ContractError;
use super::engine::ModuleEngine;
use super::reconciler::Reconciler;
use code::{Code, LinkError};
use manifest_check::{check_manifest, check_reach, empty_manifest};

/// Where a module came from, for every message about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    File(std::path::PathBuf),
    /// Bytes a binary carries (`memcached-operator`'s built-in module).
    BuiltIn(&'static str),
    /// An OCI artifact, by its pinned reference.
    Registry(String),
}

impl std::fmt::Display for ModuleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModuleSource::File(path) => write!(f, "{}", path.display()),
            ModuleSource::BuiltIn(name) => write!(f, "the built-in {name} module"),
            ModuleSource::Registry(reference) => f.write_str(reference),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading the logic module {source_name}: {error}")]
    Read { source_name: ModuleSource, error: std::io::Error },
    #[error("{source_name} is not WebAssembly (it does not start with the \\0asm header)")]
    NotWebAssembly { source_name: ModuleSource },
    #[error(
        "{source_name} is a core WebAssembly module, not a component: build it as a component exporting wasm-operator:controller/reconciler (cargo component, componentize-py, jco componentize, or wasm-tools component new)"
    )]
    CoreModule { source_name: ModuleSource },
    #[error("compiling {source_name}: {error:#}")]
    Compile { source_name: ModuleSource, error: wasmtime::Error },
    /// A compile in a child process (a long-running operator's) gave no code.
    #[error("compiling {source_name}: {error}")]
    CompileOutOfProcess { source_name: ModuleSource, error: CompileError },
    #[error(
        "{source_name} is a precompiled module (native code); load it only if you built it yourself, with --allow-precompiled"
    )]
    PrecompiledNotAllowed { source_name: ModuleSource },
    #[error(
        "{source_name} is a precompiled module this binary cannot run (another wasmtime version, engine settings or CPU); precompile it again with this binary: {error:#}"
    )]
    Incompatible { source_name: ModuleSource, error: wasmtime::Error },
    #[error("{source_name} is not a logic module: {error}")]
    Contract { source_name: ModuleSource, error: ContractError },
    #[error("{source_name} does not match the wasm-operator:controller contract: {error:#}")]
    Link { source_name: ModuleSource, error: wasmtime::Error },
    #[error("{source_name}: reading its manifest failed: {error}")]
    Manifest { source_name: ModuleSource, error: CallError },
    #[error("{source_name}: its manifest is unusable: {problem}")]
    BadManifest { source_name: ModuleSource, problem: String },
}

impl LoadError {
    /// A short, stable name for why a version was not taken: `CompileFailed`
    /// when the compiler could not finish (out of memory or time, killed,
    /// not started), which says nothing of the module itself; else
    /// `LoadFailed` (not a component, invalid, breaks the contract).
    pub fn reason(&self) -> &'static str {
        match self {
            LoadError::CompileOutOfProcess { error, .. } if !matches!(error, CompileError::Failed(_)) => {
                "CompileFailed"
            }
            _ => "LoadFailed",
        }
    }

    /// Why `source`'s component could not be linked.
    fn linking(source: &ModuleSource, error: LinkError) -> Self {
        match error {
            LinkError::Contract(error) => LoadError::Contract { source_name: source.clone(), error },
            LinkError::Link(error) => LoadError::Link { source_name: source.clone(), error },
        }
    }
}

/// A loaded logic module, ready to instantiate. Cheap to share behind an `Arc`.
pub struct LogicModule {
    engine: ModuleEngine,
    source: ModuleSource,
    /// `sha256:<hex>` of the bytes it was loaded from.
    digest: String,
    /// The contract export it was bound through, with its version.
    contract: String,
    /// Its compiled code. Baseline code is replaced here, once, by the
    /// optimized code of the same bytes (a tiered compile, `compiler.rs`):
    /// a call takes what is here when its instance is made.
    code: Arc<ArcSwap<Code>>,
    manifest: Arc<Manifest>,
    /// The schema of the parent's status in the CRD the manifest ships.
    status_schema: Option<Arc<serde_json::Value>>,
    /// Whether it imports WASI: its calls then run off the async runtime.
    imports_wasi: bool,
    /// How the host writes its answers (`writes`, 1.2; `replace` for a
    /// module that exports none).
    write_model: WriteModel,
    /// What it reaches beyond its parent's namespace (`reach`, 1.3); none
    /// for a module that exports no `reach`.
    reach: Option<Arc<ReachManifest>>,
}

impl std::fmt::Debug for LogicModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogicModule").field("source", &self.source).field("digest", &self.digest).finish()
    }
}

pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// `\0asm` then the binary format's version and layer: 1 for a core module,
/// 0x0d for a component.
enum Header {
    Component,
    Core,
    Other,
}

fn header(bytes: &[u8]) -> Header {
    match bytes {
        [0, b'a', b's', b'm', _, _, 0, 0, ..] => Header::Core,
        [0, b'a', b's', b'm', _, _, 1, 0, ..] => Header::Component,
        _ => Header::Other,
    }
}

/// Native code from `precompile`, copied into memory.
fn deserialize(engine: &ModuleEngine, source: &ModuleSource, bytes: &[u8]) -> Result<Component, LoadError> {
    // SAFETY: wasmtime checks the artifact's version, settings and CPU
    // features; the operator's administrator vouches for its origin
    // (--allow-precompiled), as for the binary itself.
    unsafe { Component::deserialize(engine.engine(), bytes) }
        .map_err(|error| LoadError::Incompatible { source_name: source.clone(), error })
}

impl LogicModule {
    /// A component file, or with `allow_precompiled` also what
    /// [`Self::precompile`] wrote: native code, loaded without compiling, so
    /// only from a trusted source.
    pub fn from_file(engine: &ModuleEngine, path: &Path, allow_precompiled: bool) -> Result<Self, LoadError> {
        let source = ModuleSource::File(path.to_owned());
        let bytes = std::fs::read(path).map_err(|error| LoadError::Read { source_name: source.clone(), error })?;
        Self::from_bytes(engine, source, &bytes, allow_precompiled)
    }

    pub fn from_bytes(
        engine: &ModuleEngine,
        source: ModuleSource,
        bytes: &[u8],
        allow_precompiled: bool,
    ) -> Result<Self, LoadError> {
        let digest = digest(bytes);
        let component = if Engine::detect_precompiled(bytes) == Some(wasmtime::Precompiled::Component) {
            if !allow_precompiled {
                return Err(LoadError::PrecompiledNotAllowed { source_name: source });
            }
            let mapped = engine.compiler().map(|compiler| compiler.map_precompiled(engine.engine(), &digest, bytes));
            match mapped {
                // A long-running operator maps it from its compile cache.
                Some(Ok(component)) => component,
                Some(Err(CompileError::Load { error, .. })) => {
                    return Err(LoadError::Incompatible { source_name: source, error });
                }
                // The cache cannot take it (full, not writable): the code is
                // fine, so it is held in memory instead.
                Some(Err(error)) => {
                    tracing::warn!(module = %source, error = %error, "cannot map a precompiled module from the compile cache; holding it in memory");
                    deserialize(engine, &source, bytes)?
                }
                None => deserialize(engine, &source, bytes)?,
            }
        } else {
            match header(bytes) {
                Header::Component => {}
                Header::Core => return Err(LoadError::CoreModule { source_name: source }),
                Header::Other => return Err(LoadError::NotWebAssembly { source_name: source }),
            }
            match engine.compiler() {
                Some(compiler) => {
                    if let Some(module) = Self::in_tiers(engine, compiler, &source, &digest, bytes)? {
                        return Ok(module);
                    }
                    compiler
                        .compile(engine.engine(), &digest, bytes)
                        .map_err(|error| LoadError::CompileOutOfProcess { source_name: source.clone(), error })?
                }
                None => Component::new(engine.engine(), bytes)
                    .map_err(|error| LoadError::Compile { source_name: source.clone(), error })?,
            }
        };
        Self::from_component(engine, source, digest, &component, Tier::Optimized)
    }

    /// With a tiered compile: the version on its optimized code if the
    /// cache holds it, else on baseline code with its optimized code
    /// compiled in the background. `None` when the optimizing compile is to
    /// be waited for: the engine does not compile in tiers, or the baseline
    /// compiler cannot compile this module.
    fn in_tiers(
        engine: &ModuleEngine,
        compiler: &OutOfProcess,
        source: &ModuleSource,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Option<Self>, LoadError> {
        let Some(baseline) = engine.baseline() else { return Ok(None) };
        if let Some(component) = compiler.cached(engine.engine(), digest) {
            return Self::from_component(engine, source.clone(), digest.to_owned(), &component, Tier::Optimized)
                .map(Some);
        }
        let component = match compiler.compile_baseline(baseline, digest, bytes) {
            Ok(component) => component,
            // Something of this module Winch does not compile (or load):
            // Cranelift may, so the module is not refused for it.
            Err(error @ (CompileError::Failed(_) | CompileError::Load { .. })) => {
                tracing::warn!(module = %source, digest, error = %error, "the baseline compiler cannot compile this module; compiling its optimized code now");
                return Ok(None);
            }
            Err(error) => return Err(LoadError::CompileOutOfProcess { source_name: source.clone(), error }),
        };
        let module = Self::from_component(engine, source.clone(), digest.to_owned(), &component, Tier::Baseline)?;
        module.optimize_in_background(bytes.to_vec());
        Ok(Some(module))
    }

    /// Compiles this version's optimized code in a child, at a lower CPU
    /// priority, and puts it in place of the baseline code: calls already
    /// made finish on the old code, later ones run on the new. Should the
    /// compile fail, the version goes on serving on baseline code (the same
    /// behaviour, a little slower), and says so.
    fn optimize_in_background(&self, bytes: Vec<u8>) {
        let (engine, source, digest) = (self.engine.clone(), self.source.clone(), self.digest.clone());
        let slot = Arc::downgrade(&self.code);
        let spawned = std::thread::Builder::new().name("wasm-tier-up".into()).spawn(move || {
            let Some(compiler) = engine.compiler() else { return };
            let started = std::time::Instant::now();
            let compiled = compiler.compile_in_background(engine.engine(), &digest, &bytes);
            drop(bytes);
            let optimized = compiled
                .map_err(|error| LoadError::CompileOutOfProcess { source_name: source.clone(), error })
                .and_then(|component| {
                    Code::link(&component, Tier::Optimized).map_err(|error| LoadError::linking(&source, error))
                });
            // Dropped meanwhile (refused, replaced): the cache keeps the code.
            let Some(slot) = slot.upgrade() else { return };
            match optimized {
                Ok((code, _)) => {
                    slot.store(Arc::new(code));
                    let took_ms = millis(started);
                    tracing::info!(module = %source, digest, took_ms, "a version's optimized code replaced its baseline code");
                }
                Err(error) => {
                    tracing::warn!(module = %source, digest, error = %error, "the optimizing compile of a version serving on baseline code failed; it goes on serving on baseline code");
                }
            }
        });
        if let Err(error) = spawned {
            tracing::warn!(module = %self.source, digest = self.digest, error = %error, "cannot start the optimizing compile; the version serves on baseline code");
        }
    }

    fn from_component(
        engine: &ModuleEngine,
        source: ModuleSource,
        digest: String,
        component: &Component,
        tier: Tier,
    ) -> Result<Self, LoadError> {
        let (code, checked) = Code::link(component, tier).map_err(|error| LoadError::linking(&source, error))?;
        let mut module = Self {
            engine: engine.clone(),
            source,
            digest,
            contract: checked.export,
            code: Arc::new(ArcSwap::from_pointee(code)),
            manifest: Arc::new(empty_manifest()),
            status_schema: None,
            imports_wasi: checked.imports_wasi,
            write_model: WriteModel::Replace,
            reach: None,
        };
        let (manifest, write_model, reach, admission) = module
            .reconciler()
            .and_then(|mut r| {
                let manifest = r.manifest();
                let (write_model, reach, admission) = match manifest {
                    Ok(_) => (r.write_model(), r.reach_manifest(), r.takes_part_in_admission()),
                    Err(_) => (Ok(WriteModel::Replace), Ok(None), Ok(false)),
                };
                r.take_log().emit(&module.source.to_string(), None);
                Ok((manifest?, write_model?, reach?, admission?))
            })
            .map_err(|error| LoadError::Manifest { source_name: module.source.clone(), error })?;
        module.write_model = write_model;
        let bad_manifest = |problem| LoadError::BadManifest { source_name: module.source.clone(), problem };
        check_manifest(&manifest).map_err(bad_manifest)?;
        if admission {
            // Refused rather than run without the webhook its rules rely on.
            return Err(bad_manifest(
                "admission: this host does not serve admission reviews yet; the module's takes-part must answer false"
                    .into(),
            ));
        }
        if let Some(reach) = &reach {
            check_reach(&manifest, reach).map_err(bad_manifest)?;
        }
        module.reach = reach.map(Arc::new);
        module.status_schema = super::crd_check::status_schema(&manifest.crd, &manifest.parent).map(Arc::new);
        module.manifest = Arc::new(manifest);
        Ok(module)
    }

    /// Compiles a component ahead of time for this engine's settings and
    /// this CPU. An image that ships the result starts without compiling.
    pub fn precompile(engine: &ModuleEngine, source: &ModuleSource, bytes: &[u8]) -> Result<Vec<u8>, LoadError> {
        match header(bytes) {
            Header::Component => {}
            Header::Core => return Err(LoadError::CoreModule { source_name: source.clone() }),
            Header::Other => return Err(LoadError::NotWebAssembly { source_name: source.clone() }),
        }
        engine
            .engine()
            .precompile_component(bytes)
            .map_err(|error| LoadError::Compile { source_name: source.clone(), error })
    }

    pub fn source(&self) -> &ModuleSource {
        &self.source
    }

    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Where its compiled code lies in this process's memory: mapped from
    /// its precompiled file when it was loaded from one.
    pub fn code_range(&self) -> std::ops::Range<usize> {
        let range = self.code.load().instance_pre.component().image_range();
        range.start as usize..range.end as usize
    }

    /// Which code it runs on now: baseline until a tiered compile's
    /// optimized code replaces it.
    pub fn tier(&self) -> Tier {
        self.code.load().tier
    }

    /// The contract interface it exports, with its version
    /// (`wasm-operator:controller/reconciler@1.0.0`).
    pub fn contract(&self) -> &str {
        &self.contract
    }

    /// What the module said of itself when it was loaded.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// How the host writes its answers, as the module said when it was
    /// loaded.
    pub fn write_model(&self) -> WriteModel {
        self.write_model
    }

    /// Whether it finalizes its parents (`reach`, 1.3).
    pub fn finalizes(&self) -> bool {
        self.reach().is_some_and(|reach| reach.finalizes)
    }

    /// What the module reaches (`reach`, 1.3), when it exports it.
    pub fn reach(&self) -> Option<&ReachManifest> {
        self.reach.as_deref()
    }

    /// The schema of the parent's status in the CRD the module ships: a
    /// status answer is compared as the API server stores it.
    pub fn status_schema(&self) -> Option<&serde_json::Value> {
        self.status_schema.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    pub fn engine(&self) -> &ModuleEngine {
        &self.engine
    }

    /// The pre-linked component (its code now), for hosts binding more of
    /// its exports (`memcached-operator`'s typed interface); a store for it
    /// comes from [`call_store`](super::call_state::call_store) on its engine.
    pub fn instance_pre(&self) -> InstancePre<CallState> {
        self.code.load().instance_pre.clone()
    }

    /// A fresh instance of the reconciler, in its own store.
    pub fn reconciler(&self) -> CallResult<Reconciler> {
        self.code.load().reconciler(self.imports_wasi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_tells_components_from_core_modules() {
        assert!(matches!(header(b"\0asm\x01\0\0\0"), Header::Core));
        assert!(matches!(header(b"\0asm\x0d\0\x01\0"), Header::Component));
        assert!(matches!(header(b"hello, world"), Header::Other));
        assert!(matches!(header(b""), Header::Other));
    }

    #[test]
    fn digests_are_sha256_of_the_bytes() {
        assert_eq!(digest(b""), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
