//! The built-in Memcached component lays out first the functions a
//! reconcile runs (guest/link/serving-functions.txt, `make
//! guest-code-order`; scripts/build-wasm.sh passes it to `componentize
//! --function-order`), so that they fault in few pages of its compiled code.

use memcached_operator::BUILTIN_COMPONENT;
use wasm_operator::authoring::function_order::reorder::without_crate_hashes;
use wasm_operator::authoring::function_order::{defined_function_names, function_list};
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

/// The host's list (host/link/serving-functions.txt) names functions with
/// their crate hashes, as the linker needs them, so a dependency update
/// makes it stale without a word from the linker. `make` checks each
/// `ship` build with `scripts/code-order.py --check`; here the check runs
/// on this test's own binary, with a list of three of its functions and,
/// then, a fourth it does not have.
#[test]
fn the_host_list_check_counts_the_names_a_binary_has_and_says_when_it_is_stale() {
    let binary = std::env::current_exe().expect("the test binary's path");
    let symbols = std::process::Command::new("nm").arg("--defined-only").arg(&binary).output().expect("nm runs");
    let names: Vec<String> = String::from_utf8_lossy(&symbols.stdout)
        .lines()
        .filter_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "t" | "T", name] if name.starts_with("_ZN") => Some(name.to_owned()),
            _ => None,
        })
        .take(3)
        .collect();
    assert_eq!(names.len(), 3, "the test binary has functions with symbols");
    let dir = std::env::temp_dir().join(format!("code-order-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let check = |list: &[String]| {
        let path = dir.join("serving-functions.txt");
        std::fs::write(&path, format!("# a list\n{}\n", list.join("\n"))).expect("the list is written");
        let output = std::process::Command::new("python3")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/code-order.py"))
            .arg("--check")
            .arg(&binary)
            .arg(&path)
            .output()
            .expect("python3 runs");
        assert!(output.status.success(), "the check fails only on bad use: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };

    let fresh = check(&names);
    assert!(fresh.contains("3 of 3 functions"), "{fresh}");
    assert!(!fresh.contains("stale"), "{fresh}");

    let mut stale = names.clone();
    stale.push("_ZN4gone8function17h0123456789abcdefE".to_owned());
    let stale = check(&stale);
    assert!(stale.contains("3 of 4 functions"), "{stale}");
    assert!(stale.contains("is stale") && stale.contains("make code-order"), "{stale}");
    std::fs::remove_dir_all(&dir).ok();
}
