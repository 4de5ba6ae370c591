#!/usr/bin/env python3
"""The Rust tests of `make test`: every test binary of the workspace (built
already by `cargo test --no-run`) and the doc tests, RUST_TEST_JOBS at a time
(default 2: make test runs its other suites beside them, and more at once
leaves little CPU to the tests that time what they wait for).

    scripts/rust-tests.py [NAME...]     (NAME: `tests/golden`, `host/lib`, `doc`)

Most binaries wait on the API servers and processes they start, not on the
CPU: a few side by side take the wall time of the longest instead of the sum,
which one after the other (as `cargo test` runs them) was most of `make
test`. Each binary runs as `cargo test` runs it: from its package's folder,
with CARGO_MANIFEST_DIR set. The longest start first: by their last wall
times (target/test-logs/rust-times.tsv), else by the list below.

Each binary's output goes to target/test-logs/rust/<name>.log and is printed
whole when it ends, so its `test result:` line reads as cargo prints it. Exits
non-zero when any binary fails, after every one has run; ends with each one's
wall time.

Knobs: CARGO (default: cargo), RUST_TEST_JOBS.
"""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "target", "test-logs", "rust")
TIMES = os.path.join(ROOT, "target", "test-logs", "rust-times.tsv")
CARGO = os.environ.get("CARGO", "cargo")

# Before any timing is known: the binaries that took longest on a 2-core
# machine, longest first (the others follow by name).
LONGEST = [
    "tests/scaffold_rust",
    "tests/scaffold_typescript",
    "tests/scaffold_python",
    "tests/static_site",
    "doc",
    "tests/operator_resilience",
    "tests/helm",
    "tests/dev_loop",
    "tests/rollout",
    "tests/operator_generic",
    "tests/operator_lifecycle",
    "tests/changes_first",
    "tests/deploy",
    "tests/book",
]

printing = threading.Lock()


def binaries():
    """(name, executable, package folder) of every test binary, by name."""
    build = subprocess.run(
        [CARGO, "test", "--release", "--workspace", "--no-run", "--message-format=json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        sys.stderr.write(build.stderr)
        sys.exit(f"rust-tests: building the test binaries failed (exit {build.returncode})")
    found = {}
    for line in build.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message.get("profile", {}).get("test"):
            continue
        target = message["target"]
        package = os.path.dirname(message["manifest_path"])
        kinds = target["kind"]
        if "lib" in kinds or "rlib" in kinds or "cdylib" in kinds:
            own = "lib"
        elif "bin" in kinds:
            own = "bin-" + target["name"]
        else:
            own = target["name"]
        name = os.path.relpath(package, ROOT) + "/" + own
        found[name] = (name, message["executable"], package)
    if not found:
        sys.exit("rust-tests: cargo listed no test binary")
    return found


def last_times():
    try:
        with open(TIMES, encoding="utf-8") as times:
            rows = [line.rstrip("\n").split("\t") for line in times if line.strip()]
        return {name: int(took) for name, took in rows}
    except (OSError, ValueError):
        return {}


def order(names, times):
    if times:
        return sorted(names, key=lambda name: (-times.get(name, 0), name))
    first = [name for name in LONGEST if name in names]
    return first + sorted(name for name in names if name not in first)


def run(name, executable, package):
    """Runs one binary (or the doc tests); prints its log whole at the end."""
    log_path = os.path.join(LOGS, name.replace("/", ".") + ".log")
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        if name == "doc":
            command = [CARGO, "test", "--release", "--workspace", "--doc"]
            env = os.environ
        else:
            command = [executable]
            env = dict(os.environ, CARGO_MANIFEST_DIR=package)
        try:
            code = subprocess.run(
                command, cwd=package, env=env, stdout=log, stderr=subprocess.STDOUT, check=False
            ).returncode
        except OSError as error:
            log.write(f"rust-tests: could not run {executable}: {error}\n")
            code = 127
    took = int(time.monotonic() - start)
    with printing, open(log_path, encoding="utf-8", errors="replace") as log:
        sys.stdout.write(f"\n     Running {name} ({executable})\n")
        sys.stdout.write(log.read())
        sys.stdout.flush()
    return name, took, code


def main():
    os.makedirs(LOGS, exist_ok=True)
    for old in os.listdir(LOGS):
        os.remove(os.path.join(LOGS, old))
    found = binaries()
    found["doc"] = ("doc", "cargo test --doc", ROOT)
    wanted = sys.argv[1:]
    unknown = [name for name in wanted if name not in found]
    if unknown:
        sys.exit("rust-tests: no test binary named " + ", ".join(unknown) + " (see " + LOGS + ")")
    names = wanted or list(found)
    jobs = int(os.environ.get("RUST_TEST_JOBS", "2"))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda name: run(*found[name]), order(names, last_times())))
    print(f"\nrust tests: wall time per binary ({jobs} at a time)")
    for name, took, code in sorted(results, key=lambda result: -result[1]):
        print(f"{took:6d} s  {name}" + ("" if code == 0 else f"  FAILED (exit {code})"))
    if not wanted:
        with open(TIMES, "w", encoding="utf-8") as times:
            times.writelines(f"{name}\t{took}\n" for name, took, _ in results)
    return 1 if any(code != 0 for _, _, code in results) else 0


if __name__ == "__main__":
    sys.exit(main())
