//! The operator binary as a cluster runs it: JSON logs on stderr, probes and
//! metrics over HTTP, leader election between two replicas on a Lease, and a
//! graceful stop on SIGTERM that hands the lease over at once.

#[path = "operator_support.rs"]
mod operator_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use control_plane::User;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use operator_support::*;
use serde_json::{Value, json};

/// One `memcached-operator run` process; killed if the test fails.
struct Process {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    fn start(ns: &TestNamespace<'_>) -> Self {
        Self::start_binary(ns, "memcached-operator", &[])
    }

    /// `target/release/<binary> [global...] run ...`.
    fn start_binary(ns: &TestNamespace<'_>, binary: &str, global: &[&str]) -> Self {
        let binary = control_plane::repo_root().join("target/release").join(binary);
        assert!(binary.is_file(), "{} is missing: run `make build`", binary.display());
        let mut child = Command::new(binary)
            .args(global)
            .args(["run", "--namespace", &ns.namespace, "--leader-election-namespace", &ns.namespace])
            // Plain HTTP (tests/metrics_auth.rs scrapes the HTTPS default).
            .args(["--metrics-bind-address", "127.0.0.1:0", "--metrics-secure=false"])
            .args(["--health-probe-bind-address", "127.0.0.1:0"])
            .env("KUBECONFIG", ns.plane.kubeconfig(User::Operator))
            .env_remove("POD_NAME")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting the operator");
        let lines = collect_stderr(&mut child);
        Self { child, lines }
    }

    fn logs(&self) -> Vec<Value> {
        let lines = self.lines.lock().expect("the log").clone();
        lines
            .iter()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"))
            })
            .collect()
    }

    async fn wait_log(&self, message: &str) -> Value {
        self.wait_log_within(operator_support::WAIT, message).await
    }

    async fn wait_log_within(&self, wait: Duration, message: &str) -> Value {
        eventually_within(wait, &format!("the log line {message:?}"), || async {
            self.logs().into_iter().find(|line| line["message"] == json!(message))
        })
        .await
    }

    /// The addresses it bound (port 0 picks free ones).
    async fn addresses(&self) -> (String, String) {
        let line = self.wait_log("serving /metrics, /healthz and /readyz").await;
        let field = |name: &str| line[name].as_str().expect("an address").to_owned();
        (field("metrics_address"), field("health_address"))
    }

    fn terminate(&self) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    async fn exit_code(&mut self) -> Option<i32> {
        for _ in 0..300 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the operator did not exit within 30 s of SIGTERM");
    }
}

/// A bare HTTP/1.1 GET: status code and body.
async fn get(address: &str, path: &str) -> (u16, String) {
    let address = address.to_owned();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(&address).expect("connecting");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("a timeout");
        stream.write_all(request.as_bytes()).expect("sending");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("reading");
        let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    })
    .await
    .expect("the request ran")
}

async fn holder(ns: &TestNamespace<'_>) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), &ns.namespace);
    let lease = leases.get_opt("memcached-operator").await.ok()??;
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_lease_and_stop_gracefully_on_sigterm() {
    let ns = TestNamespace::new("process").await;
    ns.create_memcached("first", json!({"replicas": 1})).await;

    let mut leader = Process::start(&ns);
    let (leader_metrics, leader_health) = leader.addresses().await;
    eventually("the leader to be ready", || async { (get(&leader_health, "/readyz").await.0 == 200).then_some(()) })
        .await;
    assert_eq!(get(&leader_health, "/healthz").await.0, 200);
    ns.wait_for("Deployment", "first").await;
    let leader_identity = eventually("a lease holder", || async { holder(&ns).await }).await;
    assert!(leader_identity.ends_with(&format!("_{}", leader.child.id())), "{leader_identity}");

    let mut standby = Process::start(&ns);
    let (standby_metrics, standby_health) = standby.addresses().await;
    standby.wait_log("another replica is the leader; waiting").await;
    eventually("the standby to be ready", || async { (get(&standby_health, "/readyz").await.0 == 200).then_some(()) })
        .await;
    let (status, metrics) = get(&leader_metrics, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(metric_value(&metrics, "wasm_operator_leader", ""), 1, "{metrics}");
    assert!(metric_value(&metrics, "wasm_operator_reconciles_total", "result=\"success\"") >= 1, "{metrics}");
    for family in [
        "wasm_operator_reconcile_duration_seconds",
        "wasm_operator_create_or_update_total",
        "wasm_operator_module_call_duration_seconds",
        "wasm_operator_api_requests_total",
    ] {
        assert!(metrics.contains(family), "{family} is exported");
    }
    let standby_text = get(&standby_metrics, "/metrics").await.1;
    assert_eq!(metric_value(&standby_text, "wasm_operator_leader", ""), 0);
    assert_eq!(metric_value(&standby_text, "wasm_operator_reconciles_total", ""), 0, "the standby never reconciles");

    // SIGTERM: reconciles in flight finish, the lease is released, exit 0;
    // the standby takes over at once, not a lease duration later.
    leader.terminate();
    assert_eq!(leader.exit_code().await, Some(0));
    leader.wait_log("released the leader lease").await;
    let logs = leader.logs();
    assert!(logs.iter().all(|l| l["timestamp"].is_string() && l["level"].is_string()), "structured logs");
    let new_holder =
        eventually("the standby to take over", || async { holder(&ns).await.filter(|h| *h != leader_identity) }).await;
    assert!(new_holder.ends_with(&format!("_{}", standby.child.id())));
    standby.wait_log("became the leader").await;
    ns.create_memcached("second", json!({"replicas": 1})).await;
    ns.wait_for("Deployment", "second").await;

    standby.terminate();
    assert_eq!(standby.exit_code().await, Some(0));
}

/// A standby queues no wake while it waits (its caches follow every change,
/// and nothing drains the queue until it leads); what changed meanwhile is
/// reconciled once it leads, from its controller's first list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_while_the_standby_waited_is_reconciled_once_it_leads() {
    let ns = TestNamespace::new("standby").await;
    ns.create_memcached("kept", json!({"replicas": 1})).await;
    let leader = Process::start(&ns);
    let first = ns.wait_for("Deployment", "kept").await;
    let mut standby = Process::start(&ns);
    standby.wait_log("another replica is the leader; waiting").await;

    // The leader freezes with the lease: only the standby sees the child go.
    let pid = i32::try_from(leader.child.id()).expect("a pid");
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let deployments = ns.api(&resource_of("Deployment"));
    deployments.delete("kept", &Default::default()).await.expect("deleting the Deployment");

    // Once the frozen leader's lease runs out (15 s), the standby leads and
    // puts it back; a loaded machine may take longer than one `WAIT`.
    standby.wait_log_within(Duration::from_secs(90), "became the leader").await;
    let again = ns.wait_for("Deployment", "kept").await;
    assert_ne!(again.metadata.uid, first.metadata.uid, "created again, not the one deleted");
    standby.terminate();
    assert_eq!(standby.exit_code().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modules_log_lines_and_its_panic_message_reach_the_log_and_the_event() {
    let ns = TestNamespace::new("module-log").await;
    let module = control_plane::repo_root().join("target/greeting.wasm");
    let greeting = module_file("greeting.wasm");
    ns.plane.apply_yaml(&greeting.manifest().crd).await.expect("the Greeting CRD");
    let greetings = ns.api(&gvk("example.c5c3.io", "v1", "Greeting", "greetings"));
    let object = json!({"apiVersion": "example.c5c3.io/v1", "kind": "Greeting", "metadata": {"name": "loud"},
                        "spec": {"message": "log"}});
    let object: kube::api::DynamicObject = serde_json::from_value(object).expect("a Greeting");
    greetings.create(&kube::api::PostParams::default(), &object).await.expect("creating a Greeting");
    let process = Process::start_binary(&ns, "wasm-operator", &["--module", module.to_str().expect("a path")]);

    // A line the module wrote, with the module and the parent it was for.
    let parent = format!("{}/loud", ns.namespace);
    let line = process.wait_log("asked to log").await;
    assert_eq!((line["module"].as_str(), line["parent"].as_str()), (Some("greeting"), Some(parent.as_str())), "{line}");
    assert_eq!(line["level"], "INFO", "{line}");

    // A panic: its message, not "unreachable executed", in the log and the event.
    edit(&greetings, "loud", |g| g.data["spec"]["message"] = json!("trap")).await;
    let panic = eventually("the panic's log line", || async {
        process
            .logs()
            .into_iter()
            .find(|l| l["level"] == "ERROR" && l["message"].as_str().is_some_and(|m| m.contains("asked to trap")))
    })
    .await;
    assert_eq!(panic["parent"].as_str(), Some(parent.as_str()), "{panic}");
    eventually("a ModuleTrapped event with the panic's message", || async {
        ns.event_notes("ModuleTrapped")
            .await
            .iter()
            .any(|n| n.contains("panicked") && n.contains("asked to trap"))
            .then_some(())
    })
    .await;
}

/// `--max-reconcile-steps`' default: none for the built-in Memcached module
/// alone (it settles in one step: a new CR costs one reconcile), 10 for a
/// module given as a file (the same Memcached module under `wasm-operator`:
/// the reconcile that created the children, then its next step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_module_alone_takes_no_next_step_and_a_module_file_does() {
    let memcached_wasm = module_path("memcached.wasm");
    for (binary, global, reconciles, steps) in
        [("memcached-operator", vec![], 1, 0), ("wasm-operator", vec!["--module", memcached_wasm.as_str()], 2, 1)]
    {
        let ns = TestNamespace::new(&format!("steps-{binary}")).await;
        let process = Process::start_binary(&ns, binary, &global);
        let (metrics, _) = process.addresses().await;
        ns.create_memcached("solo", json!({"replicas": 1})).await;
        ns.wait_status("solo", |s| s["conditions"].is_array()).await;
        let counted = eventually(&format!("{binary} to go idle"), || async {
            let before = get(&metrics, "/metrics").await.1;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let after = get(&metrics, "/metrics").await.1;
            let count = |text: &str| metric_value(text, "wasm_operator_reconciles_total", "result=\"success\"");
            (count(&before) == count(&after) && count(&after) > 0).then(|| (count(&after), after))
        })
        .await;
        let continued = metric_value(&counted.1, "wasm_operator_reconcile_steps_total", "outcome=\"continued\"");
        assert_eq!((counted.0, continued), (reconciles, steps), "{binary}: reconciles and next steps");
    }
}
