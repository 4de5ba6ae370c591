//! A long-running operator compiles in a child process of its binary
//! (`host/src/runtime/compiler.rs`): the code lands in an on-disk cache by
//! digest that later loads reuse, a damaged file is compiled again, only the
//! last versions are kept, and a compile that fails, runs out of time or
//! cannot start is an error naming why, with a stable reason.

use std::path::PathBuf;
use std::time::Duration;

use wasm_operator::memory::resident_pages;
use wasm_operator::runtime::compiler::{CompileOptions, Tier};
use wasm_operator::runtime::engine::ModuleEngine;
use wasm_operator::runtime::logic_module::{LogicModule, ModuleSource};

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

fn load(engine: &ModuleEngine, bytes: &[u8]) -> Result<LogicModule, wasm_operator::runtime::logic_module::LoadError> {
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
    let newest = wasm_operator::runtime::logic_module::digest(&greeting_marked("three")).replace(':', "-");
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

fn memcached() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/memcached.wasm");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{} ({e}): `make build` builds it", path.display()))
}

/// What the module answers for one Greeting: the same for either tier.
fn desired_of(module: &LogicModule) -> Vec<String> {
    let parent = r#"{"apiVersion":"example.c5c3.io/v1","kind":"Greeting","metadata":{"name":"hello","namespace":"default","uid":"u-1","generation":1},"spec":{"message":"hi"}}"#;
    module.reconciler().and_then(|mut r| r.desired(parent, &[], &[])).expect("desired state")
}

fn wait_for_tier(module: &LogicModule, tier: Tier) {
    let started = std::time::Instant::now();
    while module.tier() != tier {
        assert!(started.elapsed() < Duration::from_secs(120), "still on {:?} after 120 s", module.tier());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// In tiers, a version nothing compiled serves on baseline code at once;
/// its optimized code replaces it in place, answers the same, and is the
/// only code the cache keeps, so the next load of the version maps it.
#[test]
fn in_tiers_a_version_serves_on_baseline_code_until_its_optimized_code_replaces_it() {
    let options = options("tiers");
    let engine = ModuleEngine::compiling_in_tiers(options.clone()).expect("an engine");
    let module = load(&engine, &greeting()).expect("compiled to baseline code in a child");
    assert_eq!(module.tier(), Tier::Baseline);
    let on_baseline = desired_of(&module);
    assert!(!on_baseline.is_empty());

    wait_for_tier(&module, Tier::Optimized);
    assert_eq!(desired_of(&module), on_baseline, "the same answer on optimized code");
    let files = compiled_files(&options);
    assert_eq!(files.len(), 1, "the optimized code only, no baseline file or input left: {files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "cwasm"), "{files:?}");

    let again = ModuleEngine::compiling_in_tiers(options.clone()).expect("an engine");
    let reloaded = load(&again, &greeting()).expect("mapped from the cache");
    assert_eq!(reloaded.tier(), Tier::Optimized, "a version compiled before loads on its optimized code");
    assert_eq!(desired_of(&reloaded), on_baseline);
    drop((module, reloaded));
    let _ = std::fs::remove_dir_all(&options.cache_dir);
}

/// The optimizing compile failing (here out of memory: under a 140 MiB
/// bound Winch compiles the Memcached module, needing under 100 MiB, and
/// Cranelift cannot, needing ~180) leaves the version serving on its
/// baseline code; a compile that fails at the first tier refuses the
/// version as before, naming the cause.
#[test]
fn in_tiers_a_failed_optimizing_compile_leaves_the_version_on_baseline_code() {
    let options = CompileOptions { memory_limit: Some(140 << 20), ..options("tier-fails") };
    let engine = ModuleEngine::compiling_in_tiers(options.clone()).expect("an engine");
    let module = LogicModule::from_bytes(&engine, ModuleSource::BuiltIn("memcached"), &memcached(), false)
        .expect("compiled to baseline code within the bound");
    assert_eq!(module.tier(), Tier::Baseline);
    // The optimizing compile's input lies in the cache while it runs.
    let compiling = || compiled_files(&options).iter().any(|f| f.to_string_lossy().ends_with("-optimized.wasm"));
    let started = std::time::Instant::now();
    while !compiling() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    while compiling() {
        assert!(started.elapsed() < Duration::from_secs(120), "the optimizing compile never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(module.tier(), Tier::Baseline, "still serving, on baseline code");
    assert_eq!(module.reconciler().and_then(|mut r| r.manifest()).expect("it runs").name, "memcached");
    assert!(compiled_files(&options).is_empty(), "nothing cached: {:?}", compiled_files(&options));

    let small = CompileOptions { memory_limit: Some(1 << 20), ..options.clone() };
    let engine = ModuleEngine::compiling_in_tiers(small).expect("an engine");
    let error = load(&engine, &greeting_marked("small-tiered")).map(drop).expect_err("refused");
    assert_eq!(error.reason(), "CompileFailed");
    assert!(error.to_string().contains("more memory than its bound of 1 MiB"), "{error}");

    // Invalid WebAssembly: neither compiler takes it; the module is at fault.
    let engine = ModuleEngine::compiling_in_tiers(options.clone()).expect("an engine");
    let mut broken = greeting();
    broken.truncate(broken.len() / 2);
    let error = load(&engine, &broken).map(drop).expect_err("refused");
    assert_eq!(error.reason(), "LoadFailed", "{error}");
    drop(module);
    let _ = std::fs::remove_dir_all(&options.cache_dir);
}
