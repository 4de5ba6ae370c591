//! `make bench`: the desired state of a CR with every feature on (all six
//! objects, with owner references and the Secret hash: the controller
//! interface's `desired-all`, one call per reconcile), computed:
//!
//! - natively (the guest crate linked into the host),
//! - in the component with one instance reused for every call,
//! - in a fresh instance per call, from `InstancePre` and the pooling
//!   allocator, as the operator runs it.
//!
//! All in one run, so the ratios hold even on a noisy, shared machine:
//! each case runs in interleaved rounds and reports its median round.
//! Prints a table; the last line is the wasm/native ratio.

use std::hint::black_box;
use std::time::{Duration, Instant};

use memcached_logic::exports;
use memcached_operator::module::LogicModule;

const ROUNDS: usize = 21;
const ROUND_TIME: Duration = Duration::from_millis(150);

fn secrets() -> Vec<String> {
    ["memcached-sasl", "memcached-tls"]
        .iter()
        .map(|name| {
            serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "production"},
                "data": {"password-file": "dXNlcjpwYXNz", "tls.crt": "Y2VydA==", "tls.key": "a2V5", "ca.crt": "Y2E="}})
            .to_string()
        })
        .collect()
}

fn everything_cr() -> String {
    let yaml = include_str!("../../tests/fixtures/everything/memcached.yaml");
    let mut value: serde_json::Value = serde_norway::from_str(yaml).expect("fixture parses");
    // As the operator reads it from the API server: with a uid.
    value["metadata"]["uid"] = "0b7c4f1e-5a2d-4e8b-9c3f-6d1a2b3c4d5e".into();
    value.to_string()
}

/// Nanoseconds per call of `op`, one round: as many calls as fit ROUND_TIME.
fn round(op: &mut dyn FnMut()) -> f64 {
    let start = Instant::now();
    let mut calls = 0u64;
    while start.elapsed() < ROUND_TIME {
        for _ in 0..16 {
            op();
        }
        calls += 16;
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// One benchmarked operation.
type Case<'a> = Box<dyn FnMut() + 'a>;

fn main() {
    let cr = everything_cr();
    let module = LogicModule::builtin().expect("the built-in component loads");
    let mut reused = module.instance().expect("instantiates");
    let mut reused_controller = module.controller().expect("instantiates");

    // Same answer everywhere, or the numbers mean nothing.
    assert_eq!(reused.render(&cr).expect("component render"), exports::render(&cr).expect("native render"));

    // The operator's call: every owned kind's desired object, from no current
    // objects, with the referenced Secrets; one call per reconcile.
    let none: Vec<Option<String>> = vec![None; 6];
    let secrets = secrets();
    let native_desired = exports::desired_all(&cr, &none, &secrets).expect("native desired");
    assert_eq!(native_desired.iter().flatten().count(), 6);
    assert_eq!(reused_controller.desired_all(&cr, &none, &secrets).expect("component desired"), native_desired);

    let mut cases: Vec<(&str, Case<'_>)> = vec![
        ("native", Box::new(|| {
            black_box(exports::desired_all(black_box(&cr), &none, &secrets).expect("desired"));
        })),
        ("component, one instance reused", Box::new(|| {
            black_box(reused_controller.desired_all(black_box(&cr), &none, &secrets).expect("desired"));
        })),
        ("component, fresh instance per call", Box::new(|| {
            let mut instance = module.controller().expect("instantiates");
            black_box(instance.desired_all(black_box(&cr), &none, &secrets).expect("desired"));
        })),
        ("fresh instance only (no call)", Box::new(|| {
            black_box(module.controller().expect("instantiates"));
        })),
        ("fresh instance + one trivial call (manifest)", Box::new(|| {
            let mut instance = module.controller().expect("instantiates");
            black_box(instance.manifest().expect("a manifest"));
        })),
        ("render (strict, off-cluster), native", Box::new(|| {
            black_box(exports::render(black_box(&cr)).expect("renders"));
        })),
    ];

    for (_, op) in cases.iter_mut() {
        round(op.as_mut()); // warm up caches, the pool and the allocator
    }
    let mut samples = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for _ in 0..ROUNDS {
        for (i, (_, op)) in cases.iter_mut().enumerate() {
            samples[i].push(round(op.as_mut()));
        }
    }
    let medians: Vec<f64> = samples.into_iter().map(median).collect();
    let native = medians[0];

    println!();
    println!("desired state of a CR with every feature on (desired-all: 6 objects), median of {ROUNDS} rounds");
    println!("| case | µs per call | × native |");
    println!("|---|---:|---:|");
    for ((name, _), ns) in cases.iter().zip(&medians) {
        println!("| {name} | {:.1} | {:.2} |", ns / 1000.0, ns / native);
    }
    println!();
    println!("targets: component within 2x of native; fresh instance + desired state under 50 µs");
    println!(
        "wasm/native ratio: {:.2} (reused instance), {:.2} (fresh instance); fresh instance + desired state: {:.1} µs",
        medians[1] / native,
        medians[2] / native,
        medians[2] / 1000.0
    );
}
