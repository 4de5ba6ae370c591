//! The built-in Memcached component lays out first the functions a
//! reconcile runs (guest/link/serving-functions.txt, `make
//! guest-code-order`; scripts/build-wasm.sh passes it to `componentize
//! --function-order`), so that they fault in few pages of its compiled code.

use memcached_operator::BUILTIN_COMPONENT;
use wasm_operator::authoring::function_order::{defined_function_names, function_list, without_crate_hashes};
use wasmparser::{Parser, Payload};

/// The component's core modules, as bytes.
fn core_modules(component: &[u8]) -> Vec<&[u8]> {
    let mut modules = Vec::new();
    for payload in Parser::new(0).parse_all(component) {
        if let Payload::ModuleSection { unchecked_range, .. } = payload.expect("the component parses") {
            modules.push(&component[unchecked_range.start as usize..unchecked_range.end as usize]);
        }
    }
    modules
}

fn listed() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest/link/serving-functions.txt");
    function_list(&std::fs::read_to_string(path).expect("guest/link/serving-functions.txt is readable"))
}

#[test]
fn the_functions_a_reconcile_runs_come_first_in_the_listed_order() {
    // The guest's module is the one with names (the others are the
    // component's small glue modules).
    let names = core_modules(BUILTIN_COMPONENT)
        .into_iter()
        .map(|module| defined_function_names(module).expect("a core module parses"))
        .max_by_key(|names| names.iter().flatten().count())
        .expect("the component has a core module");
    // Matched as componentize matches them: without crate hashes, which a
    // new compiler changes.
    let names: Vec<Option<String>> = names.iter().map(|name| name.as_deref().map(without_crate_hashes)).collect();
    let listed: Vec<String> = listed().iter().map(|name| without_crate_hashes(name)).collect();
    assert!(listed.len() > 100, "the list holds the functions a reconcile runs: {}", listed.len());

    let present: Vec<&String> = listed.iter().filter(|name| names.iter().any(|n| n.as_ref() == Some(name))).collect();
    assert!(
        present.len() * 100 >= listed.len() * 95,
        "{} of the {} listed functions are not in the module: the guest changed, run `make guest-code-order`",
        listed.len() - present.len(),
        listed.len()
    );
    // The front of the code, name by name, is the list (a name some
    // functions share brings them all).
    let mut seen = std::collections::HashSet::new();
    let mut position = 0;
    for name in present.into_iter().filter(|name| seen.insert(*name)) {
        let mut found = 0;
        while names.get(position).and_then(Option::as_ref) == Some(name) {
            position += 1;
            found += 1;
        }
        assert!(found > 0, "function {position} is {:?}, the list has {name} there", names.get(position));
    }
    assert!(position < names.len() / 2, "most functions come after the listed ones ({position} of {})", names.len());
}
