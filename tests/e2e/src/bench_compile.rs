//! `make bench-compile`: what compiling a module version costs the child
//! process `wasm-operator run` compiles it in (issue 25): peak resident
//! memory and wall time per module and compile thread count, each run
//! measured by the kernel (`wait4`'s `ru_maxrss`), with the output's size
//! (what the on-disk cache holds per version). `--baseline BINARY` runs an
//! older build's in-process `precompile` beside it, in the same run.
//!
//! Usage: bench-compile [--host BINARY] [--baseline BINARY] [--modules A.wasm,B.wasm]
//!                      [--threads 1,2] [--runs N]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Args {
    host: PathBuf,
    baseline: Option<PathBuf>,
    modules: Vec<PathBuf>,
    threads: Vec<u32>,
    runs: usize,
}

fn parse_args() -> Result<Args, String> {
    let root = control_plane::repo_root();
    let mut args = Args {
        host: root.join("target/release/wasm-operator"),
        baseline: None,
        modules: vec![root.join("target/memcached.wasm"), root.join("target/greeting.wasm")],
        threads: vec![1, 2],
        runs: 3,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = || given.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--host" => args.host = value()?.into(),
            "--baseline" => args.baseline = Some(value()?.into()),
            "--modules" => args.modules = value()?.split(',').map(PathBuf::from).collect(),
            "--threads" => {
                args.threads = value()?
                    .split(',')
                    .map(|t| t.parse().map_err(|_| format!("--threads: {t:?} is not a number")))
                    .collect::<Result<_, _>>()?
            }
            "--runs" => args.runs = value()?.parse().map_err(|_| "--runs: not a number".to_owned())?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

/// What compiles: this build's child-process command, or an older build's
/// in-process `precompile`.
enum Compiler<'a> {
    ThisBuild(&'a Path),
    Baseline(&'a Path),
}

impl Compiler<'_> {
    fn label(&self) -> &'static str {
        match self {
            Compiler::ThisBuild(_) => "this build (compile-module)",
            Compiler::Baseline(_) => "baseline (precompile)",
        }
    }

    fn command(&self, module: &Path, output: &Path, threads: u32) -> Command {
        match self {
            Compiler::ThisBuild(host) => {
                let mut command = Command::new(host);
                command.arg("compile-module").arg("--input").arg(module).arg("--output").arg(output);
                command.arg("--threads").arg(threads.to_string()).env("RAYON_NUM_THREADS", threads.to_string());
                command
            }
            Compiler::Baseline(binary) => {
                let mut command = Command::new(binary);
                command.arg("--module").arg(module).arg("precompile").arg("-o").arg(output);
                command.env("RAYON_NUM_THREADS", threads.to_string());
                command
            }
        }
    }
}

/// One compile: its peak resident memory and how long it took.
struct Measured {
    peak_bytes: u64,
    took: Duration,
    output_bytes: u64,
}

fn measure(mut command: Command, output: &Path) -> Result<Measured, String> {
    let _ = std::fs::remove_file(output);
    let started = Instant::now();
    let child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| format!("starting: {e}"))?;
    let pid = i32::try_from(child.id()).map_err(|e| e.to_string())?;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it for our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child and writes into the two locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = started.elapsed();
    if waited != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr {
            use std::io::Read;
            let _ = pipe.read_to_string(&mut stderr);
        }
        return Err(format!("the compile failed (status {status}): {}", stderr.trim()));
    }
    let output_bytes = std::fs::metadata(output).map(|m| m.len()).map_err(|e| format!("no output: {e}"))?;
    // ru_maxrss is in KiB on Linux.
    Ok(Measured { peak_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024, took, output_bytes })
}

fn median<T: Copy + Ord>(mut values: Vec<T>) -> (T, T, T) {
    values.sort();
    (values[0], values[values.len() / 2], values[values.len() - 1])
}

fn mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / f64::from(1 << 20))
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("bench-compile: {error}");
            std::process::exit(2);
        }
    };
    let scratch = std::env::temp_dir().join(format!("bench-compile-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch folder");
    let output = scratch.join("out.cwasm");
    println!(
        "{} run(s) each; peak RSS of the compiling process (MiB: min / median / max), wall time (median)",
        args.runs
    );
    println!();
    println!(
        "| {:<22} | {:>7} | {:<27} | {:>7} | {:>17} | {:>8} | {:>9} |",
        "module", "size", "compiler", "threads", "peak RSS MiB", "wall s", "code MiB"
    );
    println!("|{:-<24}|{:->9}|{:-<29}|{:->9}|{:->19}|{:->10}|{:->11}|", "", "", "", "", "", "", "");
    let mut failed = false;
    for module in &args.modules {
        let size = std::fs::metadata(module).map(|m| m.len()).unwrap_or(0);
        let name = module.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut compilers = vec![Compiler::ThisBuild(&args.host)];
        compilers.extend(args.baseline.as_deref().map(Compiler::Baseline));
        for compiler in &compilers {
            let label = compiler.label();
            for &threads in &args.threads {
                let mut runs = Vec::new();
                for _ in 0..args.runs {
                    let compile = compiler.command(module, &output, threads);
                    match measure(compile, &output) {
                        Ok(measured) => runs.push(measured),
                        Err(error) => {
                            eprintln!("{name} with {label}, {threads} thread(s): {error}");
                            failed = true;
                            break;
                        }
                    }
                }
                if runs.is_empty() {
                    continue;
                }
                let (low, mid, high) = median(runs.iter().map(|m| m.peak_bytes).collect());
                let (_, took, _) = median(runs.iter().map(|m| m.took).collect());
                println!(
                    "| {:<22} | {:>7} | {:<27} | {:>7} | {:>17} | {:>8.1} | {:>9} |",
                    name,
                    format!("{} KB", size / 1000),
                    label,
                    threads,
                    format!("{} / {} / {}", mib(low), mib(mid), mib(high)),
                    took.as_secs_f64(),
                    format!("{:.1}", runs[0].output_bytes as f64 / f64::from(1 << 20)),
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if failed {
        std::process::exit(1);
    }
}
