//! `wasm-operator render` and `wasm-operator test` on a real module
//! (`target/greeting.wasm`, built by `make test`), through the binary: the
//! objects with their owner references and the status, an invalid parent
//! named by its field with the status the operator would still write, an
//! answer the operator refuses, and golden cases that pass, fail with a
//! diff, and are rewritten by `--update`. The inputs are in
//! `host/tests/authoring/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn inputs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/authoring")
}

fn greeting() -> PathBuf {
    let path = repo().join("target/greeting.wasm");
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    path
}

fn wasm_operator(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasm-operator")).args(args).output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn render(file: &str, more: &[&str]) -> Output {
    let module = greeting();
    let file = inputs().join(file);
    let mut args = vec!["render", "--module", path(&module), "-f", path(&file), "-o", "json"];
    args.extend_from_slice(more);
    args.extend_from_slice(&["--now", "2026-01-01T00:00:00Z"]);
    wasm_operator(&args)
}

fn items(out: &Output) -> Vec<Value> {
    let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(list["kind"], "List");
    list["items"].as_array().expect("items").clone()
}

fn names(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|o| format!("{} {}", o["kind"].as_str().unwrap_or(""), o["metadata"]["name"].as_str().unwrap_or("")))
        .collect()
}

/// A copy of the Greeting cases in a fresh folder, to change and update.
fn cases_copy(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasm-operator-authoring-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    for entry in std::fs::read_dir(inputs().join("greeting-cases")).expect("the cases") {
        let from = entry.expect("readable").path();
        let name = from.file_name().expect("a file name");
        if name != "wasm-operator-test.yaml" {
            std::fs::copy(&from, dir.join(name)).expect("copied");
        }
    }
    dir
}

#[test]
fn render_prints_the_owned_objects_then_each_parent_with_its_status() {
    let out = render(
        "parents.yaml",
        &["--owned", path(&inputs().join("owned.yaml")), "--related", path(&inputs().join("related.yaml"))],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let items = items(&out);
    assert_eq!(
        names(&items),
        ["ConfigMap hello", "ConfigMap hello-world", "Greeting hello", "ConfigMap stored", "Greeting stored"],
        "per parent: its objects in reconcile order, then the parent"
    );

    // The parent with neither namespace nor uid: `default`, a uid derived
    // from them, and stderr says so.
    let hello = &items[2];
    assert_eq!(hello["metadata"]["namespace"], "default");
    let uid = hello["metadata"]["uid"].as_str().expect("a uid filled in");
    assert!(
        stderr.contains(&format!("document 1 (Greeting default/hello): no metadata.uid; rendered with uid {uid}")),
        "{stderr}"
    );
    assert!(stderr.contains("no metadata.namespace; rendered in default"), "{stderr}");
    for child in &items[0..2] {
        assert_eq!(child["metadata"]["namespace"], "default");
        assert_eq!(
            child["metadata"]["ownerReferences"],
            json!([{"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "name": "hello", "uid": uid,
                    "controller": true, "blockOwnerDeletion": true}])
        );
    }
    // The referenced Secret of --related reached the module.
    assert_eq!(items[0]["data"], json!({"message": "hi", "signature": "signed by sig"}));
    assert_eq!(hello["status"], json!({"observedGeneration": 2, "phase": "Published in ConfigMap hello, hello-world"}));

    // The stored parent: its current ConfigMap of --owned was built on
    // (resourceVersion kept, managedFields not passed, as the caches keep
    // them); the one it no longer wants would be deleted; another parent's
    // is not its business.
    let stored = &items[3];
    assert_eq!(stored["metadata"]["resourceVersion"], "42");
    assert_eq!(stored["metadata"].get("managedFields"), None);
    assert_eq!(stored["data"], json!({"message": "hello"}));
    assert_eq!(items[4]["status"]["phase"], "Published in ConfigMap stored");
    assert!(
        stderr.contains("(Greeting team/stored): the operator would delete ConfigMap team/stored-gone"),
        "{stderr}"
    );
    assert!(!stderr.contains("someone-else"), "{stderr}");

    // YAML by default: the same objects as documents.
    let module = greeting();
    let parents = inputs().join("parents.yaml");
    let yaml =
        wasm_operator(&["render", "--module", path(&module), "-f", path(&parents), "--now", "2026-01-01T00:00:00Z"]);
    assert!(yaml.status.success(), "{}", text(&yaml.stderr));
    let documents: Vec<Value> = serde_norway::Deserializer::from_slice(&yaml.stdout)
        .map(|d| serde::Deserialize::deserialize(d).expect("YAML"))
        .collect();
    assert_eq!(
        names(&documents),
        ["ConfigMap hello", "ConfigMap hello-world", "Greeting hello", "ConfigMap stored", "Greeting stored"]
    );
}

#[test]
fn an_invalid_parent_names_its_field_and_gets_the_status_the_operator_would_write() {
    let out = render("invalid.yaml", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("document 1 (Greeting team/bad): invalid:\n  spec.audiences[1]: must be a lowercase name"),
        "{stderr}"
    );
    assert!(stderr.contains("the operator would change and delete nothing"), "{stderr}");
    assert!(stderr.contains(r#"told "invalid: spec.audiences[1]: must be a lowercase name""#), "{stderr}");
    // No object, and the parent with the status its `problem` gave.
    let items = items(&out);
    assert_eq!(names(&items), ["Greeting bad"]);
    assert_eq!(
        items[0]["status"],
        json!({"observedGeneration": 4, "phase": "Invalid: spec.audiences[1] must be a lowercase name"})
    );
}

#[test]
fn an_answer_the_operator_refuses_is_reported_and_nothing_is_printed() {
    let out = render("refused.yaml", &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "the operator would refuse the module's answer: object 2: ConfigMap twice-world is answered twice"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Stalled=True (ModuleInvalidOutput)"), "{stderr}");
    assert!(items(&out).is_empty());
}

#[test]
fn a_document_of_another_kind_and_a_bad_time_are_refused() {
    let out = render("related.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("(Secret default/sig): not a Greeting (example.c5c3.io/v1), the module's parent kind"),
        "{}",
        text(&out.stderr)
    );
    let module = greeting();
    let parents = inputs().join("parents.yaml");
    let out = wasm_operator(&["render", "--module", path(&module), "-f", path(&parents), "--now", "yesterday"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(r#"--now "yesterday" is not an RFC 3339 time"#), "{}", text(&out.stderr));
}

#[test]
fn the_greeting_cases_pass_with_the_module_their_folder_names() {
    let out = wasm_operator(&["test", path(&inputs().join("greeting-cases"))]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for case in [
        "ok   errors.yaml: a bad audience is invalid",
        "ok   errors.yaml: the same audience twice is refused",
        "ok   errors.yaml: a trap is a failure",
        "ok   published.yaml: hello publishes its message",
        "ok   steady.yaml: an existing ConfigMap keeps what the server filled in",
        "ok   steady.yaml: a Greeting being deleted gets nothing",
    ] {
        assert!(stdout.contains(case), "{stdout}");
    }
    assert!(stdout.ends_with("\n6 passed, 0 failed\n"), "{stdout}");
}

#[test]
fn a_changed_expectation_fails_with_a_diff_and_update_rewrites_it() {
    let dir = cases_copy("update");
    let module = greeting();
    let published = dir.join("published.yaml");
    let original = std::fs::read_to_string(&published).expect("the case");
    let changed =
        original.replace("phase: Published in ConfigMap hello, hello-world", "phase: Published in ConfigMap hello");
    assert_ne!(changed, original);
    std::fs::write(&published, &changed).expect("written");

    // No module in this folder: --module names it.
    let out = wasm_operator(&["test", path(&dir)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("no module: give --module"), "{}", text(&out.stdout));

    let out = wasm_operator(&["--module", path(&module), "test", path(&dir)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL published.yaml: hello publishes its message"), "{stdout}");
    assert!(
        stdout.contains(
            "  status differs:\n  --- expected\n  +++ actual\n  @@ -1,2 +1,2 @@\n   observedGeneration: 2\n  -phase: Published in ConfigMap hello\n  +phase: Published in ConfigMap hello, hello-world\n"
        ),
        "{stdout}"
    );
    assert!(stdout.ends_with("\n5 passed, 1 failed\n"), "{stdout}");

    let out = wasm_operator(&["test", "--module", path(&module), path(&dir), "--update"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("updated published.yaml: hello publishes its message"), "{stdout}");
    assert!(stdout.ends_with("\n5 passed, 0 failed, 1 updated\n"), "{stdout}");
    let updated = std::fs::read_to_string(&published).expect("the case");
    assert!(updated.contains("phase: Published in ConfigMap hello, hello-world"), "{updated}");
    let untouched = std::fs::read_to_string(dir.join("errors.yaml")).expect("the case");
    assert_eq!(
        untouched,
        std::fs::read_to_string(inputs().join("greeting-cases/errors.yaml")).expect("the case"),
        "passing files are not rewritten"
    );

    let out = wasm_operator(&["--module", path(&module), "test", path(&dir)]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wrong_expected_error_and_an_empty_expectation_fail() {
    let dir = cases_copy("errors");
    let module = greeting();
    let errors = dir.join("errors.yaml");
    let original = std::fs::read_to_string(&errors).expect("the case");
    std::fs::write(&errors, original.replace(r#"fields: ["spec.audiences[0]"]"#, "fields: [spec.message]"))
        .expect("written");
    std::fs::write(
        dir.join("empty.yaml"),
        "parent: {apiVersion: example.c5c3.io/v1, kind: Greeting, metadata: {name: x}}\n",
    )
    .expect("written");
    let out = wasm_operator(&["--module", path(&module), "test", path(&dir)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL errors.yaml: a bad audience is invalid\n  expected the error to name spec.message, it names spec.audiences[0]"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL empty.yaml\n  the case expects nothing"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn built(file: &str) -> PathBuf {
    let path = repo().join("target").join(file);
    assert!(path.is_file(), "{} is missing: `make test` builds it", path.display());
    path
}

/// `plan --module NEW --against CURRENT -f parents.yaml --owned --related`.
fn plan_files(new: &str, current: &str, more: &[&str]) -> Output {
    let (new, current) = (built(new), built(current));
    let files = [inputs().join("parents.yaml"), inputs().join("owned.yaml"), inputs().join("related.yaml")];
    let mut args = vec!["plan", "--module", path(&new), "--against", path(&current), "-f", path(&files[0])];
    args.extend_from_slice(&[
        "--owned",
        path(&files[1]),
        "--related",
        path(&files[2]),
        "--now",
        "2026-01-01T00:00:00Z",
    ]);
    args.extend_from_slice(more);
    wasm_operator(&args)
}

#[test]
fn plan_compares_two_versions_on_the_parents_of_a_file() {
    let out = plan_files("greeting-v2.wasm", "greeting.wasm", &[]);
    assert_eq!(out.status.code(), Some(2), "changes: exit 2\n{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for expected in [
        "Greeting default/hello:\n  \
         ~ update ConfigMap default/hello (does not exist: both create it)\n      data.revision: (none) -> \"2\"\n  \
         ~ update ConfigMap default/hello-world (does not exist: both create it)\n      data.revision: (none) -> \"2\"\n",
        // The live ConfigMap both update, and the one both delete: the same.
        "Greeting team/stored:\n  ~ update ConfigMap team/stored\n      data.revision: (none) -> \"2\"\n\n",
        "2 parents (Greeting): 2 changed: 0 to create, 3 to update, 0 to delete, 0 left unmanaged; 0 status changes; 0 failures\n",
    ] {
        assert!(stdout.contains(expected), "{expected}\n---\n{stdout}");
    }
    assert!(!stdout.contains("stored-gone") && !stdout.contains("someone-else"), "{stdout}");

    let out = plan_files("greeting-v2.wasm", "greeting.wasm", &["-o", "json"]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(json["summary"]["updated"], 3);
    let objects: Vec<&Value> = json["parents"]
        .as_array()
        .expect("parents")
        .iter()
        .flat_map(|p| p["objects"].as_array().expect("objects"))
        .collect();
    assert!(objects.iter().all(|o| o["fields"] == json!([{"path": "data.revision", "new": "2"}])), "{json:#}");

    // The same behaviour: nothing; a version that traps: failures, exit 1.
    let out = plan_files("greeting-v1-rebuilt.wasm", "greeting.wasm", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).ends_with("2 parents (Greeting): NEW changes nothing\n"), "{}", text(&out.stdout));
    let out = plan_files("greeting-trap-always.wasm", "greeting.wasm", &["-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!((json["summary"]["failures"].as_u64(), json["summary"]["changed"].as_u64()), (Some(2), Some(0)));
    assert!(json["parents"][0]["newError"]["message"].as_str().is_some_and(|m| m.contains("panicked")), "{json:#}");

    // -f needs --against: no cluster to take the current version from.
    let out = wasm_operator(&["plan", "--module", path(&built("greeting-v2.wasm")), "-f", "parents.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("-f reads the parents from a file, with no cluster"), "{}", text(&out.stderr));
}

/// A case states the timer an answer asks for (`expect.againAfter`: a
/// duration, or `none`), as the Countdown example's cases do; a wrong one
/// fails naming both, and `--update` writes the actual timer.
#[test]
fn a_case_states_the_timer_its_answer_asks_for() {
    let countdown = built("countdown.wasm");
    let cases = repo().join("examples/countdown/cases");
    let out = wasm_operator(&["--module", path(&countdown), "test", path(&cases)]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.ends_with("\n3 passed, 0 failed\n"), "{stdout}");

    let dir = std::env::temp_dir().join(format!("wasm-operator-timer-cases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let done = std::fs::read_to_string(cases.join("done.yaml")).expect("the case");
    let counting = std::fs::read_to_string(cases.join("counting.yaml")).expect("the case");
    std::fs::write(dir.join("done.yaml"), done.replace("againAfter: none", "againAfter: 5s")).expect("written");
    std::fs::write(dir.join("counting.yaml"), counting.replace("againAfter: 2s", "againAfter: none")).expect("written");
    let out = wasm_operator(&["--module", path(&countdown), "test", path(&dir)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("  expected the answer to ask for a timer of 5s, it asks for none\n"), "{stdout}");
    assert!(stdout.contains("  expected the answer to ask for a timer of none, it asks for 2s\n"), "{stdout}");

    let out = wasm_operator(&["--module", path(&countdown), "test", path(&dir), "--update"]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let updated = std::fs::read_to_string(dir.join("counting.yaml")).expect("the case");
    assert!(updated.contains("againAfter: 2s"), "{updated}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_countdown_in_typescript_and_python_ships_the_same_crd_and_passes_the_same_cases() {
    let cases = repo().join("examples/countdown/cases");
    let crd = |module: &Path| -> Value {
        let out = wasm_operator(&["--module", path(module), "crd"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_norway::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: the CRD is YAML or JSON"))
    };
    let rust = crd(&built("countdown.wasm"));
    assert_eq!(rust["metadata"]["name"], "countdowns.example.c5c3.io");
    for file in ["countdown.wasm", "countdown-ts.wasm", "countdown-py.wasm"] {
        let module = built(file);
        assert_eq!(crd(&module), rust, "{file} ships the Rust module's CRD");
        let out = wasm_operator(&["--module", path(&module), "test", path(&cases)]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{file}: {stdout}{}", text(&out.stderr));
        assert!(stdout.ends_with("\n3 passed, 0 failed\n"), "{file}: {stdout}");
    }
}

/// A case states whether a module that finalizes is done with a parent
/// being deleted (`expect.finalized`), as the operator would ask it: the
/// Greeting's finalizes build keeps the message's ConfigMap until the
/// Greeting is released. A parent without the module's finalizer is not
/// finalized, and a wrong expectation fails naming both answers.
#[test]
fn a_case_states_whether_the_module_is_done_finalizing() {
    let module = built("greeting-finalizes.wasm");
    let dir = std::env::temp_dir().join(format!("wasm-operator-finalize-cases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a folder");
    let case = |name: &str, annotations: &str, finalizers: &str, expect: &str| {
        format!(
            "name: {name}\nparent:\n  apiVersion: example.c5c3.io/v1\n  kind: Greeting\n  metadata: {{name: hello, namespace: team, uid: u-1, generation: 1, deletionTimestamp: \"2026-01-01T00:00:00Z\", finalizers: [{finalizers}], annotations: {{{annotations}}}}}\n  spec: {{message: hi, audiences: [world]}}\nexpect:\n{expect}"
        )
    };
    let keeping = case(
        "kept until released",
        "",
        "wasm-operator.c5c3.io/greeting",
        "  finalized: false\n  status: {observedGeneration: 1, phase: Published in ConfigMap hello}\n",
    );
    std::fs::write(dir.join("keeping.yaml"), &keeping).expect("written");
    let released = case(
        "released",
        "example.c5c3.io/release: \"true\"",
        "wasm-operator.c5c3.io/greeting",
        "  finalized: true\n  desired: []\n",
    );
    std::fs::write(dir.join("released.yaml"), released).expect("written");
    let out = wasm_operator(&["--module", path(&module), "test", path(&dir)]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.ends_with("\n2 passed, 0 failed\n"), "{stdout}");

    std::fs::write(dir.join("keeping.yaml"), keeping.replace("finalized: false", "finalized: true")).expect("written");
    std::fs::write(dir.join("other.yaml"), case("no finalizer", "", "", "  finalized: false\n")).expect("written");
    let out = wasm_operator(&["--module", path(&module), "test", path(&dir)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("  expected the module to answer finalized: true, it answered false\n"), "{stdout}");
    assert!(
        stdout.contains("FAIL other.yaml: no finalizer\n  expected finalized: false, but the module was not asked"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
