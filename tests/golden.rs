//! Golden fixtures: each `tests/fixtures/<name>/memcached.yaml` renders to
//! exactly `objects.json` (what `memcached-operator render -o json` prints)
//! and `objects.yaml`, and every exported function answers byte-identically
//! natively and through the component in wasmtime.
//!
//! `UPDATE_GOLDEN=1 cargo test -p memcached-tests --test golden` rewrites the
//! golden files; review the diff before committing it.

use memcached_logic::children::ChildKind;
use memcached_logic::exports;
use memcached_operator::render::as_json_list;
use memcached_operator::typed::Guard;
use memcached_tests::server::server_shaped;
use memcached_tests::{Fixture, fixtures, instance, parse, reconciler};
use pretty_assertions::assert_eq;
use serde_json::Value;

fn check_golden(fixture: &Fixture, file: &str, actual: &str) {
    let path = fixture.dir.join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("golden file writable");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing: run with UPDATE_GOLDEN=1", path.display()));
    assert_eq!(expected, actual, "{} differs from what the module renders", path.display());
}

#[test]
fn every_fixture_renders_to_its_golden_files_natively_and_in_the_component() {
    for fixture in fixtures() {
        let native = exports::render(&fixture.memcached)
            .unwrap_or_else(|e| panic!("{}: native render failed: {e}", fixture.name));
        let component = instance()
            .render(&fixture.memcached)
            .unwrap_or_else(|e| panic!("{}: component render failed: {e}", fixture.name));
        assert_eq!(native, component, "{}: native and component JSON differ", fixture.name);

        let objects: Vec<Value> = native.iter().map(|o| parse(o)).collect();
        check_golden(&fixture, "objects.json", &as_json_list(objects.clone()));

        let array = Value::Array(objects).to_string();
        let yaml_native = exports::to_yaml(&array).expect("native YAML");
        let yaml_component = instance().to_yaml(&array).expect("component YAML");
        assert_eq!(yaml_native, yaml_component, "{}: native and component YAML differ", fixture.name);
        check_golden(&fixture, "objects.yaml", &yaml_native);
    }
}

#[test]
fn every_exported_function_answers_identically_natively_and_in_the_component() {
    for fixture in fixtures() {
        let cr = fixture.memcached.as_str();
        let name = fixture.name.as_str();
        let mut wasm = instance();
        let mut reconciler = reconciler();

        let guards = [
            (Guard::ServiceMonitor, exports::service_monitor_enabled(cr)),
            (Guard::NetworkPolicy, exports::network_policy_enabled(cr)),
            (Guard::Pdb, exports::pdb_enabled(cr)),
            (Guard::Hpa, exports::hpa_enabled(cr)),
        ];
        for (guard, native) in guards {
            assert_eq!(wasm.guard(guard, cr).ok(), native.ok(), "{name}: guard {guard:?}");
        }
        let component: Vec<(String, String)> =
            wasm.validate(cr).expect("validate").into_iter().map(|e| (e.path, e.message)).collect();
        let native: Vec<(String, String)> =
            exports::validate(cr).expect("validate").into_iter().map(|e| (e.path, e.message)).collect();
        assert_eq!(component, native, "{name}");
        assert_eq!(wasm.default(cr).expect("default"), exports::default(cr).expect("default"), "{name}");
        assert_eq!(wasm.labels_for_memcached(name).expect("labels"), exports::labels_for_memcached(name), "{name}");
        let references: Vec<String> =
            reconciler.references(cr).expect("references").into_iter().map(|r| r.name).collect();
        let native_references: Vec<String> =
            exports::references(cr).expect("references").into_iter().map(|r| r.name).collect();
        assert_eq!(references, native_references, "{name}");

        let secrets = secrets_for(&native_references);
        for kind in ChildKind::ALL {
            let kind_name = kind.info().kind;
            let typed_native = exports::construct(kind, cr, None, &secrets).expect("construct");
            let typed_wasm = wasm.construct(kind_name, cr, None, &secrets).expect("construct");
            assert_eq!(typed_native, typed_wasm, "{name}: construct {kind_name}");
        }

        // The generic contract: from nothing, then again from the server's
        // answer, the way the operator calls it.
        let native = exports::desired(cr, &[], &secrets).expect("desired");
        let component = reconciler.desired(cr, &[], &secrets).expect("desired");
        assert_eq!(native, component, "{name}: desired");
        let current: Vec<String> = native.iter().map(|created| server_shaped(&parse(created)).to_string()).collect();
        let native = exports::desired(cr, &current, &secrets).expect("desired");
        let component = reconciler.desired(cr, &current, &secrets).expect("desired");
        assert_eq!(native, component, "{name}: desired from the server's objects");
        let deployment = current.iter().find(|o| parse(o)["kind"] == "Deployment").cloned();

        let now = "2026-11-21T10:00:10Z";
        let owned: Vec<String> = deployment.iter().cloned().collect();
        assert_eq!(
            reconciler.status(cr, &owned, &secrets, now, None).expect("status"),
            exports::status(cr, &owned, &secrets, now, None).expect("status"),
            "{name}: status"
        );
        assert_eq!(
            wasm.compute_status(cr, deployment.as_deref(), &[], now).expect("compute-status"),
            exports::compute_status_json(cr, deployment.as_deref(), &[], now).expect("compute-status"),
            "{name}: compute-status with the Secrets missing"
        );
    }
}

/// Secrets with data for every referenced name, so the secret hash is set.
fn secrets_for(names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|name| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"password-file": "dXNlcjpwYXNz", "tls.crt": "Y2VydA==", "tls.key": "a2V5", "ca.crt": "Y2E="}
            })
            .to_string()
        })
        .collect()
}

/// Every sample in deploy/samples is a valid CR that renders.
#[test]
fn every_sample_renders() {
    let samples = memcached_tests::tests_dir().join("../deploy/samples");
    let mut count = 0;
    for entry in std::fs::read_dir(&samples).expect("deploy/samples exists") {
        let path = entry.expect("readable").path();
        let yaml = std::fs::read_to_string(&path).expect("readable sample");
        let cr = memcached_tests::yaml_to_json(&yaml).to_string();
        let objects = instance().render(&cr).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(objects.len() >= 2, "{}: at least a Deployment and a Service", path.display());
        count += 1;
    }
    assert!(count >= 8, "one sample per feature");
}
