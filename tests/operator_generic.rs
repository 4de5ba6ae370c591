//! The host is generic: modules for other CRDs run in the same operator,
//! several in one process, each reconciling its own parents.
//!
//! - The Greeting module (tests/modules/greeting, Rust) owns any number of
//!   ConfigMaps per Greeting and reads a Secret; it can also be told to
//!   trap, loop forever or allocate without bound.
//! - The Echo module (tests/modules/echo-py) is written in Python and built
//!   with componentize-py: it imports WASI, which the host links with
//!   nothing granted.
//! - The Notice module (tests/modules/notice-ts) is written in TypeScript on
//!   the TypeScript SDK (sdk/typescript) and built with componentize-js: it
//!   imports the contract's `log` and no WASI.
//!
//! Each module's CRD is installed from the module's own manifest.

#[path = "operator_support.rs"]
mod operator_support;

use control_plane::ControlPlane;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::operator::Options;
use wasm_operator::runtime::logic_module::LogicModule;

fn greetings_resource() -> ApiResource {
    gvk("example.c5c3.io", "v1", "Greeting", "greetings")
}

fn echoes_resource() -> ApiResource {
    gvk("python.example.c5c3.io", "v1", "Echo", "echoes")
}

fn notices_resource() -> ApiResource {
    gvk("typescript.example.c5c3.io", "v1", "Notice", "notices")
}

fn configmaps_resource() -> ApiResource {
    gvk("", "v1", "ConfigMap", "configmaps")
}

/// Installs the CRD the module ships in its manifest.
async fn install_crd(plane: &ControlPlane, module: &LogicModule) {
    plane.apply_yaml(&module.manifest().crd).await.expect("installing the module's CRD");
}

struct Greetings<'a> {
    ns: &'a TestNamespace<'a>,
}

impl Greetings<'_> {
    fn api(&self) -> Api<DynamicObject> {
        self.ns.api(&greetings_resource())
    }

    async fn create(&self, name: &str, spec: Value) -> DynamicObject {
        let greeting =
            json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "metadata": {"name": name}, "spec": spec});
        let greeting: DynamicObject = serde_json::from_value(greeting).expect("a Greeting");
        self.api().create(&PostParams::default(), &greeting).await.expect("creating a Greeting")
    }

    async fn set_spec(&self, name: &str, spec: Value) {
        edit(&self.api(), name, |greeting| greeting.data["spec"] = spec.clone()).await;
    }

    async fn configmap(&self, name: &str) -> Option<DynamicObject> {
        self.ns.get(&configmaps_resource(), name).await
    }

    async fn wait_configmap(&self, name: &str, check: impl Fn(&Value) -> bool) -> DynamicObject {
        eventually(&format!("ConfigMap {name}"), || async {
            self.configmap(name).await.filter(|c| check(&c.data["data"]))
        })
        .await
    }

    async fn wait_gone(&self, name: &str) {
        eventually(&format!("ConfigMap {name} to go"), || async { self.configmap(name).await.is_none().then_some(()) })
            .await
    }

    async fn wait_status(&self, name: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(&format!("the status of Greeting {name}"), || async {
            let greeting = self.api().get(name).await.ok()?;
            let status = greeting.data.get("status")?.clone();
            check(&status).then_some(status)
        })
        .await
    }

    async fn wait_phase(&self, name: &str, phase: &str) -> Value {
        eventually(&format!("phase {phase}"), || async {
            let greeting = self.api().get(name).await.ok()?;
            let status = greeting.data.get("status")?.clone();
            (status["phase"] == json!(phase) && status["observedGeneration"] == json!(greeting.metadata.generation?))
                .then_some(status)
        })
        .await
    }

    async fn wait_event(&self, reason: &str, contains: &str) {
        eventually(&format!("a {reason} event"), || async {
            self.ns.event_notes(reason).await.iter().any(|n| n.contains(contains)).then_some(())
        })
        .await
    }
}

fn stalled(status: &Value) -> Option<&Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == "Stalled")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_modules_in_one_process_each_reconcile_their_own_parents() {
    // The Memcached CRD and the module's own.
    let ns = TestNamespace::new("two-modules").await;
    let plane = ns.plane;
    let greeting = module_file("greeting.wasm");
    let greeting_digest = greeting.digest().to_owned();
    install_crd(plane, &greeting).await;
    let greetings = Greetings { ns: &ns };

    let hello = greetings
        .create("hello", json!({"message": "hi", "signatureSecret": "sig", "audiences": ["world", "moon"]}))
        .await;
    let other = greetings.create("other", json!({"message": "yo", "audiences": ["moon"]})).await;
    ns.create_memcached("cache", json!({"replicas": 2})).await;
    // Not anyone's: never touched.
    let stray: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello-stray"}, "data": {"mine": "yes"}}),
    )
    .expect("a ConfigMap");
    let stray = ns
        .api(&configmaps_resource())
        .create(&PostParams::default(), &stray)
        .await
        .expect("creating a stray ConfigMap");

    let operator = Running::start_modules(plane, vec![memcached_module(), greeting], options(&ns.namespace)).await;

    // Memcached, as ever.
    let memcached = converged(&ns, "cache").await;
    assert!(memcached.contains_key("Deployment") && memcached.contains_key("Service"));

    // The Greetings: several ConfigMaps of one kind per parent.
    for (name, message) in [("hello", "hi"), ("hello-world", "hi, world"), ("hello-moon", "hi, moon")] {
        let configmap = greetings.wait_configmap(name, |d| d["message"] == message).await;
        assert_eq!(controller_uid(&configmap), hello.uid(), "{name}");
        assert_eq!(configmap.data["data"]["signature"], "unsigned");
    }
    let other_moon = greetings.wait_configmap("other-moon", |d| d["message"] == "yo, moon").await;
    assert_eq!(controller_uid(&other_moon), other.uid());
    greetings.wait_phase("hello", "Published in ConfigMap hello, hello-moon, hello-world").await;
    greetings.wait_event("Created", "Created ConfigMap hello-moon").await;

    // The read kind: the Secret the parent references wakes it.
    ns.create_secret("sig", json!({"key": "value"})).await;
    for name in ["hello", "hello-world", "hello-moon"] {
        greetings.wait_configmap(name, |d| d["signature"] == "signed by sig").await;
    }

    // Change one, drop one: hello-moon goes because hello controls it;
    // other-moon, another parent's, and the stray stay as they are.
    let other_moon_version = other_moon.resource_version();
    greetings
        .set_spec("hello", json!({"message": "hi", "signatureSecret": "sig", "audiences": ["world"], "x": 1}))
        .await;
    greetings.wait_gone("hello-moon").await;
    greetings.wait_event("Deleted", "Deleted ConfigMap hello-moon").await;
    greetings.wait_phase("hello", "Published in ConfigMap hello, hello-world").await;
    greetings.set_spec("hello", json!({"message": "hello", "signatureSecret": "sig", "audiences": ["world"]})).await;
    greetings.wait_configmap("hello-world", |d| d["message"] == "hello, world").await;
    let untouched = greetings.configmap("other-moon").await.expect("another parent's ConfigMap stays");
    assert_eq!(untouched.resource_version(), other_moon_version, "another parent's ConfigMap was written");
    let stray_now = greetings.configmap("hello-stray").await.expect("the stray ConfigMap stays");
    assert_eq!(stray_now.resource_version(), stray.resource_version(), "a ConfigMap nobody controls was written");

    // Unwanted now: every one of hello's ConfigMaps goes.
    greetings.set_spec("hello", json!({"message": ""})).await;
    greetings.wait_gone("hello").await;
    greetings.wait_gone("hello-world").await;
    greetings.wait_phase("hello", "Nothing to publish").await;

    // Invalid: reported in status and a Warning; nothing is deleted.
    greetings.set_spec("hello", json!({"message": "back"})).await;
    greetings.wait_configmap("hello", |d| d["message"] == "back").await;
    greetings.set_spec("hello", json!({"message": 42})).await;
    greetings.wait_phase("hello", "Invalid: spec.message must be a string").await;
    greetings.wait_event("InvalidSpec", "spec.message").await;
    assert!(greetings.configmap("hello").await.is_some(), "an invalid spec deletes nothing");

    // One process, two modules, labelled apart in the metrics.
    let metrics = operator.metrics.encode();
    assert!(metric_value(&metrics, "wasm_operator_reconciles_total", "module=\"memcached\"") >= 1, "{metrics}");
    assert!(metric_value(&metrics, "wasm_operator_reconciles_total", "module=\"greeting\"") >= 1, "{metrics}");
    assert_eq!(
        metric_value(&metrics, "wasm_operator_module_info", &format!("digest=\"{greeting_digest}\"")),
        1,
        "{metrics}"
    );
    assert_eq!(metric_value(&metrics, "wasm_operator_module_info", "module=\"memcached\""), 1, "{metrics}");
    operator.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_traps_loops_or_exhausts_memory_fails_only_its_own_parents() {
    // The Memcached CRD and the module's own.
    let ns = TestNamespace::new("isolation").await;
    let plane = ns.plane;
    let greeting = module_file("greeting.wasm");
    install_crd(plane, &greeting).await;
    let greetings = Greetings { ns: &ns };
    greetings.create("hello", json!({"message": "hi"})).await;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let operator = Running::start_modules(plane, vec![memcached_module(), greeting], options(&ns.namespace)).await;
    greetings.wait_configmap("hello", |d| d["message"] == "hi").await;
    converged(&ns, "cache").await;

    let failures = [
        // The panic's message, through the SDK's panic hook and the log import.
        ("trap", "ModuleTrapped", "asked to trap"),
        ("loop", "ModuleDeadlineExceeded", "deadline"),
        ("allocate", "ModuleOutOfMemory", "out of memory"),
    ];
    for (replicas, (message, reason, words)) in (2..).zip(failures) {
        greetings.set_spec("hello", json!({"message": message})).await;
        greetings.wait_event(reason, words).await;
        let status = greetings
            .wait_status("hello", |s| stalled(s).is_some_and(|c| c["reason"] == reason && c["status"] == "True"))
            .await;
        let condition = stalled(&status).expect("Stalled");
        assert!(condition["message"].as_str().is_some_and(|m| m.contains(words)), "{condition}");
        // Nothing of the broken module's parent changed or went.
        let configmap = greetings.configmap("hello").await.expect("the ConfigMap stays");
        assert_eq!(configmap.data["data"]["message"], "hi");

        // The other module in the same process carries on.
        ns.set_spec("cache", json!({"replicas": replicas})).await;
        let memcached = converged(&ns, "cache").await;
        assert_eq!(memcached["Deployment"].data["spec"]["replicas"], replicas);
    }
    let metrics = operator.metrics.encode();
    for (_, reason, _) in failures {
        let labels = format!("module=\"greeting\",reason=\"{reason}\"");
        assert!(metric_value(&metrics, "wasm_operator_module_failures_total", &labels) >= 1, "{reason}: {metrics}");
    }
    assert_eq!(metric_value(&metrics, "wasm_operator_module_failures_total", "module=\"memcached\""), 0, "{metrics}");

    // Fixed: reconciled again, and the module's own status replaces Stalled.
    greetings.set_spec("hello", json!({"message": "recovered"})).await;
    greetings.wait_configmap("hello", |d| d["message"] == "recovered").await;
    let status = greetings.wait_phase("hello", "Published in ConfigMap hello").await;
    assert!(stalled(&status).is_none(), "{status}");
    operator.stop().await.expect("a clean stop");
}

/// Module calls run off the async workers: a module whose calls run to
/// their 5-second deadline, two at a time, on a runtime of two workers,
/// holds up neither the watches nor another module's reconciles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_running_to_its_deadline_does_not_hold_up_another_modules_reconciles() {
    let ns = TestNamespace::new("slow-module").await;
    let plane = ns.plane;
    let greeting = module_file("greeting.wasm");
    install_crd(plane, &greeting).await;
    let greetings = Greetings { ns: &ns };
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let options = Options { concurrency: 2, module_call_concurrency: 2, ..options(&ns.namespace) };
    let operator = Running::start_modules(plane, vec![memcached_module(), greeting], options).await;
    converged(&ns, "cache").await;
    for name in ["slow-1", "slow-2", "slow-3", "slow-4", "slow-5", "slow-6"] {
        greetings.create(name, json!({"message": "loop"})).await;
    }
    // Two of its calls are running to their deadline now, and more wait.
    eventually("the Greeting module's calls to be running", || async {
        (operator.metric("wasm_operator_module_calls_in_flight", "module=\"greeting\"") >= 2).then_some(())
    })
    .await;
    let started = std::time::Instant::now();
    ns.set_spec("cache", json!({"replicas": 2})).await;
    let memcached = converged(&ns, "cache").await;
    let took = started.elapsed();
    assert_eq!(memcached["Deployment"].data["spec"]["replicas"], 2);
    assert!(
        took < std::time::Duration::from_secs(3),
        "the Memcached module waited {took:?} behind the Greeting module's calls (each runs 5 s)"
    );
    assert!(
        operator.metric("wasm_operator_module_calls_in_flight", "module=\"greeting\"") <= 2,
        "at most --module-call-concurrency calls of one module at once"
    );
    greetings.wait_event("ModuleDeadlineExceeded", "deadline").await;
    operator.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_written_in_python_is_reconciled_by_the_same_host() {
    let plane = ControlPlane::shared();
    let echo = module_file("echo-py.wasm");
    assert!(echo.contract().starts_with("wasm-operator:controller/reconciler@1."), "{}", echo.contract());
    install_crd(plane, &echo).await;
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, "python").await;
    let echoes = ns.api(&echoes_resource());
    let created: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "python.example.c5c3.io/v1", "kind": "Echo", "metadata": {"name": "hi"}, "spec": {"text": "hello"}
    }))
    .expect("an Echo");
    let created = echoes.create(&PostParams::default(), &created).await.expect("creating an Echo");
    let operator = Running::start(plane, echo, options(&ns.namespace)).await;

    let configmap = |check: fn(&Value) -> bool| {
        let ns = &ns;
        async move {
            eventually("the Echo's ConfigMap", || async {
                ns.get(&configmaps_resource(), "hi-echo").await.filter(|c| check(&c.data["data"]))
            })
            .await
        }
    };
    let made = configmap(|d| d["echo"] == "hello" && d["language"] == "python").await;
    assert_eq!(controller_uid(&made), created.uid());
    let status = |expected: &'static str| {
        let echoes = echoes.clone();
        async move {
            eventually("the Echo's status", || async {
                let echo = echoes.get("hi").await.ok()?;
                let status = echo.data.get("status")?.clone();
                (status["echoed"] == expected && status["observedGeneration"] == json!(echo.metadata.generation?))
                    .then_some(status)
            })
            .await
        }
    };
    status("hello").await;

    let set_spec = |spec: Value| {
        let echoes = echoes.clone();
        async move {
            edit(&echoes, "hi", |echo| echo.data["spec"] = spec.clone()).await;
        }
    };
    set_spec(json!({"text": "hello", "shout": true})).await;
    let shouted = configmap(|d| d["echo"] == "HELLO").await;
    assert_eq!(shouted.uid(), made.uid(), "updated in place, not recreated");
    status("HELLO").await;

    // A write to WASI's stdout (the host discards it) neither fails the
    // call nor takes the host down: WASI calls run off the async runtime.
    set_spec(json!({"text": "print"})).await;
    configmap(|d| d["echo"] == "print").await;

    // Steady state: a reconcile of an unchanged Echo writes nothing.
    let mark = plane.audit_mark().expect("the audit log");
    let reconciled = operator.reconciles("success");
    edit(&echoes, "hi", |echo| drop(echo.annotations_mut().insert("touched".into(), "yes".into()))).await;
    eventually("one more reconcile", || async { (operator.reconciles("success") > reconciled).then_some(()) }).await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "an unchanged Echo was written to: {writes:?}");

    set_spec(json!({"text": ""})).await;
    eventually("the ConfigMap to go", || async {
        ns.get(&configmaps_resource(), "hi-echo").await.is_none().then_some(())
    })
    .await;

    // An invalid parent (a name too long for the label the module puts it
    // in): `desired` answers `invalid`, and `status` is told why through its
    // `problem`, as the contract says. The module reports the problem it is
    // given, the host's wording ("invalid: ..."), over its own.
    let long_name = "e".repeat(70);
    let invalid: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "python.example.c5c3.io/v1", "kind": "Echo", "metadata": {"name": long_name}, "spec": {"text": "x"}
    }))
    .expect("an Echo");
    echoes.create(&PostParams::default(), &invalid).await.expect("creating an invalid Echo");
    let reported = eventually("the invalid Echo's problem", || async {
        let echo = echoes.get(&long_name).await.ok()?;
        echo.data["status"]["problem"].as_str().map(str::to_owned)
    })
    .await;
    assert_eq!(reported, "invalid: metadata.name: must be at most 63 characters (it is a label value)");
    operator.stop().await.expect("a clean stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_written_in_typescript_is_reconciled_by_the_same_host() {
    let plane = ControlPlane::shared();
    let notice = module_file("notice-ts.wasm");
    assert!(notice.contract().starts_with("wasm-operator:controller/reconciler@1."), "{}", notice.contract());
    install_crd(plane, &notice).await;
    grant_operator_everything(plane).await;
    let ns = TestNamespace::on(plane, "typescript").await;
    let notices = ns.api(&notices_resource());
    let created: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "typescript.example.c5c3.io/v1", "kind": "Notice", "metadata": {"name": "hi"},
        "spec": {"message": "hello"}
    }))
    .expect("a Notice");
    let created = notices.create(&PostParams::default(), &created).await.expect("creating a Notice");
    let operator = Running::start(plane, notice, options(&ns.namespace)).await;

    let configmap = |check: fn(&Value) -> bool| {
        let ns = &ns;
        async move {
            eventually("the Notice's ConfigMap", || async {
                ns.get(&configmaps_resource(), "hi-notice").await.filter(|c| check(&c.data["data"]))
            })
            .await
        }
    };
    // The Notice's status once its module answered for the current generation.
    let status = |check: fn(&Value) -> bool| {
        let notices = notices.clone();
        async move {
            eventually("the Notice's status", || async {
                let notice = notices.get("hi").await.ok()?;
                let status = notice.data.get("status")?.clone();
                (status["observedGeneration"] == json!(notice.metadata.generation?) && check(&status)).then_some(status)
            })
            .await
        }
    };
    let ready = |status: &Value| -> Value {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .cloned()
            .unwrap_or_default()
    };
    let made = configmap(|d| d["message"] == "hello" && d["level"] == "info" && d["language"] == "typescript").await;
    assert_eq!(controller_uid(&made), created.uid());
    let published = status(|s| s["published"] == "hello").await;
    assert_eq!(ready(&published)["status"], "True", "{published}");
    assert_eq!(ready(&published)["reason"], "Published", "{published}");

    // Steady state: a reconcile of an unchanged Notice writes nothing (the
    // SDK merged onto the server's ConfigMap; Ready kept its transition time).
    let mark = plane.audit_mark().expect("the audit log");
    let reconciled = operator.reconciles("success");
    edit(&notices, "hi", |notice| drop(notice.annotations_mut().insert("touched".into(), "yes".into()))).await;
    eventually("one more reconcile", || async { (operator.reconciles("success") > reconciled).then_some(()) }).await;
    let writes = ns.operator_writes(mark).await;
    assert!(writes.is_empty(), "an unchanged Notice was written to: {writes:?}");

    let set_spec = |spec: Value| {
        let notices = notices.clone();
        async move {
            edit(&notices, "hi", |notice| notice.data["spec"] = spec.clone()).await;
        }
    };
    // An edit converges, in place.
    set_spec(json!({"message": "bye", "level": "warning"})).await;
    let edited = configmap(|d| d["message"] == "bye" && d["level"] == "warning").await;
    assert_eq!(edited.uid(), made.uid(), "updated in place, not recreated");
    status(|s| s["published"] == "bye").await;

    // An invalid spec: reported with its field, the ConfigMap left alone.
    set_spec(json!({"message": "bye", "level": "loud"})).await;
    let refused = status(|s| s["problem"].is_string()).await;
    assert_eq!(refused["problem"], "invalid: spec.level: must be one of info, warning", "{refused}");
    assert_eq!(ready(&refused)["status"], "False", "{refused}");
    assert_eq!(ready(&refused)["reason"], "InvalidSpec", "{refused}");
    assert_eq!(ready(&refused)["message"], refused["problem"], "{refused}");
    let kept = ns.get(&configmaps_resource(), "hi-notice").await.expect("the ConfigMap stays");
    assert_eq!(kept.data["data"]["level"], "warning");

    // An unexpected exception: the SDK logs it (with its stack) through the
    // log import and the call traps; the host reports the logged message in
    // the Warning event and the Stalled condition.
    set_spec(json!({"message": "throw"})).await;
    eventually("a ModuleTrapped event with the exception", || async {
        let notes = ns.event_notes("ModuleTrapped").await;
        notes.iter().any(|n| n.contains("Error: asked to throw by Notice hi")).then_some(())
    })
    .await;
    let notice = eventually("the Stalled condition", || async {
        let notice = notices.get("hi").await.ok()?;
        stalled(notice.data.get("status")?).is_some().then_some(notice)
    })
    .await;
    let condition = stalled(&notice.data["status"]).expect("Stalled").clone();
    assert_eq!(condition["reason"], "ModuleTrapped", "{condition}");
    assert!(condition["message"].as_str().is_some_and(|m| m.contains("asked to throw by Notice hi")), "{condition}");

    // Fixed: the module's next status replaces Stalled.
    set_spec(json!({"message": "recovered"})).await;
    configmap(|d| d["message"] == "recovered").await;
    let recovered = status(|s| s["published"] == "recovered").await;
    assert!(stalled(&recovered).is_none(), "{recovered}");
    assert_eq!(ready(&recovered)["status"], "True", "{recovered}");
    operator.stop().await.expect("a clean stop");
}

/// A controller written in steps (the Greeting's steps build: each
/// audience's ConfigMap once the one before it exists) reaches its end
/// state in one go, though its own writes' echoes wake nothing and the
/// resync is an hour away: after a reconcile that wrote, the host
/// reconciles again once every written object is in its caches. One that
/// never settles (the message `forever` counts up at every reconcile) is
/// stopped after 10 steps in a row, with a `NotSettling` event, the
/// condition `Stalled` (reason `NotSettling`) and the metric, and writes
/// nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_written_in_steps_converges_without_the_resync_and_one_that_never_settles_is_stopped() {
    let ns = TestNamespace::new("steps").await;
    let module = module_file("greeting-steps.wasm");
    install_crd(ns.plane, &module).await;
    let greetings = Greetings { ns: &ns };
    let operator = Running::start(ns.plane, module, options(&ns.namespace)).await;
    let started = std::time::Instant::now();
    greetings.create("chain", json!({"message": "hi", "audiences": ["a", "b", "c", "d"]})).await;
    eventually_within(std::time::Duration::from_secs(20), "the last step's ConfigMap", || async {
        greetings.configmap("chain-d").await
    })
    .await;
    let took = started.elapsed();
    let steps = |outcome: &str| {
        operator.metric("wasm_operator_reconcile_steps_total", &format!("module=\"greeting\",outcome=\"{outcome}\""))
    };
    assert!(steps("continued") >= 4, "four steps after the first reconcile: {}", steps("continued"));
    greetings.wait_phase("chain", "Published in ConfigMap chain, chain-a, chain-b, chain-c, chain-d").await;
    println!("five ConfigMaps, one per step, in {took:?}");

    let mark = ns.plane.audit_mark().expect("the audit log");
    greetings.create("spinner", json!({"message": "forever"})).await;
    greetings.wait_event("NotSettling", "10 reconciles in a row").await;
    let status = greetings.wait_status("spinner", |s| stalled(s).is_some_and(|c| c["reason"] == "NotSettling")).await;
    assert_eq!(stalled(&status).map(|c| c["status"].clone()), Some(json!("True")), "{status}");
    assert_eq!(steps("stopped"), 1);
    // The tenth step wrote the tenth count, and nothing follows it.
    let counter = greetings.wait_configmap("spinner-count", |data| data["count"] == "10").await;
    let counted = ns
        .operator_writes(mark)
        .await
        .into_iter()
        .filter(|w| w.resource.as_deref() == Some("configmaps") && w.name.as_deref() == Some("spinner-count"))
        .count();
    assert_eq!(counted, 10, "one write per step");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let now = greetings.configmap("spinner-count").await.expect("the counter");
    assert_eq!(now.data["data"]["count"], "10", "no step after the tenth");
    assert_eq!(now.metadata.resource_version, counter.metadata.resource_version);
    operator.stop().await.expect("a clean stop");
}

/// A parent is reconciled on the timer its answer asks for, with nothing
/// else changing and the resync an hour away (the Countdown example,
/// examples/countdown: `reconcile_after` every second until its deadline).
/// Its status counts down, each tick writing only the status (the owned
/// ConfigMap is applied once); once the deadline has passed the answer asks
/// for no timer and nothing more is written. The metric counts the parents
/// with a timer, and a parent that goes takes its timer with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_is_reconciled_on_its_timer_with_nothing_else_changing() {
    let ns = TestNamespace::new("timers").await;
    let module = module_file("countdown.wasm");
    install_crd(ns.plane, &module).await;
    let countdowns = ns.api(&gvk("example.c5c3.io", "v1", "Countdown", "countdowns"));
    let operator = Running::start(ns.plane, module, options(&ns.namespace)).await;
    let timers = || operator.metric("wasm_operator_parent_timers", "module=\"countdown\"");
    let create = |name: &str, seconds: i64| {
        let deadline = k8s_openapi::jiff::Timestamp::now()
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds))
            .expect("a deadline")
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let countdown = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Countdown",
            "metadata": {"name": name}, "spec": {"deadline": deadline}});
        let countdown: DynamicObject = serde_json::from_value(countdown).expect("a Countdown");
        let api = countdowns.clone();
        async move { api.create(&PostParams::default(), &countdown).await.expect("creating a Countdown") }
    };
    let mark = ns.plane.audit_mark().expect("the audit log");
    create("launch", 6).await;
    // Every value the status shows, as it counts down.
    let mut seen: Vec<i64> = Vec::new();
    let started = std::time::Instant::now();
    let done = loop {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "the countdown did not end: {seen:?}");
        let status = countdowns.get("launch").await.ok().and_then(|c| c.data.get("status").cloned());
        if let Some(status) = status {
            if let Some(left) = status["remainingSeconds"].as_i64()
                && seen.last() != Some(&left)
            {
                seen.push(left);
            }
            if status["phase"] == "Done" {
                break status;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(done["remainingSeconds"], 0, "{done}");
    assert!(seen.len() >= 4, "the status counted down on its timer: {seen:?}");
    assert!(seen.windows(2).all(|pair| pair[0] > pair[1]), "down, never up: {seen:?}");
    assert_eq!(timers(), 0, "no timer once the deadline has passed");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let writes = ns.operator_writes(mark).await;
    let configmap_writes = writes.iter().filter(|w| w.resource.as_deref() == Some("configmaps")).count();
    assert_eq!(configmap_writes, 1, "the ConfigMap applied once, no tick rewrites it");
    let status_writes =
        writes.iter().filter(|w| w.resource.as_deref() == Some("countdowns") && w.name.as_deref() == Some("launch"));
    let status_writes = status_writes.count();
    assert!(status_writes >= seen.len() - 1, "a status write per tick: {status_writes} for {seen:?}");
    let after = ns.operator_writes(mark).await.len();
    assert_eq!(after, writes.len(), "nothing written once it is done");

    create("far", 3600).await;
    eventually("a timer for the far countdown", || async { (timers() == 1).then_some(()) }).await;
    countdowns.delete("far", &Default::default()).await.expect("deleting a Countdown");
    eventually("the far countdown's timer to go with it", || async { (timers() == 0).then_some(()) }).await;
    operator.stop().await.expect("a clean stop");
}

/// A module that finalizes (the Greeting's finalizes build) holds its
/// finalizer on each Greeting from before its first write; while a Greeting
/// is being deleted it is asked what should still exist (its message's
/// ConfigMap, not its audiences'), and the Greeting stays, counted as
/// waiting, until the module says it is done (once the Greeting is
/// annotated released): then the host deletes what remains and removes the
/// finalizer, and the Greeting goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_finalizes_keeps_its_parent_until_it_is_done() {
    let ns = TestNamespace::new("finalize").await;
    let module = module_file("greeting-finalizes.wasm");
    install_crd(ns.plane, &module).await;
    let greetings = Greetings { ns: &ns };
    let operator = Running::start(ns.plane, module, options(&ns.namespace)).await;
    let finalizing = || operator.metric("wasm_operator_parents_finalizing", "module=\"greeting\"");
    greetings.create("keep", json!({"message": "hi", "audiences": ["a"]})).await;
    greetings.wait_configmap("keep-a", |data| data["message"] == "hi, a").await;
    let greeting = greetings.api().get("keep").await.expect("the Greeting");
    assert_eq!(greeting.metadata.finalizers, Some(vec!["wasm-operator.c5c3.io/greeting".to_owned()]));

    greetings.api().delete("keep", &Default::default()).await.expect("deleting the Greeting");
    greetings.wait_gone("keep-a").await;
    eventually("the Greeting to wait on its module", || async { (finalizing() == 1).then_some(()) }).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let waiting = greetings.api().get("keep").await.expect("the Greeting is still there");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(greetings.configmap("keep").await.is_some(), "the message's ConfigMap is kept meanwhile");

    edit(&greetings.api(), "keep", |greeting| {
        greeting.metadata.annotations.get_or_insert_default().insert("example.c5c3.io/release".into(), "true".into());
    })
    .await;
    eventually("the Greeting to go", || async { greetings.api().get_opt("keep").await.ok()?.is_none().then_some(()) })
        .await;
    greetings.wait_gone("keep").await;
    assert_eq!(finalizing(), 0);
    operator.stop().await.expect("a clean stop");
}
