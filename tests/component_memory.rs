//! The component's heap lives in its initial memory (guest/src/heap.rs): a
//! reconcile, even the largest fixture built from server-shaped current
//! objects, never grows linear memory, which would cost a pooling host two
//! mprotect calls per fresh instance. Input larger than the initial memory
//! still works: the heap then grows.

use std::sync::OnceLock;

use memcached_logic::children::ChildKind;
use memcached_operator::BUILTIN_COMPONENT;
use memcached_tests::server::server_shaped;
use memcached_tests::{fixtures, parse};
use serde_json::{Value, json};
use wasmtime::component::{Component, Func, Instance, InstancePre, Linker, Val};
use wasmtime::{Engine, ResourceLimiter, Store};

/// Every `memory.grow` after instantiation, as (current, desired) bytes.
#[derive(Default)]
struct MemoryGrowths(Vec<(usize, usize)>);

impl ResourceLimiter for MemoryGrowths {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Creating the memory at instantiation is reported as growing from 0.
        if current > 0 {
            self.0.push((current, desired));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, _desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

struct FreshInstance {
    store: Store<MemoryGrowths>,
    instance: Instance,
}

/// The built-in component, compiled once per test binary.
fn component() -> &'static InstancePre<MemoryGrowths> {
    static PRE: OnceLock<InstancePre<MemoryGrowths>> = OnceLock::new();
    PRE.get_or_init(|| {
        let engine = Engine::default();
        let component = Component::new(&engine, BUILTIN_COMPONENT).expect("the built-in component compiles");
        Linker::new(&engine).instantiate_pre(&component).expect("links with no imports")
    })
}

impl FreshInstance {
    fn new() -> Self {
        let pre = component();
        let mut store = Store::new(pre.engine(), MemoryGrowths::default());
        store.limiter(|growths| growths);
        let instance = pre.instantiate(&mut store).expect("instantiates");
        FreshInstance { store, instance }
    }

    fn controller_func(&mut self, name: &str) -> Func {
        let interface = self
            .instance
            .get_export_index(&mut self.store, None, "wasm-operator:controller/reconciler@1.0.0")
            .expect("exports the reconciler interface");
        let func =
            self.instance.get_export_index(&mut self.store, Some(&interface), name).expect("exports the function");
        self.instance.get_func(&mut self.store, func).expect("a function")
    }

    /// `desired`; the number of objects it answered.
    fn desired(&mut self, parent: &str, owned: &[String], related: &[String]) -> usize {
        let func = self.controller_func("desired");
        let owned = owned.iter().map(|text| Val::String(text.clone())).collect();
        let related = related.iter().map(|text| Val::String(text.clone())).collect();
        let params = [Val::String(parent.to_owned()), Val::List(owned), Val::List(related)];
        let mut results = [Val::Bool(false)];
        func.call(&mut self.store, &params, &mut results).expect("desired does not trap");
        match &results[0] {
            Val::Result(Ok(Some(objects))) => match objects.as_ref() {
                Val::List(objects) => objects.len(),
                other => panic!("desired answered {other:?}"),
            },
            other => panic!("desired failed: {other:?}"),
        }
    }

    fn memory_growths(&self) -> &[(usize, usize)] {
        &self.store.data().0
    }
}

fn with_uid(cr: &str) -> Value {
    let mut cr = parse(cr);
    cr["metadata"]["uid"] = json!("0b7c4f1e-5a2d-4e8b-9c3f-6d1a2b3c4d5e");
    cr
}

fn secrets() -> Vec<String> {
    ["memcached-sasl", "memcached-tls"]
        .iter()
        .map(|name| {
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
                   "data": {"password-file": "dXNlcjpwYXNz", "tls.crt": "Y2VydA==", "tls.key": "a2V5", "ca.crt": "Y2E="}})
            .to_string()
        })
        .collect()
}

#[test]
fn a_reconcile_never_grows_memory_for_any_fixture() {
    for fixture in fixtures() {
        let parent = with_uid(&fixture.stored).to_string();

        // From nothing, as the first reconcile builds.
        let mut fresh = FreshInstance::new();
        let built = fresh.desired(&parent, &[], &secrets());
        assert!(built >= 2, "{}: built {built} objects", fixture.name);
        assert_eq!(fresh.memory_growths(), &[], "{}: memory grew building from nothing", fixture.name);

        // From the objects as the API server returns them, as every later
        // reconcile does: more to parse.
        let objects: Vec<Value> =
            parse(&std::fs::read_to_string(fixture.dir.join("objects.json")).expect("objects.json"))["items"]
                .as_array()
                .expect("a v1 List")
                .clone();
        let current: Vec<String> = ChildKind::ALL
            .iter()
            .filter_map(|kind| {
                objects.iter().find(|o| o["kind"] == kind.info().kind).map(|o| server_shaped(o).to_string())
            })
            .collect();
        let mut fresh = FreshInstance::new();
        assert_eq!(fresh.desired(&parent, &current, &secrets()), built, "{}", fixture.name);
        assert_eq!(fresh.memory_growths(), &[], "{}: memory grew building from current objects", fixture.name);
    }
}

#[test]
fn input_larger_than_the_initial_memory_grows_the_heap() {
    let fixture = fixtures().into_iter().find(|f| f.name == "everything").expect("the everything fixture");
    let mut parent = with_uid(&fixture.stored);
    // 2.5 MiB of annotation: more than the whole initial memory, under the 3 MiB input cap.
    parent["metadata"]["annotations"]["example.com/large"] = json!("x".repeat(5 << 19));
    let mut fresh = FreshInstance::new();
    assert_eq!(fresh.desired(&parent.to_string(), &[], &secrets()), 6);
    assert!(!fresh.memory_growths().is_empty(), "2.5 MiB of input fit without growing memory?");
    // And the grown heap keeps serving calls on the same instance.
    assert_eq!(fresh.desired(&with_uid(&fixture.stored).to_string(), &[], &secrets()), 6);
}
