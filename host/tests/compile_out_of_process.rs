//! A long-running operator compiles in a child process of its binary
//! (`host/src/modules/compiler.rs`): the code lands in an on-disk cache by
//! digest that later loads reuse, a damaged file is compiled again, only the
//! last versions are kept, and a compile that fails, runs out of time or
//! cannot start is an error naming why, with a stable reason.

use std::path::PathBuf;
use std::time::Duration;

use wasm_operator::modules::compiler::CompileOptions;
use wasm_operator::modules::{LogicModule, ModuleEngine, ModuleSource};
use wasm_operator::resident_pages;

fn greeting() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/greeting.wasm");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{} ({e}): `make test` builds it", path.display()))
}

/// The Greeting module with a custom section appended: the same logic, its
/// own digest.
fn greeting_marked(mark: &str) -> Vec<u8> {
    let mut bytes = greeting();
    let name = b"mark";
    let mut payload = vec![u8::try_from(name.len()).expect("short")];
    payload.extend_from_slice(name);
    payload.extend_from_slice(mark.as_bytes());
    bytes.push(0);
    bytes.push(u8::try_from(payload.len()).expect("short"));
    bytes.extend_from_slice(&payload);
    bytes
}

fn options(test: &str) -> CompileOptions {
    let cache_dir = std::env::temp_dir().join(format!("compile-out-of-process-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache_dir);
    CompileOptions {
        program: PathBuf::from(env!("CARGO_BIN_EXE_wasm-operator")),
        cache_dir,
        memory_limit: Some(256 << 20),
        timeout: Duration::from_secs(120),
        threads: 1,
        keep: 4,
    }
}

fn compiled_files(options: &CompileOptions) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&options.cache_dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn load(engine: &ModuleEngine, bytes: &[u8]) -> Result<LogicModule, wasm_operator::modules::LoadError> {
    LogicModule::from_bytes(engine, ModuleSource::BuiltIn("greeting"), bytes, false)
}

#[test]
fn a_compile_lands_in_the_cache_and_the_next_load_maps_it() {
    let options = options("cache");
    let engine = ModuleEngine::compiling_out_of_process(options.clone()).expect("an engine");
    let module = load(&engine, &greeting()).expect("compiled in a child");
    assert_eq!(module.name(), "greeting");
    let files = compiled_files(&options);
    assert_eq!(files.len(), 1, "one compiled version and no leftovers: {files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "cwasm"));
    let written = std::fs::metadata(&files[0]).expect("the file");

    // The same bytes again (a restart, a rollback): the cached code, not a
    // second compile (the file is the same one, not rewritten).
    let again = load(&engine, &greeting()).expect("loaded from the cache");
    assert_eq!(again.digest(), module.digest());
    let reused = std::fs::metadata(&files[0]).expect("the file");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((reused.ino(), reused.len()), (written.ino(), written.len()));

    // A damaged cache file is compiled again, not trusted. (Damaged while
    // nothing maps it: the operator itself only ever renames a whole file
    // into place, so a mapped one never changes under its reader.)
    drop((module, again));
    std::fs::write(&files[0], b"not native code").expect("damaging it");
    let repaired = load(&engine, &greeting()).expect("compiled again");
    assert_eq!(repaired.name(), "greeting");
    assert!(std::fs::metadata(&files[0]).expect("the file").len() > 100, "rewritten whole");
    let _ = std::fs::remove_dir_all(&options.cache_dir);
}

#[test]
fn only_the_last_versions_are_kept() {
    let options = CompileOptions { keep: 2, ..options("keep") };
    let engine = ModuleEngine::compiling_out_of_process(options.clone()).expect("an engine");
    for mark in ["one", "two", "three"] {
        load(&engine, &greeting_marked(mark)).expect("compiled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let files = compiled_files(&options);
    assert_eq!(files.len(), 2, "{files:?}");
    let newest = wasm_operator::modules::digest(&greeting_marked("three")).replace(':', "-");
    assert!(files.iter().any(|f| f.to_string_lossy().contains(&newest)), "the newest stays: {files:?}");
    let _ = std::fs::remove_dir_all(&options.cache_dir);
}

#[test]
fn a_failed_compile_names_its_cause_and_reason() {
    // Invalid WebAssembly in a component header: the module is at fault.
    let options = options("invalid");
    let engine = ModuleEngine::compiling_out_of_process(options.clone()).expect("an engine");
    let mut broken = greeting();
    broken.truncate(broken.len() / 2);
    let error = load(&engine, &broken).map(drop).expect_err("refused");
    assert_eq!(error.reason(), "LoadFailed", "{error}");
    assert!(error.to_string().starts_with("compiling the built-in greeting module: "), "{error}");
    assert!(compiled_files(&options).is_empty(), "nothing cached, no input left behind");

    // Out of time: the compiler's fault, not the module's.
    let quick = CompileOptions { timeout: Duration::from_millis(1), ..options.clone() };
    let engine = ModuleEngine::compiling_out_of_process(quick).expect("an engine");
    let error = load(&engine, &greeting_marked("slow")).map(drop).expect_err("stopped");
    assert_eq!(error.reason(), "CompileFailed");
    assert!(error.to_string().contains("took longer than 0s (--compile-timeout)"), "{error}");

    // Out of memory under its bound.
    let small = CompileOptions { memory_limit: Some(1 << 20), ..options.clone() };
    let engine = ModuleEngine::compiling_out_of_process(small).expect("an engine");
    let error = load(&engine, &greeting_marked("small")).map(drop).expect_err("refused");
    assert_eq!(error.reason(), "CompileFailed");
    assert!(error.to_string().contains("more memory than its bound of 1 MiB"), "{error}");

    // A compiler that does not start.
    let missing = CompileOptions { program: PathBuf::from("/nonexistent/wasm-operator"), ..options.clone() };
    let engine = ModuleEngine::compiling_out_of_process(missing).expect("an engine");
    let error = load(&engine, &greeting_marked("missing")).map(drop).expect_err("refused");
    assert_eq!(error.reason(), "CompileFailed");
    assert!(error.to_string().contains("starting the compiler /nonexistent/wasm-operator"), "{error}");
    let _ = std::fs::remove_dir_all(&options.cache_dir);
}

/// A version held but idle gives back its code pages (`resident_pages.rs`,
/// done every minute by the hot swap); it still runs when used again.
#[test]
fn a_mapped_versions_code_pages_are_released_and_it_still_runs() {
    let options = options("release");
    let engine = ModuleEngine::compiling_out_of_process(options.clone()).expect("an engine");
    let module = load(&engine, &greeting()).expect("compiled in a child");
    let run = || module.reconciler().and_then(|mut r| r.manifest()).expect("the module runs").name;
    assert_eq!(run(), "greeting");
    let code = [module.code_range()];
    let resident = || resident_pages::resident_within(&code).expect("smaps");
    let before = resident();
    assert!(before > 0, "code that ran is resident");

    let released = resident_pages::release_within(&code).expect("released");
    assert_eq!(released, before);
    assert_eq!(resident(), 0);
    assert_eq!(run(), "greeting", "mapped again from the file on its next call");
    assert!(resident() > 0);
    drop(module);
    let _ = std::fs::remove_dir_all(&options.cache_dir);
}
