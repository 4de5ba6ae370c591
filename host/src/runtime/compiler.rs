//! Compiling a module version out of the serving process. Compiling a
//! component takes far more memory than running it (the Memcached module:
//! ~0.8 GiB peak before the settings in `engine.rs`, against ~50 MiB for the
//! whole operator serving 1000 parents), so a compile inside the operator can
//! take the pod over its memory limit and the kernel kills the operator,
//! serving version and all. Here a child process of the same binary
//! (`compile-module`) compiles, under its own memory bound (its data segment,
//! `RLIMIT_DATA`) and a deadline, and asks the kernel to pick it first should
//! the pod still run out of memory (`oom_score_adj`). It writes the native
//! code into an on-disk cache keyed by the component's digest, which the
//! operator maps (`Component::deserialize_file`): a compile that fails, runs
//! out of memory or time is an error for that version only.
//!
//! In tiers (`--compile-strategy=tiered`), a version nothing has compiled
//! is first compiled to baseline code (Winch, a fraction of a second), on
//! which it is checked and goes live, while its optimized code (Cranelift)
//! is compiled by a second child at a lower CPU priority and then replaces
//! the baseline code in place (`logic_module.rs`). Only optimized code is
//! kept in the cache: the baseline file is unlinked once mapped.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use wasmtime::Engine;
use wasmtime::component::Component;

/// How new versions are compiled by a long-running operator.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// The binary that compiles (this one: it has the `compile-module`
    /// command and the same engine settings).
    pub program: PathBuf,
    /// Where compiled versions are kept, one file per digest.
    pub cache_dir: PathBuf,
    /// Most memory a compile may take (bytes of data segment), or `None`
    /// for no bound but the pod's.
    pub memory_limit: Option<u64>,
    /// How long a compile may take before it is stopped.
    pub timeout: Duration,
    /// Threads one compile uses: each compiles a function at a time, so
    /// each adds its own peak.
    pub threads: usize,
    /// Compiled versions kept in `cache_dir` (the least recently used go).
    pub keep: usize,
}

/// Which code a compile makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Winch: quick to compile, a little slower to run; a new version
    /// serves on it until its optimized code is ready.
    Baseline,
    /// Cranelift: what every version runs on in the end.
    Optimized,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Baseline => "baseline",
            Tier::Optimized => "optimized",
        }
    }
}

impl std::str::FromStr for Tier {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "baseline" => Ok(Tier::Baseline),
            "optimized" => Ok(Tier::Optimized),
            _ => Err(format!("{text:?} is not a tier (baseline or optimized)")),
        }
    }
}

/// Whether a compile is waited for, or runs beside serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Urgency {
    /// Something waits for it: a version to load or check.
    Waited,
    /// A version already serves on baseline code: the compile yields the
    /// CPU to the operator (a higher nice value).
    Background,
}

/// Compiled versions kept, on disk here and in memory by the hot swap
/// (`hot_swap.rs`), so going back to one costs no compile.
pub const KEEP_COMPILED: usize = 4;
/// The default bound of one compile (`--compile-memory-limit`): the
/// Memcached module needs ~190 MiB on one thread (`make bench-compile`).
pub const DEFAULT_MEMORY_LIMIT: &str = "256Mi";

/// Why a compile gave no code.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("starting the compiler {program}: {error}")]
    Spawn { program: PathBuf, error: std::io::Error },
    #[error("the compile needed more memory than its bound of {} (--compile-memory-limit)", mebibytes(*.limit))]
    OutOfMemory { limit: u64 },
    #[error("the compile was killed (signal {signal}): most likely the pod ran out of memory")]
    Killed { signal: i32 },
    #[error("the compile took longer than {}s (--compile-timeout) and was stopped", .timeout.as_secs())]
    TimedOut { timeout: Duration },
    #[error("{0}")]
    Failed(String),
    #[error("the compile cache {}: {error}", .path.display())]
    Cache { path: PathBuf, error: std::io::Error },
    #[error("the compiled code in {} does not load: {error:#}", .path.display())]
    Load { path: PathBuf, error: wasmtime::Error },
}

/// Milliseconds since `since`, for a log field.
pub(crate) fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn mebibytes(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// Compiles in child processes, one at a time (so the pod holds at most one
/// compile's memory beside the operator), into `options.cache_dir`. A
/// baseline compile, far smaller, does not wait for an optimizing one
/// running in the background: a new version goes live while the last one's
/// optimized code is still being compiled.
pub(crate) struct OutOfProcess {
    options: CompileOptions,
    one_at_a_time: Mutex<()>,
    one_baseline_at_a_time: Mutex<()>,
}

impl OutOfProcess {
    pub(crate) fn new(options: CompileOptions) -> Self {
        Self { options, one_at_a_time: Mutex::new(()), one_baseline_at_a_time: Mutex::new(()) }
    }

    /// The component `bytes` (digest `digest`) compiled for `engine`: from
    /// the cache, or compiled now by a child and cached.
    pub(crate) fn compile(&self, engine: &Engine, digest: &str, bytes: &[u8]) -> Result<Component, CompileError> {
        self.compile_optimized(engine, digest, bytes, Urgency::Waited)
    }

    /// As [`Self::compile`], for a version already serving on baseline
    /// code: the child runs at a lower CPU priority.
    pub(crate) fn compile_in_background(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, CompileError> {
        self.compile_optimized(engine, digest, bytes, Urgency::Background)
    }

    /// The optimized code of `digest` if the cache holds it. Not in turn
    /// with a compile: files only ever appear there whole (renamed into
    /// place), so one is read whole or not at all.
    pub(crate) fn cached(&self, engine: &Engine, digest: &str) -> Option<Component> {
        load_cached(engine, &self.cached_path(engine, digest))
    }

    fn compile_optimized(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
        urgency: Urgency,
    ) -> Result<Component, CompileError> {
        let path = self.cached_path(engine, digest);
        let _turn = self.one_at_a_time.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(component) = load_cached(engine, &path) {
            return Ok(component);
        }
        let started = Instant::now();
        self.compile_to(digest, bytes, &path, Tier::Optimized, urgency)?;
        tracing::info!(digest, took_ms = millis(started), file = %path.display(), background = urgency == Urgency::Background, "compiled a module version in a child process");
        let component = load(engine, &path)?;
        self.evict_beyond_kept();
        Ok(component)
    }

    /// Baseline code of `bytes` for `engine` (a Winch engine), compiled now
    /// by a child. Mapped, then unlinked: the cache keeps optimized code only,
    /// and the mapping outlives the name.
    pub(crate) fn compile_baseline(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, CompileError> {
        let _turn = self.one_baseline_at_a_time.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = self.options.cache_dir.join(format!(".{}-{}.baseline", file_stem(digest), std::process::id()));
        let started = Instant::now();
        self.compile_to(digest, bytes, &path, Tier::Baseline, Urgency::Waited)?;
        let component = load(engine, &path);
        let _ = std::fs::remove_file(&path);
        tracing::info!(
            digest,
            took_ms = millis(started),
            "compiled a module version's baseline code in a child process"
        );
        component
    }

    /// Runs a child compiling `bytes` into `output`, the input in a file
    /// beside it for the time of the compile.
    fn compile_to(
        &self,
        digest: &str,
        bytes: &[u8],
        output: &Path,
        tier: Tier,
        urgency: Urgency,
    ) -> Result<(), CompileError> {
        std::fs::create_dir_all(&self.options.cache_dir)
            .map_err(|error| CompileError::Cache { path: self.options.cache_dir.clone(), error })?;
        let input =
            self.options.cache_dir.join(format!(".{}-{}-{}.wasm", file_stem(digest), std::process::id(), tier.name()));
        std::fs::write(&input, bytes).map_err(|error| CompileError::Cache { path: input.clone(), error })?;
        let compiled = self.run_child(&input, output, tier, urgency);
        let _ = std::fs::remove_file(&input);
        compiled
    }

    /// Native code this binary's `precompile` wrote (digest `digest`),
    /// mapped from a private copy in the cache: only the pages that run
    /// are resident, and they are the page cache's, not the process's own
    /// memory (deserialized from `bytes`, all of it would be). The copy,
    /// not the file it came from: that one may be rewritten in place,
    /// which would take the mapped pages from under the running code.
    pub(crate) fn map_precompiled(
        &self,
        engine: &Engine,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, CompileError> {
        let path = self.cached_path(engine, digest);
        let _turn = self.one_at_a_time.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(component) = load_cached(engine, &path) {
            return Ok(component);
        }
        std::fs::create_dir_all(&self.options.cache_dir)
            .map_err(|error| CompileError::Cache { path: self.options.cache_dir.clone(), error })?;
        let partial = path.with_extension(format!("partial-{}", std::process::id()));
        std::fs::write(&partial, bytes).map_err(|error| CompileError::Cache { path: partial.clone(), error })?;
        // A new file under the name: a copy mapped earlier keeps its pages.
        std::fs::rename(&partial, &path).map_err(|error| CompileError::Cache { path: path.clone(), error })?;
        let component = load(engine, &path)?;
        self.evict_beyond_kept();
        Ok(component)
    }

    /// `<digest>-<engine>.cwasm`: a binary with other engine settings or
    /// another wasmtime never reads this one's files.
    fn cached_path(&self, engine: &Engine, digest: &str) -> PathBuf {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        self.options.cache_dir.join(format!("{}-{:016x}.cwasm", file_stem(digest), hasher.finish()))
    }

    fn run_child(&self, input: &Path, output: &Path, tier: Tier, urgency: Urgency) -> Result<(), CompileError> {
        let mut command = Command::new(&self.options.program);
        command.arg("compile-module").arg("--input").arg(input).arg("--output").arg(output);
        command.arg("--tier").arg(tier.name());
        if urgency == Urgency::Background {
            command.arg("--background");
        }
        if let Some(limit) = self.options.memory_limit {
            command.arg("--memory-limit").arg(limit.to_string());
        }
        // The child's own stray settings must not change what it compiles.
        let threads = self.options.threads.max(1).to_string();
        command.arg("--threads").arg(&threads).env("RAYON_NUM_THREADS", &threads).env("RUST_BACKTRACE", "0");
        command.env_remove("WASM_OPERATOR_MODULES").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child =
            command.spawn().map_err(|error| CompileError::Spawn { program: self.options.program.clone(), error })?;
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut stderr) = stderr {
                let _ = stderr.read_to_string(&mut text);
            }
            text
        });
        let deadline = Instant::now() + self.options.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(Some(status)),
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Ok(None);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(error) => break Err(CompileError::Spawn { program: self.options.program.clone(), error }),
            }
        };
        let stderr = reader.join().unwrap_or_default();
        match status? {
            Some(status) => verdict(status, &stderr, self.options.memory_limit),
            // A compile stuck after running out of memory is out of memory.
            None => match (self.options.memory_limit, out_of_memory(&stderr)) {
                (Some(limit), true) => Err(CompileError::OutOfMemory { limit }),
                _ => Err(CompileError::TimedOut { timeout: self.options.timeout }),
            },
        }
    }

    /// Keeps the `keep` most recently used compiled versions.
    fn evict_beyond_kept(&self) {
        let Ok(entries) = std::fs::read_dir(&self.options.cache_dir) else { return };
        let mut compiled: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "cwasm"))
            .filter_map(|path| Some((path.metadata().and_then(|m| m.modified()).ok()?, path)))
            .collect();
        compiled.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
        for (_, path) in compiled.into_iter().skip(self.options.keep) {
            // Mapped by a version still held? Its pages stay until unmapped.
            if let Err(error) = std::fs::remove_file(&path) {
                tracing::warn!(file = %path.display(), error = %error, "cannot remove an old compiled version");
            }
        }
    }
}

/// What the child's exit says of the compile.
fn verdict(status: ExitStatus, stderr: &str, limit: Option<u64>) -> Result<(), CompileError> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return Ok(());
    }
    match (limit, out_of_memory(stderr)) {
        (Some(limit), true) => Err(CompileError::OutOfMemory { limit }),
        _ => match status.signal() {
            Some(signal) if signal == libc::SIGKILL => Err(CompileError::Killed { signal }),
            _ => {
                let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
                Err(CompileError::Failed(last.trim_start_matches("error: ").to_owned()))
            }
        },
    }
}

/// Rust's allocation failure message, or an mmap refused (ENOMEM).
fn out_of_memory(stderr: &str) -> bool {
    ["memory allocation of", "out of memory", "Cannot allocate memory", "os error 12"]
        .iter()
        .any(|says| stderr.contains(says))
}

/// In the compile child: a panic prints its message and exits at once. The
/// default hook may allocate (a backtrace), which under the memory bound
/// can fail and leave the process stuck instead of exiting.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        use std::io::Write;
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("a panic");
        let _ = writeln!(std::io::stderr(), "error: the compiler panicked: {message}");
        std::process::exit(101);
    }));
}

fn load(engine: &Engine, path: &Path) -> Result<Component, CompileError> {
    // SAFETY: the file is what this binary's own `compile-module` wrote into
    // the operator's private cache directory; wasmtime still checks its
    // version, engine settings and CPU features before mapping it.
    unsafe { Component::deserialize_file(engine, path) }
        .map_err(|error| CompileError::Load { path: path.to_owned(), error })
}

/// The cached file at `path`, if there is one and it loads; one that is
/// damaged or written by another build is replaced by the caller.
fn load_cached(engine: &Engine, path: &Path) -> Option<Component> {
    if !path.is_file() {
        return None;
    }
    match load(engine, path) {
        Ok(component) => {
            mark_used(path);
            Some(component)
        }
        Err(error) => {
            tracing::warn!(file = %path.display(), error = %error, "a cached compiled version does not load; writing it again");
            None
        }
    }
}

fn mark_used(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// `sha256:abc…` as a file name.
fn file_stem(digest: &str) -> String {
    digest.replace(':', "-")
}

/// The `compile-module` command, run by [`OutOfProcess`] in a child: binds
/// its own memory, volunteers to be the first killed, compiles `input` for
/// `engine` and writes the native code to `output` (atomically: a partial
/// file is never seen there).
pub fn compile_in_this_process(
    engine: &Engine,
    input: &Path,
    output: &Path,
    memory_limit: Option<u64>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    be_killed_first();
    if let Some(limit) = memory_limit {
        bind_data_segment(limit).context("setting the compile's memory bound (RLIMIT_DATA)")?;
    }
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let compiled = engine.precompile_component(&bytes).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    drop(bytes);
    let partial = output.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, &compiled).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, output).with_context(|| format!("renaming {} to {}", partial.display(), output.display()))
}

/// A background compile (a version already serving on baseline code)
/// leaves the CPU to the operator: nice 10, as far as the kernel allows.
pub fn yield_cpu() {
    // SAFETY: setpriority takes plain integers; 0 is this process.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) } != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower the compile's priority");
    }
}

/// If the pod runs out of memory anyway, the kernel picks this process, not
/// the operator serving beside it (raising one's own score needs no
/// privilege).
fn be_killed_first() {
    if let Err(error) = std::fs::write("/proc/self/oom_score_adj", "1000") {
        tracing::debug!(error = %error, "cannot raise oom_score_adj");
    }
}

fn bind_data_segment(limit: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: limit as libc::rlim_t };
    // SAFETY: setrlimit reads the struct it is given and nothing else.
    if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn an_allocation_failure_under_a_bound_is_out_of_memory() {
        let aborted = ExitStatus::from_raw(libc::SIGABRT);
        let error = verdict(aborted, "memory allocation of 4194304 bytes failed\n", Some(64 << 20)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the compile needed more memory than its bound of 64 MiB (--compile-memory-limit)"
        );
    }

    #[test]
    fn a_kill_is_named_and_an_error_keeps_its_last_line() {
        let killed = ExitStatus::from_raw(libc::SIGKILL);
        assert!(matches!(verdict(killed, "", Some(1 << 30)), Err(CompileError::Killed { signal: 9 })));
        let failed = ExitStatus::from_raw(1 << 8);
        let error = verdict(failed, "warming up\nerror: failed to parse WebAssembly module\n", None).unwrap_err();
        assert_eq!(error.to_string(), "failed to parse WebAssembly module");
        assert!(verdict(ExitStatus::from_raw(0), "", None).is_ok());
    }
}
