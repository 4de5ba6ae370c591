//! `make run`'s script (scripts/run-local.sh) against real clusters:
//! - with no cluster in the environment it starts its own control plane
//!   (pods mode: the Pods start on kwok's fake Nodes), the operator and two
//!   samples, prints what the operator created, the Pods' addresses and the
//!   CRs' status (RUN_ONCE=1 makes it exit there), and leaves no process
//!   behind;
//! - with KUBECONFIG set it installs the CRD in that cluster and runs the
//!   operator against it until SIGTERM.
//!
//! - with MODULE=target/greeting.wasm it runs `wasm-operator dev` on that
//!   module on its control plane instead (`make run MODULE=...`).
//!
//! They need target/release/memcached-operator and target/release/control-plane
//! (and for MODULE target/release/wasm-operator and target/greeting.wasm;
//! `make test` builds them first).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use control_plane::{ControlPlane, Options, User};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

fn root() -> PathBuf {
    control_plane::repo_root()
}

fn require_binaries() {
    for binary in ["target/release/memcached-operator", "target/release/control-plane"] {
        assert!(
            root().join(binary).is_file(),
            "{binary} is missing: run `make build` and `cargo build --release -p control-plane` (make test does)"
        );
    }
}

/// The script in its own process group, so a timeout can stop all of it.
fn spawn_script(envs: &[(&str, &str)], remove: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new("bash");
    command.arg(root().join("scripts/run-local.sh")).current_dir(root()).process_group(0);
    for name in remove {
        command.env_remove(name);
    }
    command.envs(envs.iter().copied()).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.spawn().expect("starting scripts/run-local.sh")
}

fn signal_group(child: &Child, signal: i32) {
    let pid = libc::pid_t::try_from(child.id()).expect("a pid");
    // SAFETY: the child leads its own process group (process_group(0)).
    unsafe { libc::kill(-pid, signal) };
}

/// Waits for the child; on timeout sends SIGTERM (its traps clean up), then
/// SIGKILL to the whole group, and fails.
fn wait_with_timeout(child: &mut Child, timeout: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for the script") {
            return status;
        }
        if Instant::now() > deadline {
            signal_group(child, libc::SIGTERM);
            std::thread::sleep(Duration::from_secs(30));
            signal_group(child, libc::SIGKILL);
            let _ = child.wait();
            panic!("{what} did not finish in {}s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read_all(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        pipe.read_to_string(&mut text).expect("reading the script's output");
    }
    text
}

/// Command lines of every process that still runs, by pid.
fn processes() -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if cmdline.is_empty() {
            continue; // a zombie or kernel thread
        }
        found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
    }
    found
}

fn pid_after(output: &str, prefix: &str) -> u32 {
    output
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{output}"))
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = root().join("target").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn without_a_cluster_it_starts_one_and_prints_what_the_operator_created() {
    require_binaries();
    let run_dir = scratch_dir("run-local-test");
    let mut child = spawn_script(
        &[("RUN_ONCE", "1"), ("LOCAL_CLUSTER", "1"), ("RUN_DIR", run_dir.to_str().expect("utf-8 path"))],
        &["KUBECONFIG"],
    );
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    // The pipes are read on threads so a full pipe cannot stall the script.
    let out = std::thread::spawn(move || read_all(stdout));
    let err = std::thread::spawn(move || read_all(stderr));
    let status = wait_with_timeout(&mut child, Duration::from_secs(600), "scripts/run-local.sh with RUN_ONCE=1");
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    let context = format!("exit {status}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(status.success(), "{context}");

    // Every kind the everything sample enables, and only the two a minimal CR gets.
    for object in [
        "deployment.apps/full-cache",
        "service/full-cache",
        "poddisruptionbudget.policy/full-cache",
        "horizontalpodautoscaler.autoscaling/full-cache",
        "servicemonitor.monitoring.coreos.com/full-cache",
        "networkpolicy.networking.k8s.io/full-cache",
        "deployment.apps/my-cache",
        "service/my-cache",
    ] {
        assert!(stdout.lines().any(|l| l.split_whitespace().nth(1) == Some(object)), "{object} not listed\n{context}");
    }
    for absent in [
        "poddisruptionbudget.policy/my-cache",
        "horizontalpodautoscaler.autoscaling/my-cache",
        "networkpolicy.networking.k8s.io/my-cache",
    ] {
        assert!(!stdout.contains(absent), "{absent} listed for a minimal CR\n{context}");
    }
    // The TLS and monitoring ports on the full one's Service.
    let service = stdout.lines().find(|l| l.contains("service/full-cache")).unwrap_or_default();
    assert!(service.contains("11211/TCP,11212/TCP,9150/TCP"), "{context}");

    // Status: both converged at generation 1, each with the four conditions;
    // the referenced Secrets exist, so no SecretNotFound.
    for cr in ["default/my-cache", "production/full-cache"] {
        let header = format!("{cr} (generation 1, observedGeneration 1):");
        let block: Vec<&str> =
            stdout.lines().skip_while(|l| *l != header).skip(1).take_while(|l| l.starts_with("  ")).collect();
        for condition in ["Available=", "Progressing=", "Degraded=", "Ready="] {
            assert!(
                block.iter().any(|l| l.trim_start().starts_with(condition)),
                "{cr}: no {condition} condition\n{context}"
            );
        }
        // kube-scheduler places the Pods on kwok's fake Nodes, which make them Ready.
        assert!(block.iter().any(|l| l.trim_start().starts_with("Ready=True")), "{cr}\n{context}");
    }
    // The Pods' addresses behind each Service: my-cache has one replica,
    // full-cache the three its HPA's minReplicas asks for.
    for (cr, pods) in [("default/my-cache", 1), ("production/full-cache", 3)] {
        let line = stdout.lines().find(|l| l.starts_with(&format!("{cr}: "))).unwrap_or_default();
        let addresses: Vec<&str> = line.split_whitespace().skip(1).collect();
        assert_eq!(addresses.len(), pods, "{cr}: pod addresses {addresses:?}\n{context}");
        assert!(addresses.iter().all(|a| a.starts_with("10.244.")), "{cr}: {addresses:?}\n{context}");
    }
    assert!(stdout.contains("readyReplicas=3 serverList=[\"full-cache.production:11211\"]"), "{context}");
    // The defaults policy was in effect: the minimal CR reads back with the
    // replicas its webhook default gives; the autoscaled one has none.
    assert!(stdout.contains("  replicas=1 readyReplicas=1 serverList=[\"my-cache.default:11211\"]"), "{context}");
    assert!(stdout.contains("  replicas= readyReplicas=3 "), "{context}");
    assert!(!stdout.contains("SecretNotFound"), "{context}");
    assert!(stdout.contains("Created NetworkPolicy full-cache"), "no Created event\n{context}");

    assert_nothing_left(&stdout, &run_dir, &context);
    let _ = std::fs::remove_dir_all(&run_dir);
}

/// Nothing left behind: the operator, the control plane and its children
/// (whose temp dir is named after the control plane's pid) are gone, and so
/// are the kubeconfigs and the pid file.
fn assert_nothing_left(stdout: &str, run_dir: &Path, context: &str) {
    let operator = pid_after(stdout, "operator pid ");
    let plane = pid_after(stdout, "control plane pid ");
    let plane_dir = format!("memcached-control-plane-{plane}-");
    let run_dir_text = run_dir.to_string_lossy().into_owned();
    let left: Vec<(u32, String)> = processes()
        .into_iter()
        .filter(|(pid, cmd)| {
            (*pid == operator && cmd.contains("memcached-operator"))
                || (*pid == plane && cmd.contains("control-plane"))
                || cmd.contains(&plane_dir)
                || cmd.contains(&run_dir_text)
        })
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}\n{context}");
    assert!(!run_dir.join("kubeconfig").exists(), "the kubeconfig outlived the control plane\n{context}");
    assert!(!run_dir.join("pids").exists(), "the pid file outlived the run\n{context}");
    assert!(run_dir.join("operator.log").is_file(), "no operator log\n{context}");
}

/// `make run MODULE=... SAMPLES=...`: the local control plane, then
/// `wasm-operator dev` on that module (RUN_ONCE=1 gives it --once).
#[test]
fn with_a_module_it_runs_wasm_operator_dev_on_the_local_control_plane() {
    require_binaries();
    for built in ["target/release/wasm-operator", "target/greeting.wasm"] {
        assert!(root().join(built).is_file(), "{built} is missing (make test builds it)");
    }
    let run_dir = scratch_dir("run-local-module");
    let samples = scratch_dir("run-local-module-samples");
    std::fs::create_dir_all(&samples).expect("a samples folder");
    std::fs::write(
        samples.join("hello.yaml"),
        "apiVersion: example.c5c3.io/v1\nkind: Greeting\nmetadata: {name: hello}\nspec: {message: hi}\n",
    )
    .expect("a sample");
    let mut child = spawn_script(
        &[
            ("RUN_ONCE", "1"),
            ("LOCAL_CLUSTER", "1"),
            ("RUN_DIR", run_dir.to_str().expect("utf-8 path")),
            ("MODULE", "target/greeting.wasm"),
            ("SAMPLES", samples.to_str().expect("utf-8 path")),
        ],
        &["KUBECONFIG"],
    );
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || read_all(stdout));
    let err = std::thread::spawn(move || read_all(stderr));
    let status = wait_with_timeout(&mut child, Duration::from_secs(300), "scripts/run-local.sh with MODULE");
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    let context = format!("exit {status}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(status.success(), "{context}");
    for expected in [
        "ConfigMap default/hello (of Greeting hello): data {message: hi}",
        "phase: Published in ConfigMap hello",
        "event Normal Created Greeting default/hello: Created ConfigMap hello",
        "converged",
    ] {
        assert!(stdout.contains(expected), "{expected:?} not printed\n{context}");
    }
    // Nothing left behind.
    let dev = pid_after(&stdout, "dev pid ");
    let plane = pid_after(&stdout, "control plane pid ");
    let left: Vec<(u32, String)> = processes()
        .into_iter()
        .filter(|(pid, cmd)| {
            (*pid == dev && cmd.contains("wasm-operator")) || (*pid == plane && cmd.contains("control-plane"))
        })
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}\n{context}");
    assert!(!run_dir.join("pids").exists(), "the pid file outlived the run\n{context}");
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = std::fs::remove_dir_all(&samples);
}

#[test]
fn ctrl_c_stops_the_operator_and_the_control_plane() {
    require_binaries();
    let run_dir = scratch_dir("run-local-ctrl-c");
    let mut child = spawn_script(
        &[("LOCAL_CLUSTER", "1"), ("SAMPLES", "minimal"), ("RUN_DIR", run_dir.to_str().expect("utf-8 path"))],
        &["KUBECONFIG", "RUN_ONCE"],
    );
    let stdout = child.stdout.take();
    let out = std::thread::spawn(move || read_all(stdout));
    // stderr line by line, to see when it is up and running.
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().expect("stderr is piped");
    let err = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = lines_tx.send(line);
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut running = false;
    while !running && Instant::now() < deadline {
        match lines_rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => running = line.contains("running; Ctrl-C stops"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if child.try_wait().expect("polling the script").is_some() {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // What a terminal's Ctrl-C does: SIGINT to the whole foreground group.
    signal_group(&child, libc::SIGINT);
    let status = wait_with_timeout(&mut child, Duration::from_secs(90), "scripts/run-local.sh after Ctrl-C");
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    let context = format!("exit {status}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(running, "it never said it was running\n{context}");
    assert!(stderr.contains("stopping the operator and the control plane"), "{context}");
    assert_nothing_left(&stdout, &run_dir, &context);
    let _ = std::fs::remove_dir_all(&run_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_kubeconfig_it_installs_the_crd_there_and_runs_the_operator() {
    require_binaries();
    let plane = ControlPlane::start_with(Options { controller_manager: false, audit_log: false, ..Options::default() })
        .expect("a control plane");
    let kubeconfig = plane.kubeconfig(User::Admin);
    let client = plane.client(User::Admin).await.expect("a client");
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    assert!(crds.get_opt("memcacheds.memcached.c5c3.io").await.expect("reading CRDs").is_none());

    // kubectl from the envtest folder, first on PATH, as on a developer's machine.
    let path = format!("{}:{}", plane.assets().display(), std::env::var("PATH").unwrap_or_default());
    let home = scratch_dir("run-local-home");
    std::fs::create_dir_all(&home).expect("a HOME");
    let mut child = spawn_script(
        &[
            ("KUBECONFIG", kubeconfig.to_str().expect("utf-8 path")),
            ("PATH", &path),
            ("HOME", home.to_str().expect("utf-8 path")),
        ],
        &["RUN_ONCE", "LOCAL_CLUSTER"],
    );
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || read_all(stdout));
    let err = std::thread::spawn(move || read_all(stderr));

    // The operator reconciles a CR applied to that cluster.
    let memcacheds: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("memcached.c5c3.io", "v1alpha1", "Memcached"),
            "memcacheds",
        ),
    );
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", "Deployment"), "deployments"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut applied = false;
    let mut converged = false;
    while Instant::now() < deadline && !converged {
        if child.try_wait().expect("polling the script").is_some() {
            break;
        }
        if !applied && crds.get_opt("memcacheds.memcached.c5c3.io").await.ok().flatten().is_some() {
            applied = plane.apply_yaml(&sample(&root().join("deploy/samples/minimal.yaml"))).await.is_ok();
        }
        if applied {
            let observed = memcacheds
                .get_opt("my-cache")
                .await
                .ok()
                .flatten()
                .and_then(|m| m.data.pointer("/status/observedGeneration").and_then(serde_json::Value::as_i64));
            converged = observed == Some(1) && deployments.get_opt("my-cache").await.ok().flatten().is_some();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let still_running = child.try_wait().expect("polling the script").is_none();
    signal_group(&child, libc::SIGTERM);
    let status = wait_with_timeout(&mut child, Duration::from_secs(60), "the operator after SIGTERM");
    let stdout = out.join().expect("stdout reader");
    let stderr = err.join().expect("stderr reader");
    let context = format!("exit {status}\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let _ = std::fs::remove_dir_all(&home);
    assert!(applied, "the CRD never appeared in the cluster\n{context}");
    assert!(converged, "the operator did not reconcile my-cache\n{context}");
    assert!(still_running, "the script should run until stopped\n{context}");
    assert!(status.success(), "the operator did not shut down cleanly on SIGTERM\n{context}");
    assert!(stderr.contains("installing the Memcached CRD there"), "{context}");
    assert!(!stderr.contains("starting the control plane"), "it started a control plane of its own\n{context}");
}

fn sample(path: &Path) -> String {
    std::fs::read_to_string(path).expect("reading a sample")
}
