"""Defining a module: its manifest and the three functions an author
writes, and the glue that runs them on the contract's JSON texts (and
`desired` as contract 1.3's `answer`: told the time, with its timer).

The `run_*` functions here are the whole contract on plain Python values
(texts in, texts out, `ModuleError`s raised); `component.reconciler` puts
them behind componentize-py's bindings.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional, Union

from .errors import Malformed
from .helpers import adopt, merge, replace_at, replaced_pointers
from .jsontext import JsonObject, dump, parse_object, type_name


@dataclass(frozen=True)
class Kind:
    """An API kind, with what the host needs to reach it without discovery.
    `group` is "" for the core group (ConfigMap, Secret, Service)."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def ref(self, name: str, namespace: str | None = None) -> ObjectRef:
        """A reference to an object of this kind (namespace None: the parent's)."""
        return ObjectRef(self.group, self.version, self.kind, name, namespace)


@dataclass(frozen=True)
class ObjectRef:
    """One object of a `reads` kind that a parent references."""

    group: str
    version: str
    kind: str
    name: str
    namespace: Optional[str] = None


@dataclass(frozen=True)
class Manifest:
    """What the host reads once at load. `crd` is the parent's
    CustomResourceDefinition as YAML or JSON ("" for none). `field_manager`
    and `event_reporter` default to `<name>-operator`."""

    name: str
    version: str
    parent: Kind
    crd: str = ""
    owned: Sequence[Kind] = ()
    reads: Sequence[Kind] = ()
    field_manager: Optional[str] = None
    event_reporter: Optional[str] = None

    @property
    def field_manager_name(self) -> str:
        return self.field_manager or self.name + "-operator"

    @property
    def event_reporter_name(self) -> str:
        return self.event_reporter or self.name + "-operator"


def read_text(anchor: str, name: str) -> str:
    """The text of the file `name` beside `anchor` (pass `__file__`): for a
    manifest's `crd`. A module-level manifest is built when componentize-py
    imports the module, at build time, so the component carries the text and
    reads no file when it runs."""
    with open(os.path.join(os.path.dirname(os.path.abspath(anchor)), name), encoding="utf-8") as file:
        return file.read()


KindLike = Union[str, Kind]


def _identity(obj: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    return obj.get("apiVersion"), obj.get("kind"), metadata.get("namespace"), metadata.get("name")


class Objects(Sequence[JsonObject]):
    """A list of objects (dicts, as the API server returned them) with a
    lookup by kind and name."""

    def __init__(self, objects: Sequence[JsonObject] = ()) -> None:
        self._objects = list(objects)

    def get(self, kind: KindLike, name: str, namespace: str | None = None) -> Optional[JsonObject]:
        """The object of this kind and name, or None. `kind` is a kind name
        ("ConfigMap") or a `Kind` (then its apiVersion must match too);
        `namespace` None matches any."""
        for obj in self._objects:
            api_version, obj_kind, obj_namespace, obj_name = _identity(obj)
            if obj_name != name or (namespace is not None and obj_namespace != namespace):
                continue
            if isinstance(kind, Kind):
                if obj_kind == kind.kind and api_version == kind.api_version:
                    return obj
            elif obj_kind == kind:
                return obj
        return None

    def of_kind(self, kind: KindLike) -> list[JsonObject]:
        """Every object of this kind."""
        if isinstance(kind, Kind):
            return [o for o in self._objects if o.get("kind") == kind.kind and o.get("apiVersion") == kind.api_version]
        return [o for o in self._objects if o.get("kind") == kind]

    def __getitem__(self, index: Any) -> Any:
        return self._objects[index]

    def __len__(self) -> int:
        return len(self._objects)

    def __iter__(self) -> Iterator[JsonObject]:
        return iter(self._objects)

    def __repr__(self) -> str:
        return f"Objects({self._objects!r})"


# The time `desired` is told on a host older than contract 1.3, which tells none.
EPOCH = "1970-01-01T00:00:00Z"

# The longest timer the contract carries (u32 milliseconds, 49 days): past any resync.
MAX_TIMER_MS = 2**32 - 1


@dataclass
class Context:
    """What `desired` gets beside the parent: the objects of owned kinds the
    parent controls now (as the server returned them), the referenced
    objects that exist, and `now`, the time of the call (RFC 3339; `EPOCH`
    on a host older than contract 1.3)."""

    owned: Objects = field(default_factory=Objects)
    related: Objects = field(default_factory=Objects)
    now: str = EPOCH
    _again_after: Optional[float] = field(default=None, init=False, repr=False, compare=False)

    def reconcile_after(self, seconds: float) -> None:
        """During `desired`: reconcile this parent again after `seconds` (a
        fraction is fine; whole milliseconds count), even if nothing it
        reads changes (a deadline, a poll). The host keeps one timer per
        parent, waits at least a second, and comes back sooner if something
        changes (its resync too); each answer sets the timer anew, so an
        answer that asks nothing clears it. Asked more than once in one
        answer, the soonest wins. A host older than contract 1.3 ignores it,
        and so does `status`. A negative, infinite or NaN `seconds` is a bug
        (ValueError), and so is one that is no number (TypeError)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"reconcile_after: seconds must be a number, got {type(seconds).__name__}")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"reconcile_after: seconds must be a finite number >= 0, got {seconds!r}")
        if self._again_after is None or seconds < self._again_after:
            self._again_after = seconds

    @property
    def again_after(self) -> Optional[float]:
        """The timer this answer asked for, in seconds, if any (for a module's tests)."""
        return self._again_after


@dataclass
class StatusContext(Context):
    """What `status` gets beside the parent: the owned objects after this
    reconcile's writes, the related objects, the time (RFC 3339) and
    `problem`: why this reconcile failed (the host's `invalid: ...` or a
    refused write), or None. The status should report a problem."""

    now: str = ""
    problem: Optional[str] = None


class WriteModel(str, Enum):
    """How the host writes what `desired` answers (contract 1.2's `writes`).

    `REPLACE`: the host updates each object to exactly the answer, which the
    SDK merged onto the current object. `APPLY`: each answer holds only the
    module's fields and is written by server-side apply under the module's
    field manager; the SDK merges nothing and `replacing` marks have no
    effect (the API server removes what the module no longer sets)."""

    REPLACE = "replace"
    APPLY = "apply"


class Module:
    """A logic module: set `manifest`, write `desired` and `status`
    (`references` is optional: none by default). Parents and objects are
    dicts; raise `Invalid`/`Malformed`/`Unsupported` for the contract's errors.

    The SDK does the rest for each desired object: fills `metadata.namespace`
    with the parent's, adopts it (the parent's controller owner reference;
    another controller's object is refused) and, as `writes` says (default
    `"replace"`), merges it onto the current object of the same identity, so
    what the server filled in survives; with `writes = "apply"` (or
    `WriteModel.APPLY`) it is written by server-side apply as it is.
    """

    manifest: Manifest
    writes: WriteModel | str = WriteModel.REPLACE

    def references(self, parent: JsonObject) -> Sequence[ObjectRef]:
        return []

    def desired(self, parent: JsonObject, ctx: Context) -> Sequence[JsonObject]:
        raise NotImplementedError(type(self).__name__ + ".desired")

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        raise NotImplementedError(type(self).__name__ + ".status")


class FunctionModule(Module):
    """A module from plain functions (see `module`)."""

    def __init__(
        self,
        manifest: Manifest,
        desired: Callable[[JsonObject, Context], Sequence[JsonObject]],
        status: Callable[[JsonObject, StatusContext], JsonObject],
        references: Callable[[JsonObject], Sequence[ObjectRef]] | None = None,
        writes: WriteModel | str = WriteModel.REPLACE,
    ) -> None:
        self.manifest = manifest
        self.writes = writes
        self._desired = desired
        self._status = status
        self._references = references

    def references(self, parent: JsonObject) -> Sequence[ObjectRef]:
        return self._references(parent) if self._references is not None else []

    def desired(self, parent: JsonObject, ctx: Context) -> Sequence[JsonObject]:
        return self._desired(parent, ctx)

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        return self._status(parent, ctx)


def module(
    manifest: Manifest,
    *,
    desired: Callable[[JsonObject, Context], Sequence[JsonObject]],
    status: Callable[[JsonObject, StatusContext], JsonObject],
    references: Callable[[JsonObject], Sequence[ObjectRef]] | None = None,
    writes: WriteModel | str = WriteModel.REPLACE,
) -> Module:
    """A module from functions instead of a class."""
    return FunctionModule(manifest, desired, status, references, writes)


def write_model(module: Module) -> WriteModel:
    """The module's `writes` as a `WriteModel`; a `ValueError` naming it when
    it is neither "replace" nor "apply"."""
    try:
        return WriteModel(module.writes)
    except ValueError:
        raise ValueError(
            f'{type(module).__name__}.writes must be "replace" or "apply", not {module.writes!r}'
        ) from None


# --- The glue on JSON texts ---------------------------------------------------


def _parent(module: Module, text: object) -> JsonObject:
    """The parent from its text: a JSON object whose metadata is an object
    with a name. apiVersion and kind default to the manifest's parent kind."""
    parent = parse_object(text, "parent")
    metadata = parent.get("metadata")
    if not isinstance(metadata, dict):
        raise Malformed("metadata", "must be an object, got " + type_name(metadata))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise Malformed("metadata.name", "must be a non-empty string")
    kind = module.manifest.parent
    parent.setdefault("apiVersion", kind.api_version)
    parent.setdefault("kind", kind.kind)
    return parent


def _objects(texts: Sequence[object], what: str) -> list[JsonObject]:
    return [parse_object(text, f"{what} object {index}") for index, text in enumerate(texts)]


def _placement(module: Module, parent: JsonObject) -> None:
    """What an owned object needs of the parent: its uid, and its namespace
    when the parent kind is namespaced."""
    metadata = parent["metadata"]
    required = ("namespace", "uid") if module.manifest.parent.namespaced else ("uid",)
    missing = [
        ("metadata." + key, "must be a non-empty string")
        for key in required
        if not isinstance(metadata.get(key), str) or not metadata.get(key)
    ]
    if missing:
        raise Malformed(missing)


def _check_desired(index: int, obj: object) -> JsonObject:
    """A desired object the module returned: a bug in the module (a
    TypeError, so the call traps with this message) when it cannot be one."""
    where = f"desired object {index}"
    if not isinstance(obj, dict):
        raise TypeError(f"{where}: must be a dict, got {type(obj).__name__}")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise TypeError(f"{where}: {key} must be a non-empty string")
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise TypeError(f"{where}: metadata.name must be a non-empty string")
    return obj


def run_references(module: Module, parent_text: object) -> list[ObjectRef]:
    """The contract's `references` on texts."""
    references = list(module.references(_parent(module, parent_text)))
    for index, reference in enumerate(references):
        if not isinstance(reference, ObjectRef):
            raise TypeError(f"reference {index}: must be an ObjectRef, got {type(reference).__name__}")
    return references


@dataclass(frozen=True)
class Answer:
    """What `answer` (contract 1.3) answers: the objects, as `desired`
    answers them, and the timer the module asked for, in milliseconds."""

    objects: list[str]
    again_after_ms: Optional[int] = None


def run_desired(
    module: Module, parent_text: object, owned_texts: Sequence[object], related_texts: Sequence[object]
) -> list[str]:
    """The contract's `desired` on texts: the author's objects, each placed
    in the parent's namespace, adopted and (with `replace`) merged onto its
    current object."""
    return run_answer(module, parent_text, owned_texts, related_texts, EPOCH).objects


def run_answer(
    module: Module, parent_text: object, owned_texts: Sequence[object], related_texts: Sequence[object], now: str
) -> Answer:
    """The contract's `answer` (1.3) on texts: as `run_desired`, told the
    time (RFC 3339), with the timer `ctx.reconcile_after` asked for."""
    applies = write_model(module) is WriteModel.APPLY
    parent = _parent(module, parent_text)
    _placement(module, parent)
    owned = _objects(owned_texts, "owned")
    related = _objects(related_texts, "related")
    current = {_identity(obj): obj for obj in owned}
    # The author may change the objects it is given: merge onto pristine copies.
    ctx = Context(Objects(copy.deepcopy(owned)), Objects(related), now)
    namespace = parent["metadata"].get("namespace")
    answers = []
    for index, obj in enumerate(module.desired(parent, ctx)):
        obj = _check_desired(index, obj)
        replaced = replaced_pointers(obj)
        if namespace is not None and obj["metadata"].get("namespace") is None:
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
        existing = current.get(_identity(obj))
        adopted = adopt(parent, existing, obj)
        if applies:
            # The current object was only checked (adopt refuses another
            # controller's); the server keeps others' owner references.
            answers.append(dump(merge(None, adopt(parent, None, obj))))
            continue
        obj = adopted
        merged = merge(existing, obj)
        if existing is not None:
            for pointer in replaced:
                replace_at(merged, obj, pointer)
        answers.append(dump(merged))
    after = ctx.again_after
    return Answer(answers, None if after is None else min(int(after * 1000), MAX_TIMER_MS))


def run_status(
    module: Module,
    parent_text: object,
    owned_texts: Sequence[object],
    related_texts: Sequence[object],
    now: str,
    problem: str | None,
) -> str:
    """The contract's `status` on texts."""
    parent = _parent(module, parent_text)
    ctx = StatusContext(
        Objects(_objects(owned_texts, "owned")), Objects(_objects(related_texts, "related")), now, problem
    )
    status = module.status(parent, ctx)
    if not isinstance(status, dict):
        raise TypeError(f"status: must be a dict, got {type(status).__name__}")
    return dump(status)
