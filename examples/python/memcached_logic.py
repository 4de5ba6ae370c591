"""The Memcached operator's logic component, called from Python.

The very `target/memcached.wasm` the Rust operator loads, through wasmtime's
component API (`wasmtime.component`: Component, Linker, Instance.get_func).
The component is compiled once per `Logic`; `instance()` gives a fresh,
isolated instance, as the Rust host makes one per reconcile. Objects cross as
JSON text; a failure is the WIT `error` variant, raised as `LogicError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from wasmtime import Config, Engine, Store
from wasmtime.component import Component, Linker, Variant

DEFAULT_COMPONENT = Path(__file__).resolve().parents[2] / "target" / "memcached.wasm"
MEMCACHED = "c5c3:memcached/memcached@0.1.0"
CONTROLLER = "c5c3:memcached/controller@0.1.0"
ERROR_TAGS = ("malformed", "invalid", "unsupported")


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class LogicError(Exception):
    """The component's answer to bad input: `tag` is malformed, invalid or
    unsupported; `field_errors` locate each problem by its field path."""

    def __init__(self, tag: str, field_errors: list[FieldError], detail: str = ""):
        self.tag = tag
        self.field_errors = field_errors
        super().__init__(f"{tag}: " + ("; ".join(map(str, field_errors)) or detail))


class Logic:
    def __init__(self, path: Path | str = DEFAULT_COMPONENT):
        config = Config()
        # wasmtime's on-disk code cache: compiling the component takes
        # seconds, loading it again from the cache milliseconds.
        config.cache = True
        self.engine = Engine(config)
        self.component = Component.from_file(self.engine, str(path))
        self.linker = Linker(self.engine)  # nothing to link: the component imports nothing

    def instance(self) -> "Instance":
        return Instance(self)


class Instance:
    """One instance of the component, with the WIT functions as methods.
    CRs and objects may be given as dicts or as JSON text."""

    def __init__(self, logic: Logic):
        self.store = Store(logic.engine)
        self.instance = logic.linker.instantiate(self.store, logic.component)
        self.funcs: dict[tuple[str, str], Any] = {}

    def call(self, interface: str, name: str, *args: Any) -> Any:
        func = self.funcs.get((interface, name))
        if func is None:
            index = self.instance.get_export_index(self.store, interface)
            func_index = index and self.instance.get_export_index(self.store, name, index)
            func = func_index and self.instance.get_func(self.store, func_index)
            if func is None:
                raise LookupError(f"the component exports no {interface}#{name}")
            self.funcs[(interface, name)] = func
        answer = func(self.store, *args)
        # A result's ok side is a plain value (str, bool, list, None); its
        # error side, the `error` variant, comes back as a Variant.
        if isinstance(answer, Variant) and answer.tag in ERROR_TAGS:
            if answer.tag == "unsupported":
                raise LogicError(answer.tag, [], str(answer.payload))
            raise LogicError(answer.tag, [FieldError(e.path, e.message) for e in answer.payload])
        return answer

    # The typed `memcached` interface.
    def render(self, memcached: Any) -> list[str]:
        return self.call(MEMCACHED, "render", _text(memcached))

    def to_yaml(self, objects: Any) -> str:
        return self.call(MEMCACHED, "to-yaml", _text(objects))

    def validate(self, memcached: Any) -> list[FieldError]:
        return [FieldError(e.path, e.message) for e in self.call(MEMCACHED, "validate", _text(memcached))]

    def default(self, memcached: Any) -> str:
        return self.call(MEMCACHED, "default", _text(memcached))

    def guards(self, memcached: Any) -> dict[str, bool]:
        text = _text(memcached)
        names = ("service-monitor-enabled", "network-policy-enabled", "pdb-enabled", "hpa-enabled")
        return {name: self.call(MEMCACHED, name, text) for name in names}

    # The generic `controller` interface.
    def manifest(self) -> Any:
        return self.call(CONTROLLER, "manifest")

    def desired_all(
        self, parent: Any, current: Sequence[Optional[Any]], related: Sequence[Any] = ()
    ) -> list[Optional[str]]:
        return self.call(
            CONTROLLER,
            "desired-all",
            _text(parent),
            [None if c is None else _text(c) for c in current],
            [_text(r) for r in related],
        )


def as_json_list(objects: list[Any]) -> str:
    """What `memcached-operator render -o json` prints: a pretty `v1` List,
    in serde_json's pretty format (two spaces, UTF-8 kept as is)."""
    listing = {"apiVersion": "v1", "items": objects, "kind": "List"}
    return json.dumps(listing, indent=2, ensure_ascii=False) + "\n"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
