//! The epoch ticker behind every call's deadline sleeps while no module
//! call is alive (an idle operator's thread is not woken 100 times a
//! second), and a call made after it slept still meets its deadline. Its
//! own test binary: the ticker counts every call store of the process.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use wasm_operator::runtime::call_error::CallError;
use wasm_operator::runtime::engine::{DEADLINE, ModuleEngine};
use wasm_operator::runtime::logic_module::LogicModule;

/// The ticker thread's voluntary context switches: one per tick it sleeps.
fn ticker_switches() -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let ticker = tasks
        .filter_map(Result::ok)
        .find(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == "wasm-epoch"))
        .expect("the wasm-epoch thread");
    let status = std::fs::read_to_string(ticker.path().join("status")).expect("its status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("voluntary_ctxt_switches")
}

fn switches_over(period: Duration) -> u64 {
    let before = ticker_switches();
    std::thread::sleep(period);
    ticker_switches() - before
}

#[test]
fn an_idle_ticker_sleeps_and_a_call_after_it_still_meets_its_deadline() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/greeting-loop-always.wasm");
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    let engine = ModuleEngine::new().expect("an engine");
    // Loading calls the module (its manifest) in stores of its own.
    let module = LogicModule::from_file(&engine, &path, false).expect("the module loads");

    // Past the second the ticker goes on after the last store.
    std::thread::sleep(Duration::from_millis(1500));
    let idle = switches_over(Duration::from_secs(1));
    assert!(idle <= 2, "an idle ticker woke {idle} times in a second (it ticks every 10 ms while calls live)");

    let mut reconciler = module.reconciler().expect("a fresh instance");
    let ticking = switches_over(Duration::from_millis(500));
    assert!(ticking >= 20, "a live store keeps the ticker ticking: {ticking} ticks in 500 ms");

    let parent = r#"{"apiVersion":"example.c5c3.io/v1","kind":"Greeting",
        "metadata":{"name":"g","namespace":"ns","uid":"u-1"},"spec":{"message":"hello"}}"#;
    let started = Instant::now();
    let error = reconciler.desired(parent, &[], &[]).expect_err("this build loops on every parent");
    let took = started.elapsed();
    assert!(matches!(error, CallError::DeadlineExceeded), "{error}");
    assert!(took >= DEADLINE.mul_f32(0.9) && took < DEADLINE + Duration::from_secs(3), "the deadline took {took:?}");
    drop(reconciler);
}
