//! Recorded reconciles against a real kube-apiserver: operators (built
//! binaries) serve parents; `wasm-operator record` exports what they
//! recorded from the metrics address's /records; `wasm-operator test`
//! replays it.
//!
//! - Greeting: the export, fetched with a token allowed /records (deploy/'s
//!   records-reader), replays green on the serving version and fails on v2
//!   naming the differing field; a token with no binding, or bound to
//!   metrics-reader only, gets 403 and no records.
//! - Memcached, with SASL and TLS Secrets: their values (and base64) never
//!   appear in the export, `recorded:` names the redacted Secrets, and the
//!   cases replay green.
//! - A resync of an unchanged parent renews its latest record, adds none.
//! - A small --record-budget: the bytes held never exceed it (the gauge),
//!   and the oldest records go.

#[path = "metrics_support.rs"]
mod metrics_support;
#[path = "operator_support.rs"]
mod operator_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kube::api::{DynamicObject, ListParams, PostParams};
use metrics_support::*;
use operator_support::*;
use serde_json::{Value, json};

const RECORDS_READER: &str = "deploy/rbac/records_reader_role.yaml";

fn wasm_operator(args: &[&str]) -> Output {
    let binary = control_plane::repo_root().join("target/release/wasm-operator");
    assert!(binary.is_file(), "{} is missing: run `make build`", binary.display());
    Command::new(binary).args(args).output().expect("running wasm-operator")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn module_path(file: &str) -> String {
    let path = control_plane::repo_root().join("target").join(file);
    assert!(path.is_file(), "{} is missing: run `make {}`", path.display(), Path::new("target").join(file).display());
    path.display().to_string()
}

/// `wasm-operator record` of `module` from the operator at `address`, with
/// `token` (none: --metrics-secure=false) into `file`.
fn record(address: &str, module: &str, token: Option<&Path>, file: &Path, more: &[&str]) -> Output {
    let mut args = vec!["record", "--module", module, "-o", file.to_str().expect("a path")];
    let url;
    match token {
        Some(token) => {
            url = format!("https://{address}");
            args.extend(["--address", &url, "--insecure-skip-tls-verify", "--token-file"]);
            args.push(token.to_str().expect("a path"));
        }
        None => {
            url = format!("http://{address}");
            args.extend(["--address", &url]);
        }
    }
    args.extend(more);
    wasm_operator(&args)
}

fn replay(module: &str, file: &Path) -> Output {
    wasm_operator(&["test", "--module", &module_path(module), file.to_str().expect("a path")])
}

fn documents(file: &Path) -> Vec<Value> {
    memcached_tests::yaml_file(file)
}

fn temp_file(ns: &TestNamespace<'_>, name: &str) -> PathBuf {
    let dir = control_plane::repo_root().join("target/tmp").join(&ns.namespace);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir.join(name)
}

fn write_token(ns: &TestNamespace<'_>, name: &str, token: &str) -> PathBuf {
    let file = temp_file(ns, &format!("{name}.token"));
    std::fs::write(&file, token).expect("writing a token");
    file
}

async fn greeting_namespace(prefix: &str) -> TestNamespace<'static> {
    let ns = TestNamespace::new(prefix).await;
    let module = module_file("greeting.wasm");
    ns.plane.apply_yaml(&module.manifest().crd).await.expect("installing the Greeting CRD");
    ns
}

async fn create_greetings(ns: &TestNamespace<'_>, names: impl IntoIterator<Item = String>) {
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    for name in names {
        let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                              "metadata": {"name": name}, "spec": {"message": format!("hi {name}"), "audiences": ["world"]}});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        greetings.create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
    }
}

/// Until every Greeting has a Published status of its generation.
async fn wait_published(ns: &TestNamespace<'_>, count: usize) {
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    eventually_within(Duration::from_secs(90), "the Greetings to be published", || async {
        let list = greetings.list(&ListParams::default()).await.ok()?;
        let done = list.items.iter().filter(|g| {
            g.data["status"]["observedGeneration"] == json!(g.metadata.generation)
                && g.data["status"]["phase"].as_str().is_some_and(|p| p.starts_with("Published"))
        });
        (done.count() == count).then_some(())
    })
    .await;
}

fn assert_status(out: &Output, code: i32, what: &str) {
    assert_eq!(out.status.code(), Some(code), "{what}\nstdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_greetings_replay_on_the_serving_version_only_for_those_allowed() {
    let ns = greeting_namespace("record-greeting").await;
    let global = ["--module", &module_path("greeting.wasm")];
    let operator = Operator::start_binary(&ns, "wasm-operator", &global, &["--resync-period", "1s"]);
    let (address, scheme, _) = operator.serving().await;
    assert_eq!(scheme, "https");
    create_greetings(&ns, (0..3).map(|i| format!("g-{i}"))).await;
    wait_published(&ns, 3).await;
    let file = temp_file(&ns, "recorded.yaml");

    // No binding, or metrics-reader only: 403, no file.
    let outsider = service_account_token(&ns.client, &ns.namespace, "outsider").await;
    let outsider = write_token(&ns, "outsider", &outsider);
    let out = record(&address, "greeting", Some(&outsider), &file, &[]);
    assert_status(&out, 1, "a token without a binding");
    assert!(text(&out.stderr).contains("403"), "{}", text(&out.stderr));
    bind_metrics_reader(ns.plane, &format!("test-{}-scraper", ns.namespace), &ns.namespace, "scraper").await;
    eventually("the metrics-reader binding", || async {
        may_read_metrics(&ns.client, &ns.namespace, "scraper").await.then_some(())
    })
    .await;
    let scraper = service_account_token(&ns.client, &ns.namespace, "scraper").await;
    assert_eq!(https_get(&address, "/metrics", Some(&scraper)).await.expect("HTTPS").status, 200);
    let out = record(&address, "greeting", Some(&write_token(&ns, "scraper", &scraper)), &file, &[]);
    assert_status(&out, 1, "a token allowed /metrics only");
    assert!(text(&out.stderr).contains("403"), "{}", text(&out.stderr));
    assert!(!file.exists(), "nothing written");

    // Bound to records-reader: the cases.
    bind_cluster_role(ns.plane, RECORDS_READER, &format!("test-{}-recorder", ns.namespace), &ns.namespace, "recorder")
        .await;
    eventually("the records-reader binding", || async {
        may_get(&ns.client, &ns.namespace, "recorder", "/records").await.then_some(())
    })
    .await;
    let recorder = service_account_token(&ns.client, &ns.namespace, "recorder").await;
    let recorder = write_token(&ns, "recorder", &recorder);
    let out = record(&address, "greeting", Some(&recorder), &file, &[]);
    assert_status(&out, 0, "a token allowed /records");
    let cases = documents(&file);
    for name in ["g-0", "g-1", "g-2"] {
        assert!(
            cases.iter().any(|c| c["parent"]["metadata"]["name"] == name && c["expect"]["desired"].is_array()),
            "a case of {name}: {cases:#?}"
        );
    }
    assert!(cases.iter().all(|c| c["statusOwned"].is_array() && c["recorded"]["digest"].is_string()), "{cases:#?}");
    let out = replay("greeting.wasm", &file);
    assert_status(&out, 0, "the serving version replays its records");
    assert!(text(&out.stdout).contains(&format!("{} passed, 0 failed", cases.len())), "{}", text(&out.stdout));
    // v2 answers `revision: "2"` in every ConfigMap: every case fails, naming it.
    let out = replay("greeting-v2.wasm", &file);
    assert_status(&out, 1, "v2 fails the records");
    let report = text(&out.stdout);
    assert!(
        report.contains("FAIL") && report.contains("desired objects differ") && report.contains("revision"),
        "{report}"
    );

    // One parent; its resyncs (every second, nothing changed) renew its
    // latest record and add none.
    let one = temp_file(&ns, "g-1.yaml");
    let parent = format!("{}/g-1", ns.namespace);
    let records_of_g1 = || {
        let out = record(&address, "greeting", Some(&recorder), &one, &["--parent", &parent]);
        assert_status(&out, 0, "one parent's records");
        let cases = documents(&one);
        assert!(!cases.is_empty() && cases.iter().all(|c| c["parent"]["metadata"]["name"] == "g-1"), "{cases:#?}");
        cases
    };
    let reconciles = || async {
        let body = https_get(&address, "/metrics", Some(&scraper)).await.expect("HTTPS").body;
        metric_value(&body, "wasm_operator_reconciles_total{", "result=\"success\"")
    };
    // The first reconcile (no children yet) and the next (its children) differ.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (before, reconciled) = (records_of_g1(), reconciles().await);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(reconciles().await >= reconciled + 6, "resyncs happened");
    let after = records_of_g1();
    assert_eq!(after.len(), before.len(), "resyncs of an unchanged parent added records");
    assert_ne!(after.last().map(|c| &c["recorded"]["at"]), before.last().map(|c| &c["recorded"]["at"]), "renewed");
    // A module it does not run: 404, naming the one it does.
    let out = record(&address, "nope", Some(&recorder), &temp_file(&ns, "nope.yaml"), &[]);
    assert_status(&out, 1, "an unknown module");
    assert!(text(&out.stderr).contains("404") && text(&out.stderr).contains("greeting"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secrets_value_never_leaves_the_memcached_operator_and_its_records_replay() {
    const SASL: &str = "admin:s3cr3t-sasl-password";
    const KEY: &str = "tls-key-s3cr3t-material";
    let ns = TestNamespace::new("record-memcached").await;
    ns.create_secret("memcached-sasl", json!({"memcached-sasl-db": SASL})).await;
    ns.create_secret("memcached-tls", json!({"tls.crt": "tls-crt-material", "tls.key": KEY, "ca.crt": "ca-material"}))
        .await;
    let operator = Operator::start(&ns, &["--metrics-secure=false"]);
    let (address, _, _) = operator.serving().await;
    ns.create_memcached("cache", everything_spec()).await;
    ns.wait_for("Deployment", "cache").await;
    let file = temp_file(&ns, "memcached.yaml");
    let cases = eventually("a recorded reconcile of cache", || async {
        let out = record(&address, "memcached", None, &file, &[]);
        (out.status.success()).then(|| documents(&file))
    })
    .await;

    let exported = std::fs::read_to_string(&file).expect("the case file");
    let base64 = |value: &str| {
        let encoded = serde_json::to_value(k8s_openapi::ByteString(value.as_bytes().to_vec())).expect("base64");
        encoded.as_str().expect("a string").to_owned()
    };
    for secret in [SASL, KEY] {
        assert!(!exported.contains(secret) && !exported.contains(&base64(secret)), "{secret} in\n{exported}");
    }
    let redacted = json!([format!("{}/memcached-sasl", ns.namespace), format!("{}/memcached-tls", ns.namespace)]);
    for case in &cases {
        let mut named = case["recorded"]["redacted"].as_array().cloned().unwrap_or_default();
        named.sort_by_key(ToString::to_string);
        assert_eq!(Value::Array(named), redacted, "{:#}", case["recorded"]);
    }
    // The module hashes the Secrets' data into the pod template: the live
    // answer (real values) differs from the replay's (placeholders) there.
    assert!(cases.iter().any(|c| c["recorded"]["liveAnswerDiffers"].to_string().contains("secret-hash")), "{cases:#?}");
    let out = replay("memcached.wasm", &file);
    assert_status(&out, 0, "the serving version replays the redacted records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_budget_holds_the_newest_records() {
    const BUDGET: u64 = 32 << 10;
    let ns = greeting_namespace("record-budget").await;
    let operator = Operator::start_binary(
        &ns,
        "wasm-operator",
        &["--module", &module_path("greeting.wasm")],
        &["--metrics-secure=false", "--record-budget", "32Ki"],
    );
    let (address, _, _) = operator.serving().await;
    let gauges = || async {
        let body = http_get(&address, "/metrics", None).await.expect("the metrics").body;
        let labels = "module=\"greeting\"";
        let held = metric_value(&body, "wasm_operator_recorded_reconciles{", labels);
        let bytes = metric_value(&body, "wasm_operator_recorded_reconcile_bytes{", labels);
        assert!(bytes <= BUDGET, "{bytes} bytes held over a budget of {BUDGET}");
        (held, bytes)
    };
    let batch = |first: usize| (first..first + 12).map(|i| format!("g-{i:02}"));
    create_greetings(&ns, batch(0)).await;
    wait_published(&ns, 12).await;
    create_greetings(&ns, batch(12)).await;
    for _ in 0..10 {
        gauges().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_published(&ns, 24).await;
    let (held, _) = gauges().await;
    assert!(held > 0 && held < 12, "{held} records held");

    // The newest: none of the first batch is left.
    let file = temp_file(&ns, "budget.yaml");
    assert_status(&record(&address, "greeting", None, &file, &[]), 0, "the records");
    let names: Vec<String> = documents(&file)
        .iter()
        .map(|c| c["parent"]["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(names.iter().all(|name| batch(12).any(|newer| &newer == name)), "{names:?}");
}
