//! Bad input through the component: every failure is a typed answer naming
//! the field, never a trap, and never a "must not exist" that would make a
//! host delete something.

use memcached_operator::typed::Guard;
use memcached_tests::{desired_of, instance, reconciler};
use serde_json::{Value, json};
use wasm_operator::runtime::call_error::{CallError, FieldError, LogicError as Error};

fn valid_cr() -> Value {
    json!({
        "apiVersion": "memcached.c5c3.io/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "my-cache", "namespace": "default"},
        "spec": {"replicas": 3, "security": {"networkPolicy": {"enabled": true}}}
    })
}

fn with(path: &[&str], value: Value) -> String {
    let mut cr = valid_cr();
    let mut slot = &mut cr;
    for key in path {
        slot = &mut slot[*key];
    }
    *slot = value;
    cr.to_string()
}

/// The component's answer to `render`: must be the module's own error.
fn render_error(input: &str) -> Error {
    match instance().render(input) {
        Err(CallError::Logic(error)) => error,
        Err(failure) => panic!("the component failed on {:.80}: {failure}", input),
        Ok(objects) => panic!("accepted {:.80}: {objects:?}", input),
    }
}

fn first(error: &Error) -> &FieldError {
    error.field_errors().first().unwrap_or_else(|| panic!("no field errors in {error:?}"))
}

#[test]
fn malformed_json_is_reported_with_its_position() {
    for input in ["", "{", "{not json", "[1,2", "{\"spec\": }", "null", "42", "\"text\""] {
        let error = render_error(input);
        assert!(matches!(error, Error::Malformed(_)), "{input:?}: {error:?}");
    }
    let error = render_error("{\"metadata\": {\"name\": \"x\"},\n \"spec\": {,}}");
    assert!(first(&error).message.contains("line 2"), "{error:?}");
}

#[test]
fn wrong_types_name_the_field() {
    let cases = [
        (with(&["spec", "replicas"], json!("three")), "spec.replicas"),
        (with(&["spec", "memcached"], json!({"maxMemoryMB": true})), "spec.memcached.maxMemoryMB"),
        (with(&["spec", "memcached"], json!({"extraArgs": [1, 2]})), "spec.memcached.extraArgs[0]"),
        (with(&["spec", "security"], json!({"tls": {"enabled": "yes"}})), "spec.security.tls.enabled"),
        (with(&["spec", "service"], json!({"annotations": ["a"]})), "spec.service.annotations"),
        (with(&["metadata"], json!({"name": 7})), "metadata.name"),
        (with(&["spec"], json!("all of it")), "spec"),
    ];
    for (input, path) in cases {
        let error = render_error(&input);
        assert!(matches!(error, Error::Malformed(_)), "{path}: {error:?}");
        assert_eq!(first(&error).path, path, "{error:?}");
    }
}

#[test]
fn unknown_enum_values_name_the_field_and_the_choices() {
    let input = with(&["spec", "highAvailability"], json!({"antiAffinityPreset": "medium"}));
    let error = render_error(&input);
    assert_eq!(first(&error).path, "spec.highAvailability.antiAffinityPreset");
    assert!(first(&error).message.contains("soft") && first(&error).message.contains("hard"), "{error:?}");

    let input = with(&["spec", "highAvailability"], json!({"antiAffinity": {"type": "sometimes"}}));
    assert_eq!(first(&render_error(&input)).path, "spec.highAvailability.antiAffinity.type");
}

#[test]
fn another_kind_is_refused() {
    let input = with(&["kind"], json!("Deployment"));
    assert_eq!(first(&render_error(&input)).path, "kind");
    let input = with(&["apiVersion"], json!("memcached.c5c3.io/v2"));
    assert_eq!(first(&render_error(&input)).path, "apiVersion");
}

#[test]
fn oversized_strings_and_inputs_are_refused() {
    let long_image = format!("memcached:{}", "1".repeat(5000));
    let error = render_error(&with(&["spec", "image"], json!(long_image)));
    assert!(matches!(error, Error::Invalid(_)));
    assert_eq!(first(&error).path, "spec.image");

    let long_name = "a".repeat(300);
    assert_eq!(first(&render_error(&with(&["metadata", "name"], json!(long_name)))).path, "metadata.name");

    // Larger than anything etcd would store: refused before parsing.
    let huge = with(&["spec", "service"], json!({"annotations": {"a": "x".repeat(4 << 20)}}));
    let error = render_error(&huge);
    assert!(matches!(error, Error::Malformed(_)));
    assert!(first(&error).message.contains("limit"), "{error:?}");
}

#[test]
fn unknown_spec_fields_are_named_off_cluster_and_skipped_on_it() {
    let input = with(&["spec", "replica"], json!(3));
    let error = render_error(&input);
    assert_eq!(error, Error::Invalid(vec![FieldError::new("spec.replica", "unknown field")]));
    let nested = with(&["spec", "memcached"], json!({"maxMemoryMb": 128}));
    assert_eq!(first(&render_error(&nested)).path, "spec.memcached.maxMemoryMb");
    assert_eq!(
        instance().validate(&nested).expect("validates"),
        vec![FieldError::new("spec.memcached.maxMemoryMb", "unknown field")]
    );
    // The operator's path tolerates them, as the API server prunes them anyway.
    assert!(desired_of(reconciler().desired(&input, &[], &[]).expect("desired"), "Deployment").is_some());
}

#[test]
fn deeply_nested_json_is_refused_without_overflowing_the_stack() {
    for depth in [200, 10_000, 1_000_000] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        // In a field the API does not know: skipped without recursion.
        let input = with(&["spec", "unknown"], json!(null)).replace("null", &nested);
        assert_eq!(first(&render_error(&input)).path, "spec.unknown", "depth {depth}");
        // Where JSON is kept as JSON, the recursion limit answers.
        for answer in [
            instance().to_yaml(&nested),
            instance().construct(
                "ServiceMonitor",
                &valid_cr().to_string(),
                Some(&format!("{{\"spec\":{nested}}}")),
                &[],
            ),
        ] {
            match answer {
                Err(CallError::Logic(Error::Malformed(errors))) => {
                    assert!(errors[0].message.contains("recursion limit"), "depth {depth}: {errors:?}")
                }
                other => panic!("depth {depth}: expected a recursion-limit error, got {other:?}"),
            }
        }
        // An owned object must be a JSON object: refused before any recursion.
        let status = reconciler().status(
            &valid_cr().to_string(),
            std::slice::from_ref(&nested),
            &[],
            "2026-11-21T10:00:00Z",
            None,
        );
        assert!(matches!(status, Err(CallError::Logic(Error::Malformed(_)))), "depth {depth}: {status:?}");
    }
}

#[test]
fn an_invalid_cr_never_answers_must_not_exist() {
    // The NetworkPolicy is enabled; the spec is invalid. An answer without
    // it would tell a host to delete it: the answer must be an error instead.
    let input = with(&["spec", "replicas"], json!(500));
    let owned = reconciler().desired(&valid_cr().to_string(), &[], &[]).expect("the valid CR's objects");
    match reconciler().desired(&input, &owned, &[]) {
        Err(CallError::Logic(Error::Invalid(errors))) => assert_eq!(errors[0].path, "spec.replicas"),
        other => panic!("expected an invalid-spec error, got {other:?}"),
    }
    let malformed = with(&["spec", "replicas"], json!({}));
    assert!(matches!(reconciler().desired(&malformed, &owned, &[]), Err(CallError::Logic(Error::Malformed(_)))));
}

#[test]
fn every_function_answers_bad_input_without_trapping() {
    let cr = valid_cr().to_string();
    let mut wasm = instance();
    let mut reconciler = reconciler();
    let bad = "{\"kind\": [}";
    for guard in [Guard::ServiceMonitor, Guard::NetworkPolicy, Guard::Pdb, Guard::Hpa] {
        assert!(matches!(wasm.guard(guard, bad), Err(CallError::Logic(_))));
    }
    for kind in
        ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"]
    {
        assert!(
            matches!(wasm.construct(kind, &cr, Some(bad), &[]), Err(CallError::Logic(Error::Malformed(_)))),
            "{kind}"
        );
        assert!(
            matches!(wasm.construct(kind, &cr, Some("[1]"), &[]), Err(CallError::Logic(Error::Malformed(_)))),
            "{kind}"
        );
    }
    assert!(matches!(
        wasm.construct("Deployment", &cr, None, &[bad.into()]),
        Err(CallError::Logic(Error::Malformed(_)))
    ));
    assert!(matches!(reconciler.desired(&cr, &[bad.into()], &[]), Err(CallError::Logic(Error::Malformed(_)))));
    assert!(matches!(
        reconciler.status(&cr, &[bad.into()], &[], "2026-11-21T10:00:00Z", None),
        Err(CallError::Logic(_))
    ));
    match reconciler.status(&cr, &[], &[], "yesterday", None) {
        Err(CallError::Logic(error)) => assert_eq!(first(&error).path, "now"),
        other => panic!("a bad time must be refused: {other:?}"),
    }
    assert!(matches!(wasm.validate(bad), Err(CallError::Logic(_))));
    assert!(matches!(wasm.default(bad), Err(CallError::Logic(_))));
    assert!(matches!(reconciler.references(bad), Err(CallError::Logic(_))));
    assert!(matches!(wasm.to_yaml(bad), Err(CallError::Logic(_))));
    // One instance survived all of that: nothing trapped.
    assert!(wasm.render(&cr).is_ok());
}

/// Deterministic mutations of a valid CR (bounded, so the test is quick):
/// whatever the bytes, the component answers instead of trapping.
#[test]
fn mutated_crs_never_trap() {
    let base = include_str!("fixtures/everything/memcached.yaml");
    let base = memcached_tests::yaml_to_json(base).to_string().into_bytes();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b"{}[]\":,0123456789-.eE truefalsnl\\u";
    let mut wasm = instance();
    for round in 0..400 {
        let mut bytes = base.clone();
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % bytes.len();
            match next() % 3 {
                0 => bytes[at] = alphabet[(next() as usize) % alphabet.len()],
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, alphabet[(next() as usize) % alphabet.len()]),
            }
        }
        let Ok(input) = String::from_utf8(bytes) else { continue };
        if let Err(failure) = wasm.render(&input)
            && failure.is_module_failure()
        {
            panic!("round {round}: failed on {input}: {failure}");
        }
        if round % 50 == 0 {
            wasm = instance();
        }
    }
}
