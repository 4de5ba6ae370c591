"""JSON text in and out, as the contract carries objects.

`parse` refuses what would crash a component instead of answering: JSON
nested deeper than `MAX_DEPTH` (CPython's parser recurses, and in a
component about 2,000 levels overflow the fixed wasm stack, a trap), and
`NaN`/`Infinity`, which are not JSON. `dump` writes compact ASCII JSON, so a
lone surrogate (valid in a JSON `\\u` escape, not in UTF-8) stays escaped
instead of failing the WIT string's encoding.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from .errors import Malformed

JsonObject = dict[str, Any]

# Kubernetes objects nest a few dozen levels.
MAX_DEPTH = 256

# A JSON string (skipped whole: brackets inside it do not count) or a bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _too_deep(text: str) -> bool:
    # No more brackets than the limit cannot nest deeper: decided without a scan.
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return False
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(name + " is not JSON")


def type_name(value: object) -> str:
    """A JSON value's type, for messages: `a string`, `an array`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse(text: object, what: str = "") -> Any:
    """Any JSON value from text; `Malformed` (path "") when it is not JSON.
    `what` names the text in the message (`parent: not JSON: ...`)."""
    prefix = what + ": " if what else ""
    if not isinstance(text, str):
        raise Malformed("", prefix + "expected JSON text, got " + type(text).__name__)
    if _too_deep(text):
        raise Malformed("", f"{prefix}JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise Malformed("", prefix + "JSON nested too deeply") from None
    except ValueError as error:
        # JSONDecodeError, an int too large, NaN: the message names a
        # position, never the input itself.
        raise Malformed("", prefix + "not JSON: " + str(error)) from None


def parse_object(text: object, what: str = "") -> JsonObject:
    """A JSON object from text; `Malformed` (path "") naming what it got otherwise."""
    value = parse(text, what)
    if not isinstance(value, dict):
        prefix = what + ": " if what else ""
        raise Malformed("", prefix + "expected a JSON object, got " + type_name(value))
    return value


def dump(value: object) -> str:
    """Compact ASCII JSON text."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
