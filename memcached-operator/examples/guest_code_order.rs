//! `make guest-code-order`: writes guest/link/serving-functions.txt, the
//! Memcached module's functions in the order a reconcile first runs them,
//! which `scripts/build-wasm.sh` hands to `wasm-operator componentize
//! --function-order` so that they sit together at the front of the
//! compiled code (host/src/authoring/function_order.rs says why).
//!
//!     guest_code_order CORE.wasm OUT.txt
//!
//! CORE is the guest's core module as cargo built it (before
//! `componentize`). The profile run instruments a copy that records when
//! each function is first entered, then calls it as the operator does, a
//! fresh instance per call: `manifest` once, then for every sample in
//! deploy/samples `references`, `desired` with nothing owned yet, `status`
//! with what `desired` returned (the Deployment with a status, as the API
//! server returns it) and `desired` again with those owned (a resync).
//! Functions are listed by the first call that ran them, then by when they
//! first ran within it; functions no call ran are left out.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use wasm_operator::authoring::function_order::defined_function_names;
use wasm_operator::authoring::function_order::instrument::{ENTRY_EXPORT_PREFIX, instrument_entries};
use wasmtime::{Engine, Instance, Memory, Module, Store, TypedFunc, Val};

const DESIRED: &str = "wasm-operator:controller/reconciler@1.2.0#desired";
const STATUS: &str = "wasm-operator:controller/reconciler@1.2.0#status";
const REFERENCES: &str = "wasm-operator:controller/reconciler@1.2.0#references";
const MANIFEST: &str = "wasm-operator:controller/reconciler@1.2.0#manifest";

fn main() -> Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [core, out] = args.as_slice() else {
        bail!("usage: guest_code_order CORE.wasm OUT.txt");
    };
    let bytes = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let names = defined_function_names(&bytes)?;
    let instrumented = instrument_entries(&bytes)?;
    let engine = Engine::default();
    let module = Module::new(&engine, &instrumented)
        .map_err(anyhow::Error::from)
        .context("compiling the instrumented module")?;
    let mut profile = Profile { engine, module, first_call: vec![None; names.len()], calls: 0 };

    profile.call(MANIFEST, &[])?;
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&samples)
        .with_context(|| format!("reading {}", samples.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let related = secrets();
    for file in &files {
        let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let mut parent: Value = serde_norway::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        parent["metadata"]["namespace"] = "production".into();
        parent["metadata"]["uid"] = "0b7c4f1e-5a2d-4e8b-9c3f-6d1a2b3c4d5e".into();
        parent["metadata"]["generation"] = 1.into();
        let parent = parent.to_string();
        profile.call(REFERENCES, &[Arg::Text(&parent)])?;
        let desired = profile.call(DESIRED, &[Arg::Text(&parent), Arg::List(&[]), Arg::List(&related)])?;
        let owned: Vec<String> = desired.iter().map(|object| as_created(object)).collect::<Result<_>>()?;
        profile.call(
            STATUS,
            &[
                Arg::Text(&parent),
                Arg::List(&owned),
                Arg::List(&related),
                Arg::Text("2026-11-28T12:00:00Z"),
                Arg::NoText,
            ],
        )?;
        profile.call(DESIRED, &[Arg::Text(&parent), Arg::List(&owned), Arg::List(&related)])?;
    }

    let mut ran: Vec<(u64, usize)> = Vec::new();
    for (position, first) in profile.first_call.iter().enumerate() {
        if let Some(first) = first {
            ran.push((*first, position));
        }
    }
    ran.sort();
    let mut text = format!(
        "# The Memcached module's functions in the order a reconcile first runs them: `make guest-code-order`\n\
         # ({} of {} functions, {} calls over deploy/samples; memcached-operator/examples/guest_code_order.rs).\n",
        ran.len(),
        names.len(),
        profile.calls
    );
    for (_, position) in &ran {
        if let Some(name) = &names[*position] {
            text.push_str(name);
            text.push('\n');
        }
    }
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("guest-code-order: {} of {} functions ran; wrote {}", ran.len(), names.len(), out.display());
    Ok(())
}

fn secrets() -> Vec<String> {
    [
        ("memcached-sasl", json!({"password-file": "bWVtY2FjaGVkOnBhc3N3b3Jk"})),
        ("memcached-tls", json!({"tls.crt": "Y2VydA==", "tls.key": "a2V5", "ca.crt": "Y2E="})),
    ]
    .into_iter()
    .map(|(name, data)| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": "production", "uid": format!("{name}-uid"), "resourceVersion": "7"},
            "data": data})
        .to_string()
    })
    .collect()
}

/// A desired object as the API server returns it once created: server
/// fields in its metadata, and for a Deployment, a status.
fn as_created(desired: &str) -> Result<String> {
    let mut object: Value = serde_json::from_str(desired).context("desired returned an object that is not JSON")?;
    object["metadata"]["uid"] = "5d1c3a8e-0f4b-4c2a-9e7d-1b2c3d4e5f60".into();
    object["metadata"]["resourceVersion"] = "42".into();
    object["metadata"]["creationTimestamp"] = "2026-11-28T12:00:00Z".into();
    object["metadata"]["generation"] = 1.into();
    if object["kind"] == "Deployment" {
        let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
        object["status"] = json!({
            "observedGeneration": 1, "replicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas, "updatedReplicas": replicas,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]
        });
    }
    Ok(object.to_string())
}

enum Arg<'a> {
    Text(&'a str),
    List(&'a [String]),
    /// `option<string>`'s none.
    NoText,
}

struct Profile {
    engine: Engine,
    module: Module,
    /// Per defined function: (the first call that ran it, when it first ran
    /// within that call), packed as call << 32 | rank.
    first_call: Vec<Option<u64>>,
    calls: u64,
}

impl Profile {
    /// Calls `export` on a fresh instance, as the canonical ABI lays out
    /// its arguments; for a `result<list<string>, _>` the strings returned.
    fn call(&mut self, export: &str, args: &[Arg<'_>]) -> Result<Vec<String>> {
        let mut store = Store::new(&self.engine, ());
        let instance =
            Instance::new(&mut store, &self.module, &[]).map_err(anyhow::Error::from).context("instantiating")?;
        let memory = instance.get_memory(&mut store, "memory").context("the module exports no memory")?;
        let realloc: TypedFunc<(i32, i32, i32, i32), i32> = instance.get_typed_func(&mut store, "cabi_realloc")?;
        let mut flat = Vec::new();
        for arg in args {
            match arg {
                Arg::Text(text) => {
                    let pointer = write(&mut store, &memory, &realloc, text.as_bytes(), 1)?;
                    flat.extend([Val::I32(pointer), Val::I32(text.len() as i32)]);
                }
                Arg::List(items) => {
                    let mut pairs = Vec::with_capacity(items.len() * 8);
                    for item in *items {
                        let pointer = write(&mut store, &memory, &realloc, item.as_bytes(), 1)?;
                        pairs.extend_from_slice(&pointer.to_le_bytes());
                        pairs.extend_from_slice(&(item.len() as i32).to_le_bytes());
                    }
                    let pointer = write(&mut store, &memory, &realloc, &pairs, 4)?;
                    flat.extend([Val::I32(pointer), Val::I32(items.len() as i32)]);
                }
                Arg::NoText => flat.extend([Val::I32(0), Val::I32(0), Val::I32(0)]),
            }
        }
        let function = instance.get_func(&mut store, export).with_context(|| format!("no export {export}"))?;
        let mut results = [Val::I32(0)];
        function
            .call(&mut store, &flat, &mut results)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("calling {export}"))?;
        let returned = results[0].i32().with_context(|| format!("{export} returned no i32"))?;
        let strings = if export == DESIRED { returned_strings(&mut store, &memory, returned)? } else { Vec::new() };
        let post = format!("cabi_post_{export}");
        if let Some(post) = instance.get_func(&mut store, &post) {
            post.call(&mut store, &[Val::I32(returned)], &mut [])?;
        }
        for position in 0..self.first_call.len() {
            let name = format!("{ENTRY_EXPORT_PREFIX}{position}");
            let global = instance.get_global(&mut store, &name).with_context(|| format!("no export {name}"))?;
            let rank = global.get(&mut store).i32().with_context(|| format!("{name} is not an i32"))? as u32;
            if rank > 0 && self.first_call[position].is_none() {
                self.first_call[position] = Some(self.calls << 32 | u64::from(rank));
            }
        }
        self.calls += 1;
        Ok(strings)
    }
}

fn write(
    store: &mut Store<()>,
    memory: &Memory,
    realloc: &TypedFunc<(i32, i32, i32, i32), i32>,
    bytes: &[u8],
    align: i32,
) -> Result<i32> {
    let pointer = realloc.call(&mut *store, (0, 0, align, bytes.len() as i32))?;
    memory.write(&mut *store, pointer as usize, bytes)?;
    Ok(pointer)
}

/// `result<list<string>, error>` at `at`: the strings when ok.
fn returned_strings(store: &mut Store<()>, memory: &Memory, at: i32) -> Result<Vec<String>> {
    let word = |store: &mut Store<()>, offset: usize| -> Result<usize> {
        let mut bytes = [0u8; 4];
        memory.read(&mut *store, offset, &mut bytes)?;
        Ok(u32::from_le_bytes(bytes) as usize)
    };
    let at = at as usize;
    let mut discriminant = [0u8];
    memory.read(&mut *store, at, &mut discriminant)?;
    if discriminant[0] != 0 {
        bail!("desired returned an error for a sample");
    }
    let (list, len) = (word(store, at + 4)?, word(store, at + 8)?);
    let mut strings = Vec::with_capacity(len);
    for i in 0..len {
        let (pointer, length) = (word(store, list + 8 * i)?, word(store, list + 8 * i + 4)?);
        let mut bytes = vec![0u8; length];
        memory.read(&mut *store, pointer, &mut bytes)?;
        strings.push(String::from_utf8(bytes).context("desired returned a string that is not UTF-8")?);
    }
    Ok(strings)
}
