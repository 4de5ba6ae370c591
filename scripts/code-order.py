#!/usr/bin/env python3
"""Writes host/link/serving-functions.txt: the functions the operator runs
while it serves, then those only its start runs, in the order the linker lays
them out first (host/link/code_order.rs says why).

    scripts/code-order.py [BINARY] [OUT]     (make code-order)
    scripts/code-order.py --check BINARY LIST  (after each `ship` build)

How: one `bench-e2e` run of BINARY at 1000 CRs (ours only), with the block
device's readahead off and the binary's pages dropped from the page cache
first, so that a page of the binary is in the cache only if the operator read
it (the kernel's fault-around maps only pages already cached). The pages
cached once the operator is ready are its start; dropped again then, those
cached at convergence are what it serves with. A function is listed if the
page of its entry is among them: one whose first page nobody read never ran.
Page-grained, so a few neighbours come along; a second pass on a binary
linked with the list narrows it.

Needs root (the readahead setting, /sys/block/DEV/queue/read_ahead_kb, is
put back at the end), `nm` and `readelf`, and `make bench-e2e`'s parts.
"""

import ctypes
import os
import subprocess
import sys
import time

PAGE = 4096
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def cached_pages(path):
    """The pages of `path` in the page cache, as a set of page numbers."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        address = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        pages = (size + PAGE - 1) // PAGE
        vector = (ctypes.c_ubyte * pages)()
        if libc.mincore(address, size, vector) != 0:
            raise OSError(ctypes.get_errno(), f"mincore {path}")
        libc.munmap(address, size)
        return {page for page in range(pages) if vector[page] & 1}
    finally:
        os.close(fd)


def drop_from_cache(path):
    """Drops the pages of `path` no process maps from the page cache; written
    out first (a binary just linked is dirty, and dirty pages stay)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def readahead_setting(path):
    """The read_ahead_kb file of the block device `path` is on."""
    device = os.stat(path).st_dev
    sysfs = f"/sys/dev/block/{os.major(device)}:{os.minor(device)}"
    # A partition's queue is its disk's.
    for candidate in (sysfs, os.path.join(sysfs, "..")):
        setting = os.path.join(candidate, "queue", "read_ahead_kb")
        if os.path.exists(setting):
            return os.path.realpath(setting)
    sys.exit(f"code-order: no read_ahead_kb for the device of {path} (under {sysfs})")


def write(path, text):
    with open(path, "w") as file:
        file.write(text)


def wait_for_line(log, text, process):
    while True:
        if os.path.exists(log):
            with open(log, errors="replace") as lines:
                if text in lines.read():
                    return
        if process.poll() is not None:
            sys.exit(f"code-order: bench-e2e ended before `{text}`; see {log}")
        time.sleep(0.1)


def functions(binary):
    """(file offset of the entry, name) of every function in `binary`'s symbol table."""
    segments = []
    for line in subprocess.run(
        ["readelf", "-lW", binary], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        fields = line.split()
        if fields and fields[0] == "LOAD":
            offset, address, size = int(fields[1], 16), int(fields[2], 16), int(fields[4], 16)
            segments.append((address, address + size, offset))
    found = []
    symbols = subprocess.run(["nm", "--defined-only", "-n", binary], capture_output=True, text=True, check=True)
    for line in symbols.stdout.splitlines():
        fields = line.split(maxsplit=2)
        if len(fields) == 3 and fields[1] in "tTwW":
            address = int(fields[0], 16)
            for start, end, offset in segments:
                if start <= address < end:
                    found.append((address - start + offset, fields[2]))
                    break
    return found


def listed_names(path):
    """The function names of a list this script wrote, in its order."""
    with open(path) as file:
        return [line.strip() for line in file if line.strip() and not line.startswith("#")]


# Below this share of its names in the binary, the list is reported stale.
FRESH_ENOUGH = 0.9


def check(binary, path):
    """Says how many of the list's names `binary` has. The linker skips the
    others without a word, so a list gone stale (crates updated, renamed
    functions) would only show as resident memory creeping up."""
    names = listed_names(path)
    have = {name for _, name in functions(binary)}
    found = sum(name in have for name in names)
    share = found / len(names) if names else 0.0
    print(f"code-order: {found} of {len(names)} functions in {path} are in {binary} ({share:.0%})")
    if share < FRESH_ENOUGH:
        print(
            f"code-order: warning: {path} is stale (under {FRESH_ENOUGH:.0%} of it found): the code the "
            "operator serves with is no longer laid out together, and it keeps more memory resident; "
            "run `make code-order` and rebuild"
        )


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        if len(sys.argv) != 4:
            sys.exit("usage: code-order.py --check BINARY LIST")
        check(sys.argv[2], sys.argv[3])
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "target/ship/memcached-operator"))
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "host/link/serving-functions.txt")
    bench = os.path.join(root, "target/release/bench-e2e")
    work = os.path.join(root, "target/code-order")
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "bench.log")
    setting = readahead_setting(binary)
    with open(setting) as file:
        readahead = file.read().strip()
    write(setting, "0")
    try:
        drop_from_cache(binary)
        if left := len(cached_pages(binary)):
            sys.exit(f"code-order: {left} pages of {binary} stay in the page cache: does a process run it?")
        with open(log, "w") as output:
            process = subprocess.Popen(
                [
                    bench,
                    "--operator",
                    binary,
                    "--counts",
                    "1000",
                    "--only-ours",
                    "--no-resync-pass",
                    "--no-touch-pass",
                    "--out",
                    os.path.join(work, "results.md"),
                ],
                cwd=root,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        wait_for_line(log, "creating 1000", process)
        start = cached_pages(binary)
        drop_from_cache(binary)
        wait_for_line(log, "converged after", process)
        serving = cached_pages(binary)
        if process.wait() != 0:
            sys.exit(f"code-order: bench-e2e failed; see {log}")
    finally:
        write(setting, readahead)

    listed, names = {"serving": [], "start": []}, set()
    for offset, name in functions(binary):
        group = "serving" if offset // PAGE in serving else "start" if offset // PAGE in start else None
        if group and name not in names:
            names.add(name)
            listed[group].append(name)
    with open(out, "w") as file:
        file.write(
            "# The functions the operator runs while serving (1000 Memcacheds converging),\n"
            "# then those only its start runs: laid out first, in this order, by the linker\n"
            "# (host/link/code_order.rs). Written by scripts/code-order.py; not by hand.\n"
        )
        file.write("\n".join(listed["serving"] + listed["start"]) + "\n")
    print(
        f"code-order: {len(listed['serving'])} functions serving ({len(serving)} pages read), "
        f"{len(listed['start'])} only at start ({len(start)} pages read): {out}"
    )


if __name__ == "__main__":
    main()
