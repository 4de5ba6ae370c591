"""Lines for the operator's log: `log.info("scaled to 3")`.

Inside a component built against a contract with the `log` import (1.1),
each line goes to the host, which emits it with the module's name and the
parent's namespace and name (at most 64 lines of 4 KiB per call). In a
component without it (built against contract 1.0) a line is dropped: the
host discards a component's standard error anyway. Under plain CPython
(unit tests) a line goes to standard error as `[level] message`.

The generated bindings (`wit_world`) are imported on first use, not when
this module is, so it imports under plain CPython.
"""

from __future__ import annotations

import sys

# CPython compiled for WASI, as componentize-py embeds it, says "wasi".
IN_COMPONENT = sys.platform == "wasi"

LEVELS = ("error", "warn", "info", "debug")


def _host_write(level: str, message: str) -> bool:
    """Writes through the `log` import; False when there is none to call."""
    try:
        from wit_world.imports import log as wit_log  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return False
    try:
        wit_log.write(wit_log.Level[level.upper()], message)
    except NotImplementedError:
        # `componentize-py bindings` output under CPython: the stub of the import.
        return False
    return True


def write(level: str, message: str) -> None:
    """One line at `level` (error, warn, info or debug)."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if not _host_write(level, message) and not IN_COMPONENT:
        print(f"[{level}] {message}", file=sys.stderr)


def error(message: str) -> None:
    write("error", message)


def warn(message: str) -> None:
    write("warn", message)


def info(message: str) -> None:
    write("info", message)


def debug(message: str) -> None:
    write("debug", message)
