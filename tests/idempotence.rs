//! Building from what the operator (or the API server) last wrote changes
//! nothing; a changed CR changes only the fields it demands. This is what
//! keeps steady-state reconciles free of writes.

use memcached_logic::exports;
use memcached_tests::server::server_shaped;
use memcached_tests::{changed_paths, desired_of, fixtures, parse, reconciler, without_nulls};
use pretty_assertions::assert_eq;
use serde_json::Value;

fn kind_of(object: &Value) -> &str {
    object["kind"].as_str().expect("rendered objects have a kind")
}

#[test]
fn building_from_the_previous_output_changes_nothing() {
    for fixture in fixtures() {
        let mut wasm = reconciler();
        for text in exports::render(&fixture.memcached).expect("renders") {
            let object = parse(&text);
            let kind = kind_of(&object);
            let owned = [text.clone()];
            let again = desired_of(exports::desired(&fixture.stored, &owned, &[]).expect("desired"), kind);
            assert_eq!(again.as_deref(), Some(text.as_str()), "{}: {kind} changed when rebuilt", fixture.name);
            let again = desired_of(wasm.desired(&fixture.stored, &owned, &[]).expect("desired"), kind);
            assert_eq!(again.as_deref(), Some(text.as_str()), "{}: {kind} changed in the component", fixture.name);
        }
    }
}

#[test]
fn building_from_the_servers_object_keeps_what_the_server_filled_in() {
    for fixture in fixtures() {
        for text in exports::render(&fixture.memcached).expect("renders") {
            let stored = server_shaped(&parse(&text));
            let kind = kind_of(&stored).to_owned();
            let rebuilt =
                desired_of(exports::desired(&fixture.stored, &[stored.to_string()], &[]).expect("desired"), &kind)
                    .expect("still wanted");
            assert_eq!(
                without_nulls(&stored),
                without_nulls(&parse(&rebuilt)),
                "{}: {kind} built from the server's object differs from it",
                fixture.name
            );
        }
    }
}

/// A CR edit, and the only paths of each object it may change.
struct Edit {
    describe: &'static str,
    apply: fn(&mut Value),
    may_change: &'static [(&'static str, &'static [&'static str])],
}

const EDITS: &[Edit] = &[
    Edit {
        describe: "maxMemoryMB 64 -> 128",
        apply: |cr| cr["spec"]["memcached"] = serde_json::json!({"maxMemoryMB": 128}),
        may_change: &[("Deployment", &["spec.template.spec.containers[0].args[1]"])],
    },
    Edit {
        describe: "Service annotations added",
        apply: |cr| cr["spec"]["service"] = serde_json::json!({"annotations": {"a.example.com/x": "y"}}),
        may_change: &[("Service", &["metadata.annotations"])],
    },
    Edit {
        describe: "image tag changed",
        apply: |cr| cr["spec"]["image"] = serde_json::json!("memcached:1.6.39"),
        may_change: &[(
            "Deployment",
            &[
                "metadata.labels.app.kubernetes.io/version",
                "spec.template.metadata.labels.app.kubernetes.io/version",
                "spec.template.spec.containers[0].image",
            ],
        )],
    },
];

#[test]
fn a_changed_cr_changes_only_what_it_demands_and_keeps_server_fields() {
    let fixture = fixtures().into_iter().find(|f| f.name == "minimal").expect("minimal fixture");
    let before: Vec<Value> = exports::render(&fixture.memcached).expect("renders").iter().map(|t| parse(t)).collect();
    for edit in EDITS {
        let mut cr = parse(&fixture.memcached);
        (edit.apply)(&mut cr);
        let cr = cr.to_string();
        for object in &before {
            let kind = kind_of(object);
            let stored = server_shaped(object);
            let rebuilt = desired_of(exports::desired(&cr, &[stored.to_string()], &[]).expect("desired"), kind)
                .expect("still wanted");
            let changed = changed_paths(&without_nulls(&stored), &without_nulls(&parse(&rebuilt)));
            let allowed: &[&str] = edit.may_change.iter().find(|(k, _)| *k == kind).map(|(_, p)| *p).unwrap_or(&[]);
            assert_eq!(changed, allowed, "{}: {kind} changed unexpectedly", edit.describe);
        }
    }
}
