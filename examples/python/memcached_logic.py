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
# The typed interface, and the generic contract a `wasm-operator` host drives.
MEMCACHED = "c5c3:memcached/memcached@0.2.0"
RECONCILER = "wasm-operator:controller/reconciler@1.2.0"
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


@dataclass(frozen=True)
class KindInfo:
    """An API kind, with what a host needs to reach it without discovery."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True)
class Manifest:
    """The reconciler's `module-manifest`."""

    name: str
    version: str
    parent: KindInfo
    crd: str
    owned: list[KindInfo]
    reads: list[KindInfo]
    field_manager: str
    event_reporter: str


@dataclass(frozen=True)
class ObjectRef:
    """A related object a parent references; `namespace` None: the parent's."""

    group: str
    version: str
    kind: str
    namespace: Optional[str]
    name: str


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

    # The generic `reconciler` contract (wit/controller).
    def manifest(self) -> Manifest:
        m = self.call(RECONCILER, "manifest")
        return Manifest(
            name=m.name,
            version=m.version,
            parent=_kind_info(m.parent),
            crd=m.crd,
            owned=[_kind_info(k) for k in m.owned],
            reads=[_kind_info(k) for k in m.reads],
            field_manager=getattr(m, "field-manager"),
            event_reporter=getattr(m, "event-reporter"),
        )

    def references(self, parent: Any) -> list[ObjectRef]:
        return [
            ObjectRef(r.group, r.version, r.kind, r.namespace, r.name)
            for r in self.call(RECONCILER, "references", _text(parent))
        ]

    def desired(self, parent: Any, owned: Sequence[Any] = (), related: Sequence[Any] = ()) -> list[str]:
        """Every object `parent` should own, in apply order; `owned` are the
        objects it controls now (any that is left out of the answer is one to
        delete), `related` the referenced objects that exist."""
        return self.call(RECONCILER, "desired", _text(parent), [_text(o) for o in owned], [_text(r) for r in related])

    def status(
        self, parent: Any, owned: Sequence[Any], related: Sequence[Any], now: str, problem: Optional[str] = None
    ) -> str:
        return self.call(
            RECONCILER, "status", _text(parent), [_text(o) for o in owned], [_text(r) for r in related], now, problem
        )


def as_json_list(objects: list[Any]) -> str:
    """What `memcached-operator render -o json` prints: a pretty `v1` List,
    in serde_json's pretty format (two spaces, UTF-8 kept as is)."""
    listing = {"apiVersion": "v1", "items": objects, "kind": "List"}
    return json.dumps(listing, indent=2, ensure_ascii=False) + "\n"


def _kind_info(k: Any) -> KindInfo:
    return KindInfo(k.group, k.version, k.kind, k.plural, k.namespaced)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
