//! `wasm-operator plan` against a real kube-apiserver (tests/control-plane):
//! the Greeting module's versions (`make test` builds them) serve parents in
//! a namespace until converged; the operator stops; then the built binary
//! plans another version against the serving one, as a user that may only
//! read (a ServiceAccount bound to get and list), and the audit log shows
//! that it did nothing else.
//!
//! - v2 against v1: every ConfigMap an update of exactly `data.revision`
//!   (text and JSON, exit 2); `v2-some` (v2's change for messages starting
//!   with `s`): exactly those parents; v1 rebuilt: nothing (exit 0).
//! - v2 against `service-account` (v2 plus a ServiceAccount per parent):
//!   the ServiceAccounts are left unmanaged (the operator does not delete a
//!   kind the serving version does not own); the other way, nothing to do:
//!   the live ServiceAccounts are what it wants.
//! - `fail-on-later` and `trap-always` against v1: the parents they fail on
//!   are failures (exit 1); a parent both fail on is not counted.
//! - Without --against: the current version is the one the LogicModule
//!   serves (`status.activeReference`, pulled from a real registry, as the
//!   new version is); the error names a LogicModule that is missing, or has
//!   no serving reference.
//! - A Secret a parent references is read, and its data never printed.

#[path = "logic_module_support.rs"]
mod logic_module_support;
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use control_plane::{ControlPlane, User};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use logic_module_support::{LOGIC_MODULE_CRD, has, wait_logic_module};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::runtime::oci::{Registry, RegistryOptions};

const READER: &str = "plan-reader";
const SECRET_TEXT: &str = "very-secret-signing-key";

fn greetings(ns: &TestNamespace<'_>) -> Api<DynamicObject> {
    ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"))
}

/// `wasm-operator plan ARGS` with `kubeconfig`.
fn plan(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(host_binary())
        .arg("plan")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("WASM_OPERATOR_MODULES")
        .env("RUST_LOG", "warn")
        .output()
        .expect("running wasm-operator plan")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn context(out: &Output) -> String {
    format!("exit {:?}\n--- stdout\n{}\n--- stderr\n{}", out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// `plan` of the module file `new` against `against` in `namespace`, with `more` flags.
fn plan_of(kubeconfig: &Path, new: &str, against: &str, namespace: &str, more: &[&str]) -> Output {
    let (new, against) = (module_path(new), module_path(against));
    let args = [&["--module", new.as_str(), "--against", against.as_str(), "-n", namespace][..], more].concat();
    plan(kubeconfig, &args)
}

fn plan_json(kubeconfig: &Path, new: &str, against: &str, namespace: &str) -> (Option<i32>, Value) {
    let out = plan_of(kubeconfig, new, against, namespace, &["-o", "json"]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", context(&out)));
    (out.status.code(), json)
}

/// Creates the Greetings `(name, spec)`.
async fn create_greetings(ns: &TestNamespace<'_>, specs: &[(String, Value)]) {
    for (name, spec) in specs {
        let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                              "metadata": {"name": name}, "spec": spec});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        greetings(ns).create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
    }
}

/// Until every Greeting has a status of its generation and `configmaps`
/// ConfigMaps exist (and `accounts` ServiceAccounts).
async fn wait_converged(ns: &TestNamespace<'_>, configmaps: usize, accounts: usize) {
    let managed = ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator");
    eventually_within(Duration::from_secs(90), "the Greetings to converge", || async {
        let list = greetings(ns).list(&ListParams::default()).await.ok()?;
        let current = list.items.iter().all(|g| {
            g.data["status"]["observedGeneration"] == json!(g.metadata.generation)
                && g.data["status"]["phase"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("Published") || p.starts_with("Invalid"))
        });
        let cms = ns.api(&gvk("", "v1", "ConfigMap", "configmaps")).list(&managed).await.ok()?.items.len();
        let sas = ns.api(&gvk("", "v1", "ServiceAccount", "serviceaccounts")).list(&managed).await.ok()?.items.len();
        (current && cms == configmaps && sas == accounts).then_some(())
    })
    .await;
}

/// Serves `module` on the namespace's parents until converged, then stops.
async fn serve_until_converged(ns: &TestNamespace<'_>, module: &str, configmaps: usize, accounts: usize) {
    let running = Running::start(ns.plane, module_file(module), options(&ns.namespace)).await;
    wait_converged(ns, configmaps, accounts).await;
    running.stop().await.expect("the operator stops cleanly");
}

/// A ServiceAccount that may only get and list what a plan reads, and a
/// kubeconfig for it; returns the kubeconfig and the user name the audit
/// log records.
async fn reader_kubeconfig(ns: &TestNamespace<'_>) -> (PathBuf, String) {
    let plane = ns.plane;
    plane
        .apply_yaml(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {READER}}}\nrules:\n\
             - {{apiGroups: [example.c5c3.io], resources: [greetings], verbs: [get, list]}}\n\
             - {{apiGroups: [''], resources: [configmaps, serviceaccounts, secrets], verbs: [get, list]}}\n\
             - {{apiGroups: [wasm-operator.c5c3.io], resources: [logicmodules], verbs: [get, list]}}\n\
             ---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {READER}-{ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {READER}}}\n\
             subjects: [{{kind: ServiceAccount, name: {READER}, namespace: {ns}}}]\n",
            ns = ns.namespace
        ))
        .await
        .expect("the reader's role");
    let accounts: Api<ServiceAccount> = Api::namespaced(ns.client.clone(), &ns.namespace);
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": READER}})).expect("an account");
    accounts.create(&PostParams::default(), &account).await.expect("creating the reader");
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let answered: TokenRequest = accounts
        .create_subresource("token", READER, &PostParams::default(), &request)
        .await
        .expect("a token from the TokenRequest API");
    let token = answered.status.map(|s| s.token).expect("a token");
    // The admin's kubeconfig (server, CA) with the reader's token.
    let admin = std::fs::read_to_string(plane.kubeconfig(User::Admin)).expect("the admin kubeconfig");
    let mut config: Value = serde_norway::from_str(&admin).expect("YAML");
    config["users"][0]["user"] = json!({"token": token});
    let path = plane.dir().join(format!("{READER}-{}.kubeconfig", ns.namespace));
    std::fs::write(&path, serde_norway::to_string(&config).expect("YAML")).expect("writing the kubeconfig");
    let user = format!("system:serviceaccount:{}:{READER}", ns.namespace);
    // RBAC reaches the authorizer through an informer.
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&path).expect("the reader's kubeconfig"),
            &Default::default(),
        )
        .await
        .expect("a config"),
    )
    .expect("a client");
    eventually("the reader may list Greetings", || async {
        greetings_with(&client, &ns.namespace).list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    (path, user)
}

fn greetings_with(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &gvk("example.c5c3.io", "v1", "Greeting", "greetings"))
}

/// The reader's requests since `mark`: every one a get or a list.
async fn assert_only_reads(plane: &ControlPlane, user: &str, mark: control_plane::AuditMark) -> usize {
    plane.audit_sync().await.expect("the audit log catches up");
    let events: Vec<_> =
        plane.audit_events_since(mark).expect("the audit log").into_iter().filter(|e| e.user == user).collect();
    assert!(!events.is_empty(), "the plan's requests are in the audit log as {user}");
    let others: Vec<String> = events
        .iter()
        .filter(|e| !matches!(e.verb.as_str(), "get" | "list"))
        .map(|e| format!("{} {}", e.verb, e.request_uri))
        .collect();
    assert!(others.is_empty(), "the plan only reads: {others:?}");
    assert!(plane.writes_by(user, mark).expect("the audit log").is_empty());
    events.len()
}

async fn setup(prefix: &str) -> TestNamespace<'static> {
    let ns = TestNamespace::new(prefix).await;
    let module = module_file("greeting.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    ns
}

/// Nine Greetings, each with one audience (two ConfigMaps each); three with
/// messages starting with `s`; three signed by a Secret that exists.
fn nine_greetings() -> Vec<(String, Value)> {
    (0..9)
        .map(|i| {
            let message = if i % 3 == 0 { format!("say {i}") } else { format!("hi {i}") };
            let mut spec = json!({"message": message, "audiences": ["world"]});
            if i % 3 == 1 {
                spec["signatureSecret"] = json!("signing");
            }
            (format!("g-{i}"), spec)
        })
        .collect()
}

async fn create_signing_secret(ns: &TestNamespace<'_>) {
    ns.create_secret("signing", json!({"key": SECRET_TEXT})).await;
}

fn assert_no_secret(out: &Output) {
    // As the API server stores it: base64.
    let encoded = serde_json::to_value(k8s_openapi::ByteString(SECRET_TEXT.as_bytes().to_vec())).expect("base64");
    let encoded = encoded.as_str().expect("a string").to_owned();
    for printed in [text(&out.stdout), text(&out.stderr)] {
        assert!(
            !printed.contains(SECRET_TEXT) && !printed.contains(&encoded),
            "a Secret's data printed\n{}",
            context(out)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_is_planned_field_by_field_reading_only() {
    let ns = setup("plan-v2").await;
    create_signing_secret(&ns).await;
    create_greetings(&ns, &nine_greetings()).await;
    serve_until_converged(&ns, "greeting.wasm", 18, 0).await;
    let (kubeconfig, reader) = reader_kubeconfig(&ns).await;
    let mark = ns.plane.audit_mark().expect("an audit mark");

    // v2 against v1, as text: each ConfigMap, one changed field.
    let out = plan_of(&kubeconfig, "greeting-v2.wasm", "greeting.wasm", &ns.namespace, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", context(&out));
    assert_no_secret(&out);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let updates: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.starts_with("  ~ update ConfigMap ")).map(|(i, _)| i).collect();
    assert_eq!(updates.len(), 18, "{stdout}");
    for index in updates {
        assert_eq!(lines[index + 1], "      data.revision: (none) -> \"2\"", "{stdout}");
        assert!(!lines.get(index + 2).is_some_and(|l| l.starts_with("      ")), "exactly one field\n{stdout}");
    }
    for i in 0..9 {
        let parent = format!("Greeting {}/g-{i}:", ns.namespace);
        assert!(lines.contains(&parent.as_str()), "{parent}\n{stdout}");
        for configmap in [format!("g-{i}"), format!("g-{i}-world")] {
            let line = format!("  ~ update ConfigMap {}/{configmap}", ns.namespace);
            assert!(lines.contains(&line.as_str()), "{line}\n{stdout}");
        }
    }
    for absent in ["+ create", "- delete", "! unmanaged", "~ status", "FAILS"] {
        assert!(!stdout.contains(absent), "{absent}\n{stdout}");
    }
    assert!(
        stdout.ends_with(
            "9 parents (Greeting): 9 changed: 0 to create, 18 to update, 0 to delete, 0 left unmanaged; 0 status changes; 0 failures\n"
        ),
        "{stdout}"
    );

    // The same as JSON.
    let (code, json) = plan_json(&kubeconfig, "greeting-v2.wasm", "greeting.wasm", &ns.namespace);
    assert_eq!(code, Some(2), "{json:#}");
    assert_eq!(json["kind"], "Plan");
    assert_eq!(
        json["summary"],
        json!({"parents": 9, "changed": 9, "created": 0, "updated": 18, "deleted": 0, "unmanaged": 0,
               "statusChanges": 0, "failures": 0, "bothFail": 0})
    );
    assert_eq!((json["new"]["version"].as_str(), json["current"]["version"].as_str()), (Some("0.2.0"), Some("0.1.0")));
    let parents = json["parents"].as_array().expect("parents");
    assert_eq!(parents.len(), 9);
    for parent in parents {
        assert_eq!(parent["result"], "changed");
        assert_eq!(parent["status"], json!([]));
        let objects = parent["objects"].as_array().expect("objects");
        assert_eq!(objects.len(), 2, "{parent:#}");
        for object in objects {
            assert_eq!(
                (object["action"].as_str(), object["kind"].as_str(), object["live"].as_bool()),
                (Some("update"), Some("ConfigMap"), Some(true))
            );
            assert_eq!(object["fields"], json!([{"path": "data.revision", "new": "2"}]), "{object:#}");
        }
    }

    // A version that changes a third of them: exactly those.
    let (code, json) = plan_json(&kubeconfig, "greeting-v2-some.wasm", "greeting.wasm", &ns.namespace);
    assert_eq!(code, Some(2), "{json:#}");
    let names: Vec<&str> =
        json["parents"].as_array().expect("parents").iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["g-0", "g-3", "g-6"], "{json:#}");
    assert_eq!(json["summary"]["updated"], 6);

    // The same behaviour in other bytes: nothing.
    let out = plan_of(&kubeconfig, "greeting-v1-rebuilt.wasm", "greeting.wasm", &ns.namespace, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", context(&out));
    assert!(text(&out.stdout).ends_with("9 parents (Greeting): NEW changes nothing\n"), "{}", context(&out));
    assert!(!text(&out.stdout).contains("~ update"), "{}", context(&out));
    let (code, json) = plan_json(&kubeconfig, "greeting-v1-rebuilt.wasm", "greeting.wasm", &ns.namespace);
    assert_eq!((code, &json["parents"]), (Some(0), &json!([])));

    // Every namespace (the reader's role is cluster-wide): this namespace's
    // parents among them.
    let out = plan(
        &kubeconfig,
        &["--module", &module_path("greeting-v2.wasm"), "--against", &module_path("greeting.wasm"), "-o", "json"],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", context(&out)));
    let ours =
        json["parents"].as_array().expect("parents").iter().filter(|p| p["namespace"] == ns.namespace.as_str()).count();
    assert_eq!(ours, 9, "{json:#}");

    let requests = assert_only_reads(ns.plane, &reader, mark).await;
    assert!(requests >= 5 * 3, "each plan lists Greetings and ConfigMaps and reads the Secret: {requests}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_the_new_version_does_not_own_is_left_unmanaged() {
    let ns = setup("plan-kinds").await;
    let specs: Vec<(String, Value)> =
        (0..3).map(|i| (format!("g-{i}"), json!({"message": format!("hi {i}")}))).collect();
    create_greetings(&ns, &specs).await;
    serve_until_converged(&ns, "greeting-service-account.wasm", 3, 3).await;
    let (kubeconfig, reader) = reader_kubeconfig(&ns).await;
    let mark = ns.plane.audit_mark().expect("an audit mark");

    // v2 does not own ServiceAccounts: the operator would leave them where
    // they are (hot_swap_kinds.rs), no longer reconciled; the ConfigMaps are
    // the same in both.
    let out = plan_of(&kubeconfig, "greeting-v2.wasm", "greeting-service-account.wasm", &ns.namespace, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", context(&out));
    let stdout = text(&out.stdout);
    for i in 0..3 {
        let line = format!(
            "  ! unmanaged ServiceAccount {}/g-{i} (NEW does not own ServiceAccount: it stays as it is, no longer reconciled)",
            ns.namespace
        );
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
    assert!(!stdout.contains("ConfigMap"), "{stdout}");
    let (code, json) = plan_json(&kubeconfig, "greeting-v2.wasm", "greeting-service-account.wasm", &ns.namespace);
    assert_eq!(code, Some(2));
    assert_eq!(json["summary"]["unmanaged"], 3, "{json:#}");
    assert_eq!((json["summary"]["deleted"].as_u64(), json["summary"]["updated"].as_u64()), (Some(0), Some(0)));

    // The other way: the live ServiceAccounts are what it wants, and v2's
    // ConfigMaps are its own: nothing.
    let (code, json) = plan_json(&kubeconfig, "greeting-service-account.wasm", "greeting-v2.wasm", &ns.namespace);
    assert_eq!((code, &json["parents"]), (Some(0), &json!([])), "{json:#}");

    // Against v1, which would take v2's revision off the ConfigMaps: those
    // are updates; the ServiceAccounts exist already as they should.
    let (code, json) = plan_json(&kubeconfig, "greeting-service-account.wasm", "greeting.wasm", &ns.namespace);
    assert_eq!(code, Some(2), "{json:#}");
    let summary = &json["summary"];
    assert_eq!(
        [&summary["updated"], &summary["created"], &summary["deleted"], &summary["unmanaged"]],
        [&json!(3), &json!(0), &json!(0), &json!(0)],
        "{json:#}"
    );

    assert_only_reads(ns.plane, &reader, mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parents_a_new_version_fails_on_are_failures() {
    let ns = setup("plan-fails").await;
    let mut specs: Vec<(String, Value)> =
        (0..4).map(|i| (format!("g-{i}"), json!({"message": format!("hi {i}")}))).collect();
    specs.push(("later-a".into(), json!({"message": "later a"})));
    specs.push(("later-b".into(), json!({"message": "later b"})));
    specs.push(("invalid".into(), json!({"message": 3})));
    create_greetings(&ns, &specs).await;
    serve_until_converged(&ns, "greeting.wasm", 6, 0).await;
    let (kubeconfig, reader) = reader_kubeconfig(&ns).await;
    let mark = ns.plane.audit_mark().expect("an audit mark");

    let out = plan_of(&kubeconfig, "greeting-fail-on-later.wasm", "greeting.wasm", &ns.namespace, &[]);
    assert_eq!(out.status.code(), Some(1), "failures win over changes\n{}", context(&out));
    let stdout = text(&out.stdout);
    for name in ["later-a", "later-b"] {
        let line =
            format!("Greeting {}/{name}: FAILS with NEW (failed): desired: the logic module panicked: ", ns.namespace);
        assert!(stdout.contains(&line), "{line}\n{stdout}");
    }
    let both = format!("Greeting {}/invalid: fails with both versions\n  NEW: invalid: ", ns.namespace);
    assert!(stdout.contains(&both), "{stdout}");
    assert!(stdout.contains("4 changed: 0 to create, 4 to update"), "{stdout}");
    assert!(stdout.contains("; 2 failures (1 failing with both versions)"), "{stdout}");

    let (code, json) = plan_json(&kubeconfig, "greeting-fail-on-later.wasm", "greeting.wasm", &ns.namespace);
    assert_eq!(code, Some(1));
    assert_eq!((json["summary"]["failures"].as_u64(), json["summary"]["bothFail"].as_u64()), (Some(2), Some(1)));
    let results: Vec<(String, String)> = json["parents"]
        .as_array()
        .expect("parents")
        .iter()
        .map(|p| (p["name"].as_str().unwrap_or("").to_owned(), p["result"].as_str().unwrap_or("").to_owned()))
        .filter(|(_, result)| result != "changed")
        .collect();
    assert_eq!(
        results,
        [("invalid".into(), "bothFail".into()), ("later-a".into(), "fails".into()), ("later-b".into(), "fails".into())]
    );

    // A version that traps on every parent: every valid parent fails.
    let (code, json) = plan_json(&kubeconfig, "greeting-trap-always.wasm", "greeting.wasm", &ns.namespace);
    assert_eq!(code, Some(1));
    assert_eq!(
        (json["summary"]["failures"].as_u64(), json["summary"]["changed"].as_u64()),
        (Some(6), Some(0)),
        "{json:#}"
    );

    assert_only_reads(ns.plane, &reader, mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_against_the_error_names_the_logic_module_and_what_it_lacks() {
    let ns = setup("plan-logic-module").await;
    create_greetings(&ns, &[("g-0".into(), json!({"message": "hi"}))]).await;
    let (kubeconfig, _) = reader_kubeconfig(&ns).await;
    let v2 = module_path("greeting-v2.wasm");

    let out = plan(&kubeconfig, &["--module", &v2, "-n", &ns.namespace, "--logic-module", "plan-test-none"]);
    assert_eq!(out.status.code(), Some(1), "{}", context(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: no --against given, and there is no LogicModule plan-test-none"),
        "{}",
        context(&out)
    );
    assert!(stderr.contains("--against FILE|REFERENCE"), "{}", context(&out));

    // One that exists but serves nothing from a registry yet.
    ns.plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("the LogicModule CRD");
    let name = format!("plan-test-{}", ns.namespace);
    ns.plane
        .apply_yaml(&format!(
            "apiVersion: wasm-operator.c5c3.io/v1alpha1\nkind: LogicModule\nmetadata: {{name: {name}}}\n\
             spec: {{image: '127.0.0.1:5000/modules/greeting@sha256:{}'}}\n",
            "0".repeat(64)
        ))
        .await
        .expect("a LogicModule");
    let out = plan(&kubeconfig, &["--module", &v2, "-n", &ns.namespace, "--logic-module", &name]);
    assert_eq!(out.status.code(), Some(1), "{}", context(&out));
    assert!(
        text(&out.stderr).contains(&format!("LogicModule {name} has no status.activeReference")),
        "{}",
        context(&out)
    );

    // Usage errors name the flag.
    let out = plan(&kubeconfig, &["--module", &v2, "--against", "127.0.0.1:5000/modules/greeting:v1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--against 127.0.0.1:5000/modules/greeting:v1: no such file"),
        "{}",
        context(&out)
    );
    let out = plan(&kubeconfig, &["--module", &v2, "-f", "parents.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("give the current version with --against"), "{}", context(&out));
}

/// `wasm-operator push FILE REPOSITORY:TAG`: the reference pinned by digest.
fn push(registry: &OciRegistry, file: &str, tag: &str) -> String {
    let out = Command::new(host_binary())
        .arg("push")
        .arg(module_path(file))
        .arg(format!("{}/modules/greeting:{tag}", registry.address))
        .args(["--insecure-registry", &registry.address])
        .output()
        .expect("running wasm-operator push");
    assert!(out.status.success(), "push: {}", context(&out));
    text(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_against_the_current_version_is_the_one_the_logic_module_serves() {
    let registry = OciRegistry::start("plan");
    let (v1, v2) = (push(&registry, "greeting.wasm", "v1"), push(&registry, "greeting-v2.wasm", "v2"));
    let ns = setup("plan-serving").await;
    ns.plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("the LogicModule CRD");
    let specs: Vec<(String, Value)> =
        (0..3).map(|i| (format!("g-{i}"), json!({"message": format!("hi {i}")}))).collect();
    create_greetings(&ns, &specs).await;
    // The LogicModule `greeting` (the module's name) names v1; the operator
    // serves it and says so in its status.
    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
        "metadata": {"name": "greeting"}, "spec": {"image": v1},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");
    let mut options = options(&ns.namespace);
    options.logic_modules = Some(LogicModuleOptions {
        registry: Arc::new(Registry::new(RegistryOptions {
            insecure: vec![registry.address.clone()],
            ..RegistryOptions::default()
        })),
        poll_interval: Duration::from_millis(500),
    });
    let running = Running::start(ns.plane, module_file("greeting.wasm"), options).await;
    wait_converged(&ns, 3, 0).await;
    let status = wait_logic_module(&logic_modules, "v1 serving", |s| {
        has(s, "Active", "True", "Serving") && s["activeReference"] == v1.as_str()
    })
    .await;
    assert_eq!(status["activeVersion"], "0.1.0");
    running.stop().await.expect("the operator stops cleanly");

    let (kubeconfig, reader) = reader_kubeconfig(&ns).await;
    let mark = ns.plane.audit_mark().expect("an audit mark");
    // The new version from the registry too.
    let out = plan(
        &kubeconfig,
        &["--module", &v2, "--insecure-registry", &registry.address, "-n", &ns.namespace, "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", context(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", context(&out)));
    assert_eq!(
        (json["new"]["source"].as_str(), json["current"]["source"].as_str()),
        (Some(v2.as_str()), Some(v1.as_str()))
    );
    assert_eq!(json["current"]["version"], "0.1.0");
    assert_eq!(json["summary"]["updated"], 3, "{json:#}");

    // Another LogicModule by name: the same, from a file.
    let out = plan(
        &kubeconfig,
        &[
            "--module",
            &module_path("greeting-v1-rebuilt.wasm"),
            "--logic-module",
            "greeting",
            "--insecure-registry",
            &registry.address,
            "-n",
            &ns.namespace,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", context(&out));
    let requests = assert_only_reads(ns.plane, &reader, mark).await;
    assert!(requests >= 6, "two plans each read the LogicModule, list Greetings and ConfigMaps: {requests}");
    logic_modules.delete("greeting", &Default::default()).await.expect("deleting the LogicModule");
}
