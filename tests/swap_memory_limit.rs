//! A hot swap in the Deployment as shipped (issue 25): `memcached-operator
//! run` inside a memory cgroup at deploy/manager's limit, with its
//! environment, starting on the Memcached module precompiled (as the image
//! does), against the real API server and a real OCI registry. A LogicModule
//! then names a new version of the Memcached module that nothing has
//! compiled: the operator compiles it out of its own process, under the
//! compile's bound, and swaps it in without ever being killed. With a bound
//! below what the compile needs, the version is refused (`CompileFailed`)
//! and the serving one keeps reconciling; with no bound, in a pod too small
//! for the compile, the kernel kills the compile, not the operator. Two
//! replicas, each in its own
//! cgroup at the limit, survive the swap, and the standby takes over on the
//! new version when the leader stops.
//!
//! Uses the cgroup v1 memory controller at /sys/fs/cgroup/memory, or cgroup
//! v2 at /sys/fs/cgroup; where neither can be written (not root, a
//! read-only cgroupfs) each test says so and passes without running.

#[path = "logic_module_support.rs"]
mod logic_module_support;
#[path = "metrics_support.rs"]
mod metrics_support;
#[allow(dead_code)]
#[path = "oci_registry.rs"]
mod oci_registry;
#[path = "operator_support.rs"]
mod operator_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use control_plane::User;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use logic_module_support::{LOGIC_MODULE_CRD, built, has, wait_logic_module_named};
use oci_registry::OciRegistry;
use operator_support::*;
use serde_json::{Value, json};
use wasm_operator::runtime::logic_module::digest;
use wasm_operator::runtime::oci::{Registry, RegistryOptions};

/// The LogicModule of the Memcached module is cluster-scoped and named
/// after it: this binary's tests take turns.
static MEMCACHED_LOGIC_MODULE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn repo() -> PathBuf {
    control_plane::repo_root()
}

/// deploy/manager/deployment.yaml, read once.
fn shipped_deployment() -> &'static Value {
    static DEPLOYMENT: OnceLock<Value> = OnceLock::new();
    DEPLOYMENT.get_or_init(|| {
        let text = std::fs::read_to_string(repo().join("deploy/manager/deployment.yaml")).expect("deploy/manager");
        serde_norway::from_str(&text).expect("the Deployment parses")
    })
}

/// The container it runs.
fn shipped_container() -> &'static Value {
    &shipped_deployment()["spec"]["template"]["spec"]["containers"][0]
}

/// A quantity deploy/ writes in Mi, in bytes.
fn mebibytes(quantity: &Value) -> u64 {
    let text = quantity.as_str().unwrap_or_else(|| panic!("{quantity} is not a quantity"));
    let number: u64 =
        text.strip_suffix("Mi").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}: the test reads Mi"));
    number << 20
}

/// The flags it passes.
fn shipped_args() -> Vec<&'static str> {
    shipped_container()["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// Its memory limit, in bytes.
fn shipped_memory_limit() -> u64 {
    mebibytes(&shipped_container()["resources"]["limits"]["memory"])
}

/// The size limit of its /tmp emptyDir, where compiled versions are kept.
fn shipped_tmp_size_limit() -> u64 {
    let volumes = shipped_deployment()["spec"]["template"]["spec"]["volumes"].as_array().expect("volumes");
    let tmp = volumes.iter().find(|v| v["name"] == "tmp").expect("a tmp volume");
    mebibytes(&tmp["emptyDir"]["sizeLimit"])
}

/// Its plain environment values (those not from the downward API).
fn shipped_environment() -> Vec<(String, String)> {
    let env = shipped_container()["env"].as_array().cloned().unwrap_or_default();
    env.iter()
        .filter_map(|e| Some((e["name"].as_str()?.to_owned(), e["value"].as_str()?.to_owned())))
        .filter(|(name, _)| name != "HOME")
        .collect()
}

/// A memory cgroup of its own, removed (and anything left in it killed)
/// when dropped.
struct MemoryCgroup {
    dir: PathBuf,
    v2: bool,
    limit: u64,
}

impl MemoryCgroup {
    /// `None`, with the reason printed, where this machine cannot make one.
    fn create(name: &str, limit: u64) -> Option<Self> {
        let name = format!("wasm-operator-{name}-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let made = if v1.join("memory.limit_in_bytes").is_file() {
            let dir = v1.join(&name);
            std::fs::create_dir(&dir)
                .and_then(|()| std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string()))
                .map(|()| Self { dir, v2: false, limit })
        } else if std::fs::read_to_string(v2.join("cgroup.controllers")).is_ok_and(|c| c.contains("memory")) {
            let dir = v2.join(&name);
            std::fs::create_dir(&dir)
                .and_then(|()| std::fs::write(dir.join("memory.max"), limit.to_string()))
                .and_then(|()| std::fs::write(dir.join("memory.swap.max"), "0").or(Ok(())))
                .map(|()| Self { dir, v2: true, limit })
        } else {
            Err(std::io::Error::other("no memory controller at /sys/fs/cgroup/memory (v1) or /sys/fs/cgroup (v2)"))
        };
        match made {
            Ok(cgroup) => Some(cgroup),
            Err(error) => {
                eprintln!(
                    "SKIPPED: cannot create a memory cgroup ({error}); this test needs root and a writable cgroupfs"
                );
                None
            }
        }
    }

    /// `program args` started inside this cgroup (a shell joins it, then
    /// execs the program, so nothing runs outside it first).
    fn command(&self, program: &Path, args: &[String]) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(self.dir.join("cgroup.procs"))
            .arg(program)
            .args(args);
        command
    }

    /// Processes the kernel's OOM killer killed in it.
    fn oom_kills(&self) -> u64 {
        let file = if self.v2 { "memory.events" } else { "memory.oom_control" };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
    }

    /// The most memory it held at once.
    fn peak_bytes(&self) -> u64 {
        let file = if self.v2 { "memory.peak" } else { "memory.max_usage_in_bytes" };
        std::fs::read_to_string(self.dir.join(file)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    fn pids(&self) -> Vec<i32> {
        let text = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        text.lines().filter_map(|l| l.trim().parse().ok()).collect()
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for pid in pids {
                // SAFETY: a signal to a process this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The Memcached module compiled ahead, as the image ships it (compiled
/// outside any cgroup, once per test binary).
fn v1_precompiled() -> PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let file = repo().join("target/test-swap-memory-limit/memcached-v1.cwasm");
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("a folder for it");
        let done = Command::new(repo().join("target/release/memcached-operator"))
            .args(["precompile", "-o"])
            .arg(&file)
            .status()
            .expect("running memcached-operator precompile");
        assert!(done.success(), "memcached-operator precompile failed");
        file
    })
    .clone()
}

/// The Memcached module with a custom section appended: the same logic, a
/// digest nothing has compiled.
fn memcached_with_mark(mark: &str) -> Vec<u8> {
    let mut bytes = built("memcached.wasm");
    let name = b"swap-memory-limit-test";
    let mut payload = vec![u8::try_from(name.len()).expect("a short name")];
    payload.extend_from_slice(name);
    payload.extend_from_slice(format!("{mark}-{}-{:?}", std::process::id(), std::time::SystemTime::now()).as_bytes());
    bytes.push(0);
    bytes.push(u8::try_from(payload.len()).expect("a short section"));
    bytes.extend_from_slice(&payload);
    bytes
}

fn cache_dir(operator: &str) -> PathBuf {
    std::env::temp_dir().join(format!("compile-cache-{operator}-{}", std::process::id()))
}

/// One `memcached-operator run` in its cgroup, logging JSON to a buffer.
struct Operator {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    cgroup: MemoryCgroup,
    name: &'static str,
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Compiled code of up to 18 MB a run: not left behind in the temp dir.
        let _ = std::fs::remove_dir_all(cache_dir(self.name));
    }
}

impl Operator {
    fn start(ns: &TestNamespace<'_>, name: &'static str, registry: &str, extra: &[&str]) -> Option<Self> {
        Self::start_on(ns, name, registry, extra, shipped_memory_limit(), &v1_precompiled())
    }

    /// Serving the precompiled `module` file, in a cgroup of `limit` bytes.
    fn start_on(
        ns: &TestNamespace<'_>,
        name: &'static str,
        registry: &str,
        extra: &[&str],
        limit: u64,
        module: &Path,
    ) -> Option<Self> {
        let cgroup = MemoryCgroup::create(name, limit)?;
        let cache = cache_dir(name);
        let _ = std::fs::remove_dir_all(&cache);
        let mut args: Vec<String> = ["run", "--namespace", &ns.namespace, "--leader-election-namespace", &ns.namespace]
            .into_iter()
            .map(str::to_owned)
            .collect();
        args.extend(["--leader-election-id".into(), format!("swap-memory-{}", ns.namespace)]);
        args.extend(
            ["--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0"].map(String::from),
        );
        args.extend(["--logic-modules".into(), "--insecure-registry".into(), registry.to_owned()]);
        args.extend(["--registry-poll-interval".into(), "1s".into()]);
        args.push(format!("--module={}", module.display()));
        args.push("--allow-precompiled".into());
        args.push(format!("--compile-cache-dir={}", cache.display()));
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let mut command = cgroup.command(&repo().join("target/release/memcached-operator"), &args);
        command
            .envs(shipped_environment())
            .env("KUBECONFIG", ns.plane.kubeconfig(User::Operator))
            .env("POD_NAME", format!("{name}-{}", std::process::id()))
            .env_remove("WASM_OPERATOR_COMPILE_MEMORY_LIMIT")
            .stderr(Stdio::piped())
            .stdout(Stdio::null());
        let mut child = command.spawn().expect("starting the operator");
        let lines = collect_stderr(&mut child);
        Some(Self { child, lines, cgroup, name })
    }

    fn logs(&self) -> Vec<Value> {
        self.lines.lock().expect("the log").iter().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    fn log_text(&self) -> String {
        self.lines.lock().expect("the log").join("\n")
    }

    async fn wait_log(&self, message: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually_within(Duration::from_secs(120), &format!("{}: the log line {message:?}", self.name), || async {
            self.assert_alive();
            self.logs().into_iter().find(|line| line["message"] == json!(message) && check(line))
        })
        .await
    }

    /// Fails the test, with the log and the cgroup's figures, if the
    /// operator is gone or anything in its cgroup was OOM-killed.
    fn assert_alive(&self) {
        self.assert_running();
        assert_eq!(self.cgroup.oom_kills(), 0, "{}: nothing OOM-killed; its log:\n{}", self.name, self.log_text());
    }

    /// Fails the test, with the log and the cgroup's figures, if the
    /// operator process is gone.
    fn assert_running(&self) {
        let pid = self.child.id();
        let gone = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| stat.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')))
            .unwrap_or(true);
        assert!(
            !gone,
            "{} was killed (oom_kill {} in its cgroup, peak {} MiB); its log:\n{}",
            self.name,
            self.cgroup.oom_kills(),
            self.cgroup.peak_bytes() >> 20,
            self.log_text()
        );
    }

    fn terminate(&self) {
        let pid = i32::try_from(self.child.id()).expect("a pid");
        // SAFETY: a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    fn report(&self, what: &str) {
        eprintln!(
            "{}: {what}: cgroup peak {} MiB of {} MiB, oom_kill {}",
            self.name,
            self.cgroup.peak_bytes() >> 20,
            self.cgroup.limit >> 20,
            self.cgroup.oom_kills()
        );
    }
}

struct Scene {
    ns: TestNamespace<'static>,
    registry: OciRegistry,
    logic_modules: Api<DynamicObject>,
}

impl Scene {
    async fn new(prefix: &str) -> Self {
        let ns = TestNamespace::new(prefix).await;
        ns.plane.apply_yaml(LOGIC_MODULE_CRD).await.expect("installing the LogicModule CRD");
        let registry = OciRegistry::start(prefix);
        let logic_modules =
            Api::all_with(ns.client.clone(), &gvk("wasm-operator.c5c3.io", "v1alpha1", "LogicModule", "logicmodules"));
        let _ = logic_modules.delete("memcached", &Default::default()).await;
        eventually("no LogicModule memcached left by another test", || async {
            logic_modules.get_opt("memcached").await.ok().flatten().is_none().then_some(())
        })
        .await;
        Self { ns, registry, logic_modules }
    }

    /// `bytes` pushed; its reference pinned by digest.
    async fn publish(&self, bytes: Vec<u8>, tag: &str) -> String {
        let oci = Registry::new(RegistryOptions {
            insecure: vec![self.registry.address.clone()],
            ..RegistryOptions::default()
        });
        oci.push(bytes, &format!("{}/modules/memcached:{tag}", self.registry.address)).await.expect("pushing")
    }

    async fn point_at(&self, image: &str) {
        let resource: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "wasm-operator.c5c3.io/v1alpha1", "kind": "LogicModule",
            "metadata": {"name": "memcached"}, "spec": {"image": image},
        }))
        .expect("a LogicModule");
        if self.logic_modules.create(&PostParams::default(), &resource).await.is_err() {
            let patch = Patch::Merge(json!({"spec": {"image": image}}));
            self.logic_modules.patch("memcached", &PatchParams::default(), &patch).await.expect("pointing it at image");
        }
    }

    async fn wait_status(&self, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        wait_logic_module_named(&self.logic_modules, "memcached", what, Duration::from_secs(180), check).await
    }

    /// The Deployment of `name` once it has `replicas`.
    async fn wait_replicas(&self, name: &str, replicas: i64) {
        let deployments = self.ns.api(&resource_of("Deployment"));
        eventually_within(Duration::from_secs(60), &format!("{name} at {replicas} replicas"), || async {
            let deployment = deployments.get_opt(name).await.ok().flatten()?;
            (deployment.data["spec"]["replicas"] == replicas).then_some(())
        })
        .await;
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        // The next test of this binary deletes it too; a quick try here
        // keeps the control plane tidy.
        let logic_modules = self.logic_modules.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(runtime) = runtime {
                let _ = runtime.block_on(logic_modules.delete("memcached", &Default::default()));
            }
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swap_to_a_version_nothing_compiled_goes_live_within_the_shipped_limit() {
    let _turn = MEMCACHED_LOGIC_MODULE.lock().await;
    let scene = Scene::new("swap-limit").await;
    let ns = &scene.ns;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let Some(operator) = Operator::start(ns, "leader", &scene.registry.address, &["--leader-elect=false"]) else {
        return;
    };
    scene.wait_replicas("cache", 1).await;
    operator.report("serving v1");

    let v2 = memcached_with_mark("live");
    let v2_pinned = scene.publish(v2.clone(), "v2").await;
    scene.point_at(&v2_pinned).await;
    let status = scene
        .wait_status("v2 verified and active", |s| {
            operator.assert_alive();
            has(s, "Verified", "True", "Verified") && has(s, "Active", "True", "Serving")
        })
        .await;
    assert_eq!(status["activeDigest"], digest(&v2));
    operator.wait_log("compiled a module version in a child process", |l| l["digest"] == digest(&v2)).await;
    operator.wait_log("module version swapped in; rolling out", |l| l["to"] == digest(&v2)).await;

    // And it reconciles on v2.
    ns.set_spec("cache", json!({"replicas": 2})).await;
    scene.wait_replicas("cache", 2).await;
    operator.assert_alive();
    operator.report("after the swap");
    assert!(
        operator.cgroup.peak_bytes() < shipped_memory_limit(),
        "the operator and its compile stayed under the limit"
    );

    // The emptyDir holds the versions the host keeps, one being written and
    // its input beside them.
    let compiled: Vec<u64> = std::fs::read_dir(cache_dir("leader"))
        .expect("the compile cache")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect();
    // v1 as shipped (precompiled), copied there to be mapped, and v2.
    assert_eq!(compiled.len(), 2, "v1's copy and v2 compiled, nothing else left behind");
    let kept = u64::try_from(wasm_operator::runtime::compiler::KEEP_COMPILED).expect("a count");
    let worst = (kept + 1) * compiled[0] + u64::try_from(v2.len()).expect("a size");
    eprintln!(
        "compiled Memcached: {} KiB; the emptyDir needs {} KiB of {} KiB",
        compiled[0] >> 10,
        worst >> 10,
        shipped_tmp_size_limit() >> 10
    );
    assert!(worst <= shipped_tmp_size_limit() * 3 / 4, "the emptyDir holds the kept versions with a quarter to spare");
}

/// In tiers (`--compile-strategy=tiered`): the new version goes live on
/// baseline code, its optimized code replaces it in place, and the pod holds
/// both compiles (one of each may run at once) within the shipped limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_tiers_a_swap_goes_live_on_baseline_code_and_is_tiered_up_within_the_shipped_limit() {
    let _turn = MEMCACHED_LOGIC_MODULE.lock().await;
    let scene = Scene::new("swap-tiers").await;
    let ns = &scene.ns;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    // deploy/ ships this strategy: this test is the shipped swap.
    assert!(shipped_args().contains(&"--compile-strategy=tiered"), "deploy/manager's args: {:?}", shipped_args());
    let args = ["--leader-elect=false", "--compile-strategy=tiered", "--metrics-secure=false"];
    let Some(operator) = Operator::start(ns, "tiered", &scene.registry.address, &args) else { return };
    scene.wait_replicas("cache", 1).await;
    let metrics = operator.wait_log("serving /metrics, /healthz and /readyz", |_| true).await;
    let metrics = metrics["metrics_address"].as_str().expect("the metrics address").to_owned();
    // wasm_operator_module_baseline_code: each serving version's digest
    // and value.
    let baseline_code = || {
        let metrics = metrics.clone();
        async move {
            let reply = metrics_support::http_get(&metrics, "/metrics", None).await.expect("a scrape");
            let series = reply.body.lines().filter(|l| l.starts_with("wasm_operator_module_baseline_code{"));
            series
                .map(|l| {
                    let digest = l.split("digest=\"").nth(1).and_then(|d| d.split('"').next()).unwrap_or_default();
                    (digest.to_owned(), l.rsplit(' ').next().unwrap_or_default().to_owned())
                })
                .collect::<Vec<_>>()
        }
    };
    let v1 = baseline_code().await;
    assert!(v1.len() == 1 && v1[0].1 == "0", "v1 serves on its precompiled code: {v1:?}");

    let v2 = memcached_with_mark("tiered");
    scene.point_at(&scene.publish(v2.clone(), "v2").await).await;
    scene
        .wait_status("v2 verified and active", |s| {
            operator.assert_alive();
            has(s, "Verified", "True", "Verified") && has(s, "Active", "True", "Serving")
        })
        .await;
    let on_baseline = baseline_code().await;
    let tiered_up = |l: &Value| l["digest"] == digest(&v2);
    // Unless the optimizing compile (seconds) already ended, v2 says it
    // serves on baseline code.
    if !operator
        .logs()
        .iter()
        .any(|l| l["message"] == "a version's optimized code replaced its baseline code" && tiered_up(l))
    {
        assert_eq!(on_baseline, [(digest(&v2), "1".to_owned())], "v2 alone, live on baseline code");
    }
    operator
        .wait_log("compiled a module version's baseline code in a child process", |l| l["digest"] == digest(&v2))
        .await;
    operator.wait_log("a version's optimized code replaced its baseline code", tiered_up).await;
    assert_eq!(baseline_code().await, [(digest(&v2), "0".to_owned())], "v2 alone, on its optimized code");
    ns.set_spec("cache", json!({"replicas": 2})).await;
    scene.wait_replicas("cache", 2).await;
    operator.assert_alive();
    operator.report("after the swap in tiers");
    assert!(
        operator.cgroup.peak_bytes() < shipped_memory_limit(),
        "both compiles and the operator stayed under the limit"
    );
    let compiled: Vec<_> = std::fs::read_dir(cache_dir("tiered"))
        .expect("the compile cache")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!compiled.iter().any(|name| name.ends_with(".baseline")), "no baseline code kept: {compiled:?}");
    let cwasm = compiled.iter().filter(|name| name.ends_with(".cwasm")).count();
    assert_eq!(cwasm, 2, "v1's copy and v2's optimized code: {compiled:?}");
}

/// The image's precompiled module is mapped from a copy in the operator's
/// own compile cache: only the code that runs is resident (and it is page
/// cache, not the process's memory), and the file it came from may be
/// rewritten in place without taking the pages from under the running code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_precompiled_module_is_mapped_from_a_private_copy_so_its_file_may_change_in_place() {
    let _turn = MEMCACHED_LOGIC_MODULE.lock().await;
    let scene = Scene::new("precompiled-map").await;
    let ns = &scene.ns;
    let module = repo().join(format!("target/test-swap-memory-limit/memcached-v1-copy-{}.cwasm", std::process::id()));
    std::fs::copy(v1_precompiled(), &module).expect("a copy of the precompiled module");
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let limit = shipped_memory_limit();
    let args = ["--leader-elect=false"];
    let Some(operator) = Operator::start_on(ns, "mapper", &scene.registry.address, &args, limit, &module) else {
        return;
    };
    scene.wait_replicas("cache", 1).await;

    let maps = std::fs::read_to_string(format!("/proc/{}/maps", operator.child.id())).expect("its memory maps");
    let cache = cache_dir("mapper").display().to_string();
    let mapped: Vec<&str> = maps.lines().filter(|l| l.contains(&cache) && l.ends_with(".cwasm")).collect();
    assert!(!mapped.is_empty(), "the module's code is mapped from the compile cache ({cache}):\n{maps}");
    assert!(!maps.contains(&module.display().to_string()), "not from the file it came from");
    assert!(
        mapped.iter().any(|l| l.split_whitespace().nth(1).is_some_and(|perms| perms.contains('x'))),
        "its code runs from there:\n{}",
        mapped.join("\n")
    );

    // The file rewritten in place (the same inode): the operator refuses
    // what it now holds as a new version, and keeps serving the one mapped.
    std::fs::write(&module, b"not a module any more").expect("rewriting the file in place");
    operator.wait_log("module version refused; the active version keeps serving", |_| true).await;
    ns.set_spec("cache", json!({"replicas": 2})).await;
    scene.wait_replicas("cache", 2).await;
    operator.assert_alive();
    let _ = std::fs::remove_file(&module);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_beyond_its_bound_is_refused_and_the_serving_version_keeps_reconciling() {
    let _turn = MEMCACHED_LOGIC_MODULE.lock().await;
    let scene = Scene::new("swap-bound").await;
    let ns = &scene.ns;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let args = ["--leader-elect=false", "--compile-memory-limit=40Mi"];
    let Some(operator) = Operator::start(ns, "bounded", &scene.registry.address, &args) else { return };
    scene.wait_replicas("cache", 1).await;

    let v2 = memcached_with_mark("bounded");
    scene.point_at(&scene.publish(v2.clone(), "v2").await).await;
    let status = scene.wait_status("v2 refused", |s| has(s, "Verified", "False", "CompileFailed")).await;
    let message = condition(&status, "Verified")["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("more memory than its bound of 40 MiB"), "names the cause: {message}");
    assert!(has(&status, "Active", "False", "Refused"), "{status:#}");
    assert_ne!(status["activeDigest"], digest(&v2), "v1 keeps serving: {status:#}");
    let notes = ns_events(&scene, "CompileFailed").await;
    assert!(notes.iter().any(|n| n.contains("40 MiB")), "a Warning event names the cause: {notes:?}");

    // v1 still reconciles.
    ns.set_spec("cache", json!({"replicas": 3})).await;
    scene.wait_replicas("cache", 3).await;
    operator.assert_alive();
    operator.report("after the refused swap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_the_pod_cannot_hold_is_killed_and_the_operator_is_not() {
    let _turn = MEMCACHED_LOGIC_MODULE.lock().await;
    let scene = Scene::new("swap-pod-oom").await;
    let ns = &scene.ns;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    // No bound on the compile (0), and a pod far smaller than the compile
    // needs (~190 MiB): the kernel kills a process of the pod, and the one
    // it picks must be the compile, never the operator.
    let args = ["--leader-elect=false", "--compile-memory-limit=0"];
    let Some(operator) =
        Operator::start_on(ns, "small-pod", &scene.registry.address, &args, 128 << 20, &v1_precompiled())
    else {
        return;
    };
    scene.wait_replicas("cache", 1).await;

    let v2 = memcached_with_mark("small-pod");
    scene.point_at(&scene.publish(v2.clone(), "v2").await).await;
    let status = scene
        .wait_status("v2 refused", |s| {
            operator.assert_running();
            has(s, "Verified", "False", "CompileFailed")
        })
        .await;
    let message = condition(&status, "Verified")["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("was killed"), "names the cause: {message}");
    assert_ne!(status["activeDigest"], digest(&v2), "v1 keeps serving: {status:#}");
    assert!(operator.cgroup.oom_kills() >= 1, "the kernel killed the compile");
    ns.set_spec("cache", json!({"replicas": 2})).await;
    scene.wait_replicas("cache", 2).await;
    operator.assert_running();
    operator.report("after the compile was killed");
}

/// Warning events of `reason` about the LogicModule (cluster-scoped, so in
/// the operator's event namespace: any).
async fn ns_events(scene: &Scene, reason: &str) -> Vec<String> {
    let events: Api<DynamicObject> =
        Api::all_with(scene.ns.client.clone(), &gvk("events.k8s.io", "v1", "Event", "events"));
    eventually_within(Duration::from_secs(30), &format!("a {reason} event"), || async {
        let list = events.list(&Default::default()).await.ok()?;
        let notes: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.data["reason"] == reason && e.data["regarding"]["name"] == "memcached")
            .filter_map(|e| e.data["note"].as_str().map(str::to_owned))
            .collect();
        (!notes.is_empty()).then_some(notes)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_survive_a_swap_and_the_standby_takes_over_on_the_new_version() {
    let _turn = MEMCACHED_LOGIC_MODULE.lock().await;
    let scene = Scene::new("swap-ha").await;
    let ns = &scene.ns;
    ns.create_memcached("cache", json!({"replicas": 1})).await;
    let Some(leader) = Operator::start(ns, "replica-a", &scene.registry.address, &[]) else { return };
    leader.wait_log("became the leader", |_| true).await;
    scene.wait_replicas("cache", 1).await;
    let Some(standby) = Operator::start(ns, "replica-b", &scene.registry.address, &[]) else { return };
    standby.wait_log("another replica is the leader; waiting", |_| true).await;

    let v2 = memcached_with_mark("ha");
    scene.point_at(&scene.publish(v2.clone(), "v2").await).await;
    let status = scene
        .wait_status("v2 active", |s| {
            leader.assert_alive();
            standby.assert_alive();
            has(s, "Active", "True", "Serving")
        })
        .await;
    assert_eq!(status["activeDigest"], digest(&v2));
    // The standby compiled it ahead too, in its own pod's bound.
    standby.wait_log("compiled a module version in a child process", |l| l["digest"] == digest(&v2)).await;
    standby.wait_log("the leader serves a version held compiled here; a takeover starts on it", |_| true).await;
    leader.report("leader after the swap");
    standby.report("standby after the swap");

    leader.terminate();
    standby.wait_log("became the leader", |_| true).await;
    standby
        .wait_log("taking over on the version the previous leader served (compiled ahead)", |l| l["to"] == digest(&v2))
        .await;
    ns.set_spec("cache", json!({"replicas": 2})).await;
    scene.wait_replicas("cache", 2).await;
    standby.assert_alive();
    standby.report("new leader");
}
