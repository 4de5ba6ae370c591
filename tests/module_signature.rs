//! A LogicModule that names a public key (`spec.verification.publicKey`)
//! loads only images cosign signed with it. The real cosign CLI
//! (scripts/cosign.sh builds it from tests/cosign/go.mod) makes the key
//! pairs and signs modules pushed to a real registry on loopback; the
//! operator runs in this process against the real API server. Refused, with
//! v1 serving and nothing written: an image signed with another key, a key
//! that is not one, an unsigned image. That image, once signed with the
//! key, goes live by itself. A restart comes up on it again, its signature
//! checked again, but not once the resource trusts another key only.

// Shared with tests that use all of it (blob_file, storage).
#[path = "logic_module_support.rs"]
mod logic_module_support;
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use logic_module_support::{LOGIC_MODULE_CRD, has, wait_logic_module};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::swapping::logic_modules::LogicModuleOptions;
use wasm_operator::operator::swapping::swap_state::SwapPolicy;
use wasm_operator::runtime::logic_module::{LogicModule, digest};
use wasm_operator::runtime::oci::{Registry, RegistryOptions};
use wasm_operator::runtime::slot::ModuleSlot;

const PARENTS: usize = 10;
const PASSWORD: &str = "module-signature-test";

fn built(file: &str) -> PathBuf {
    let path = control_plane::repo_root().join("target").join(file);
    assert!(path.exists(), "{}: `make test` builds it", path.display());
    path
}

/// The cosign CLI, built once and cached by scripts/cosign.sh.
fn cosign_binary() -> PathBuf {
    let built = Command::new("bash")
        .arg(control_plane::repo_root().join("scripts/cosign.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/cosign.sh");
    assert!(built.status.success(), "scripts/cosign.sh failed");
    PathBuf::from(String::from_utf8_lossy(&built.stdout).lines().last().expect("a cosign binary"))
}

struct Cosign {
    binary: PathBuf,
    dir: PathBuf,
}

impl Cosign {
    fn run(&self, args: &[&str]) {
        let out = Command::new(&self.binary)
            .args(args)
            .current_dir(&self.dir)
            .env("COSIGN_PASSWORD", PASSWORD)
            .output()
            .expect("running cosign");
        assert!(out.status.success(), "cosign {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// `cosign generate-key-pair` into `dir/name/`: its cosign.pub, PEM.
    fn generate_key_pair(&self, name: &str) -> String {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).expect("a key dir");
        let prefix = dir.join("cosign");
        self.run(&["generate-key-pair", "--output-key-prefix", prefix.to_str().expect("utf-8")]);
        std::fs::read_to_string(dir.join("cosign.pub")).expect("cosign.pub")
    }

    /// Signs `image` with the key pair `name`, keeping the signature in the
    /// registry only (no transparency log).
    fn sign(&self, name: &str, image: &str) {
        let key = self.dir.join(name).join("cosign.key");
        let key = key.to_str().expect("utf-8");
        self.run(&["sign", "--key", key, "--tlog-upload=false", "--allow-http-registry", "--yes", image]);
    }
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("module-signature-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

async fn set_spec(api: &Api<DynamicObject>, spec: Value) -> Result<DynamicObject, kube::Error> {
    api.patch("greeting", &PatchParams::default(), &Patch::Merge(json!({ "spec": spec }))).await
}

/// Warning events on the LogicModule with `reason` (cluster-scoped
/// objects' events live in `default`).
async fn warnings(ns: &TestNamespace<'_>, reason: &str) -> usize {
    let events: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), "default", &gvk("events.k8s.io", "v1", "Event", "events"));
    let list = events.list(&ListParams::default()).await.expect("listing events");
    list.items
        .iter()
        .filter(|e| e.data["regarding"]["kind"] == "LogicModule" && e.data["reason"] == reason)
        .filter(|e| e.data["type"] == "Warning")
        .count()
}

/// Every Greeting's ConfigMap, by revision (`None` for v1's).
async fn revisions(ns: &TestNamespace<'_>) -> Vec<Option<String>> {
    let params = ListParams::default().labels("app.kubernetes.io/managed-by=greeting-operator");
    let list = ns.api(&gvk("", "v1", "ConfigMap", "configmaps")).list(&params).await.expect("listing ConfigMaps");
    list.items.iter().map(|c| c.data["data"]["revision"].as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logic_module_naming_a_public_key_loads_only_images_signed_with_it() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = temp_dir("keys");
    let cosign = Cosign { binary: cosign_binary(), dir: dir.clone() };
    let trusted = cosign.generate_key_pair("trusted");
    let other_key = cosign.generate_key_pair("other");

    let registry = OciRegistry::start("module-signature");
    let oci = Registry::new(RegistryOptions { insecure: vec![registry.address.clone()], ..RegistryOptions::default() });
    let repository = format!("{}/modules/greeting", registry.address);
    let publish = |file: &'static str, tag: &'static str| {
        let (oci, reference) = (&oci, format!("{repository}:{tag}"));
        async move {
            let bytes = std::fs::read(built(file)).expect("the module");
            oci.push(bytes, &reference).await.expect("pushing")
        }
    };
    let v1 = publish("greeting.wasm", "v1").await;
    cosign.sign("trusted", &v1);
    let v2 = publish("greeting-v2.wasm", "v2").await;
    // v1's behaviour in other bytes: another image, signed with another key.
    let other_signed = publish("greeting-v1-rebuilt.wasm", "other-key").await;
    cosign.sign("other", &other_signed);

    let ns = TestNamespace::new("module-signature").await;
    let plane = ns.plane;
    plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
    let load = |file: &str| LogicModule::from_file(memcached_tests::engine(), &built(file), false).expect("loads");
    let v1_module = load("greeting.wasm");
    plane.apply_yaml(&v1_module.manifest().crd).await.expect("installing the Greeting CRD");
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    for i in 0..PARENTS {
        let greeting = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting",
                              "metadata": {"name": format!("g-{i:03}")}, "spec": {"message": format!("hi {i}")}});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        greetings.create(&PostParams::default(), &greeting).await.expect("creating a Greeting");
    }
    let logic_modules: Api<DynamicObject> =
        Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));

    // Admission: a public key must at least look like one.
    let not_pem: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule", "metadata": {"name": "greeting"},
        "spec": {"image": v1, "verification": {"publicKey": "ssh-ed25519 AAAA"}},
    }))
    .expect("a LogicModule");
    let refused = logic_modules.create(&PostParams::default(), &not_pem).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("publicKey must be a PEM public key")));
    let resource: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule", "metadata": {"name": "greeting"},
        "spec": {"image": v1, "verification": {"publicKey": trusted}},
    }))
    .expect("a LogicModule");
    logic_modules.create(&PostParams::default(), &resource).await.expect("creating the LogicModule");

    let options = || {
        let mut options = options(&ns.namespace);
        options.swap_policy =
            SwapPolicy { poll_interval: Duration::from_millis(100), rollout_per_second: 200, ..SwapPolicy::default() };
        options.logic_modules = Some(LogicModuleOptions {
            registry: Arc::new(Registry::new(RegistryOptions {
                insecure: vec![registry.address.clone()],
                ..RegistryOptions::default()
            })),
            poll_interval: Duration::from_millis(500),
        });
        options
    };
    let client = || plane.client(control_plane::User::Operator);
    let running = Running::start_slots(client().await.expect("a client"), vec![ModuleSlot::new(v1_module)], options());
    let swaps = |result: &str| running.metric("wasm_operator_module_swaps_total", &format!("result=\"{result}\""));

    // v1, signed with the key: verified, and serving as it was.
    let status = wait_logic_module(&logic_modules, "v1 signed and serving", |s| {
        has(s, "Verified", "True", "Verified") && has(s, "Active", "True", "Serving")
    })
    .await;
    let v1_digest = digest(&std::fs::read(built("greeting.wasm")).expect("v1"));
    assert_eq!(status["activeDigest"], v1_digest);
    eventually("every ConfigMap from v1", || async { (revisions(&ns).await == vec![None; PARENTS]).then_some(()) })
        .await;

    // Refused, each for its reason: v1 keeps serving, nothing is written.
    let bad_key = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n";
    let refusals = [
        ("an image signed with another key", &other_signed, trusted.as_str(), "SignatureInvalid", "another key"),
        ("a key that is not a P-256 public key", &v2, bad_key, "BadPublicKey", "cosign generate-key-pair"),
        ("an unsigned image", &v2, trusted.as_str(), "Unsigned", ".sig"),
    ];
    for (count, (what, image, key, reason, says)) in refusals.into_iter().enumerate() {
        set_spec(&logic_modules, json!({"image": image, "verification": {"publicKey": key}})).await.expect(what);
        let status = wait_logic_module(&logic_modules, what, |s| has(s, "Verified", "False", reason)).await;
        let message = condition(&status, "Verified")["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(says), "{what}: {message}");
        assert!(has(&status, "Fetched", "True", "Pulled"), "{what}: {status:#}");
        assert!(has(&status, "Active", "False", "Refused"), "{what}: {status:#}");
        assert_eq!(status["activeDigest"], v1_digest, "{what}: v1 keeps serving");
        assert_eq!(running.serving_digests(), std::slice::from_ref(&v1_digest), "{what}");
        eventually(&format!("a {reason} Warning event"), || async { (warnings(&ns, reason).await > 0).then_some(()) })
            .await;
        assert_eq!(swaps("refused"), count as u64 + 1, "{what}: counted as refused");
    }
    assert_eq!(swaps("succeeded"), 0);
    assert_eq!(revisions(&ns).await, vec![None; PARENTS], "nothing deleted, nothing changed");

    // Signed with the key now: the next look finds the signature, and v2
    // goes live without the resource changing.
    cosign.sign("trusted", &v2);
    let status = wait_logic_module(&logic_modules, "v2 signed and serving", |s| {
        has(s, "Verified", "True", "Verified") && has(s, "Active", "True", "Serving")
    })
    .await;
    let v2_digest = digest(&std::fs::read(built("greeting-v2.wasm")).expect("v2"));
    assert_eq!(status["activeDigest"], v2_digest);
    assert_eq!(status["reference"], v2);
    eventually("every ConfigMap from v2", || async {
        (revisions(&ns).await == vec![Some("2".to_owned()); PARENTS]).then_some(())
    })
    .await;
    assert_eq!(swaps("succeeded"), 1);
    assert_eq!(swaps("refused"), 3, "the signed version is not counted as refused again");

    running.stop().await.expect("a clean stop");

    // Restarted from the v1 file: it comes up on v2, the version that was
    // serving, its signature checked again.
    let start = || async {
        Running::start_slots(client().await.expect("a client"), vec![ModuleSlot::new(load("greeting.wasm"))], options())
    };
    let restarted = start().await;
    let v2_only = vec![v2_digest.clone()];
    eventually("v2 serving after the restart", || async { (restarted.serving_digests() == v2_only).then_some(()) })
        .await;
    restarted.stop().await.expect("a clean stop");

    // Restarted when the resource trusts another key only: v2 is not taken
    // back up, and refused as offered; the given v1 serves.
    set_spec(&logic_modules, json!({"verification": {"publicKey": other_key}})).await.expect("another key");
    let restarted = start().await;
    let status = wait_logic_module(&logic_modules, "v2 refused after the restart", |s| {
        has(s, "Verified", "False", "SignatureInvalid")
    })
    .await;
    assert_eq!(status["activeDigest"], v1_digest, "{status:#}");
    assert_eq!(restarted.serving_digests(), std::slice::from_ref(&v1_digest));
    restarted.stop().await.expect("a clean stop");
    logic_modules.delete("greeting", &Default::default()).await.expect("deleting the LogicModule");
    let _ = std::fs::remove_dir_all(Path::new(&dir));
}
