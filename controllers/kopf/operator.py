"""A kopf operator for the logic component (target/memcached.wasm): every
decision (which objects a CR owns, what they hold, which to delete, the
status) is the component's; kopf watches, and this file writes.

    kopf run --standalone --namespace NS controllers/kopf/operator.py

The kinds come from the component's manifest (parent, owned, reads), so
nothing here names a Memcached field or version. kopf indices are the caches:
the parents, the owned objects by their controller's uid, and the objects of
the `reads` kinds (Secrets). A parent is reconciled when kopf resumes,
creates or updates it, and when one of its owned objects or a Secret it
references changes (the owned Deployment's status feeds the parent's status).
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import kopf
from kubernetes import config as kube_config
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "python"))
from memcached_logic import Logic, LogicError  # noqa: E402  (the embedding, reused as is)
from writes import Writer, merge_patch, same_ignoring_nulls  # noqa: E402

LOGIC = Logic(os.environ.get("MEMCACHED_WASM") or Path(__file__).resolve().parents[2] / "target" / "memcached.wasm")
MANIFEST = LOGIC.instance().manifest()
PARENT = MANIFEST.parent
OWNED = MANIFEST.owned
READS = MANIFEST.reads
# A 409 (stale resourceVersion, or created meanwhile): read again, ask again.
MAX_ATTEMPTS = 5

_writer: Optional[Writer] = None
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()
# (namespace, name) -> (the parent's resourceVersion it was based on, the status written):
# a child's event can wake us with a parent older than our own last status write.
_written_status: dict[tuple[str, str], tuple[str, Any]] = {}

log = logging.getLogger("memcached-kopf")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global _writer
    try:
        kube_config.load_incluster_config()
    except kube_config.ConfigException:
        kube_config.load_kube_config()
    _writer = Writer(ApiClient(), MANIFEST.field_manager)
    settings.posting.reporting_component = MANIFEST.event_reporter
    # kopf's own bookkeeping goes into annotations, not into the status the
    # component owns.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage()
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage()
    settings.watching.server_timeout = 300


# ---- caches (kopf indices) ----


def _snapshot(body: Mapping[str, Any]) -> dict:
    return copy.deepcopy(dict(body))


def _controller_uid(body: Mapping[str, Any]) -> Optional[str]:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == PARENT.kind:
            return ref.get("uid")
    return None


def _index_parent(body: kopf.Body, namespace: str, uid: str, **_: Any) -> dict:
    return {(namespace, uid): _snapshot(body)}


def _index_owned(body: kopf.Body, namespace: str, **_: Any) -> Optional[dict]:
    uid = _controller_uid(body)
    return {(namespace, uid): _snapshot(body)} if uid else None


def _index_read(body: kopf.Body, namespace: str, name: str, **_: Any) -> dict:
    return {(body.get("kind"), namespace, name): _snapshot(body)}


def _index_id(prefix: str, kind: Any) -> str:
    return f"{prefix}_{kind.group.replace('.', '_') or 'core'}_{kind.plural}"


kopf.index(PARENT.group, PARENT.version, PARENT.plural, id="parents")(_index_parent)
for _kind in OWNED:
    kopf.index(_kind.group, _kind.version, _kind.plural, id=_index_id("owned", _kind))(_index_owned)
for _kind in READS:
    kopf.index(_kind.group, _kind.version, _kind.plural, id=_index_id("reads", _kind))(_index_read)


def _owned_of(namespace: str, uid: str, indices: Mapping[str, Any]) -> list[tuple[Any, dict]]:
    found = []
    for kind in OWNED:
        for obj in indices[_index_id("owned", kind)].get((namespace, uid), []):
            found.append((kind, obj))
    return found


def _related_of(instance: Any, parent: Mapping[str, Any], namespace: str, indices: Mapping[str, Any]) -> list[dict]:
    related = []
    for ref in instance.references(parent):
        for kind in READS:
            if kind.kind == ref.kind and kind.group == ref.group:
                key = (ref.kind, ref.namespace or namespace, ref.name)
                related.extend(indices[_index_id("reads", kind)].get(key, []))
    return related


# ---- handlers ----


@kopf.on.resume(PARENT.group, PARENT.version, PARENT.plural)
@kopf.on.create(PARENT.group, PARENT.version, PARENT.plural)
@kopf.on.update(PARENT.group, PARENT.version, PARENT.plural)
def reconcile_handler(body: kopf.Body, **kwargs: Any) -> None:
    reconcile(_snapshot(body), kwargs)


def _on_owned_event(body: kopf.Body, type: Optional[str], namespace: str, **kwargs: Any) -> None:
    uid = _controller_uid(body)
    if not uid or type is None:  # type None: kopf's initial listing; resume covers those
        return
    for parent in kwargs["parents"].get((namespace, uid), []):
        reconcile(parent, kwargs)


def _on_read_event(body: kopf.Body, type: Optional[str], namespace: str, name: str, **kwargs: Any) -> None:
    if type is None:
        return
    for key, parents in kwargs["parents"].items():
        for parent in parents if key[0] == namespace else ():
            if any(r.kind == body.get("kind") and (r.namespace or namespace) == namespace and r.name == name
                   for r in LOGIC.instance().references(parent)):
                reconcile(parent, kwargs)


for _kind in OWNED:
    kopf.on.event(_kind.group, _kind.version, _kind.plural, id=_index_id("on_owned", _kind))(_on_owned_event)
for _kind in READS:
    kopf.on.event(_kind.group, _kind.version, _kind.plural, id=_index_id("on_read", _kind))(_on_read_event)


def _lock(key: tuple[str, str]) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def reconcile(parent: dict, indices: Mapping[str, Any]) -> None:
    """One reconcile of `parent`, as the Rust host does it: desired objects
    from the component, CreateOrUpdate each, delete what it left out, events,
    then the status it computes, written only when it changed."""
    meta = parent["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    if meta.get("deletionTimestamp"):
        return  # the garbage collector removes the children
    with _lock((namespace, name)):
        current = _owned_of(namespace, uid, indices)
        instance = LOGIC.instance()  # one fresh instance per reconcile, like the Rust host
        related = _related_of(instance, parent, namespace, indices)
        current_objects = [obj for _, obj in current]
        try:
            answer = instance.desired(parent, current_objects, related)
        except LogicError as err:
            # Bad input changes and deletes nothing; the status reports it.
            log.warning("%s/%s: the spec is invalid; nothing changed: %s", namespace, name, err)
            if _write_status(instance, parent, current_objects, related, None):
                kopf.warn(parent, reason="InvalidSpec", message=str(err))
            return
        desired = [json.loads(text) for text in answer]
        kinds = {(k.group, k.kind): k for k in OWNED}
        owned_now, wanted, problem = [], set(), None
        for obj in desired:
            group = obj["apiVersion"].rpartition("/")[0]
            kind = kinds.get((group, obj["kind"]))
            if kind is None:
                answered = f"{obj['apiVersion']} {obj['kind']}"
                raise kopf.PermanentError(f"the component answered a {answered}, not an owned kind")
            child = obj["metadata"]["name"]
            wanted.add((obj["kind"], child))
            existing = next((o for k, o in current if k is kind and o["metadata"]["name"] == child), None)
            try:
                owned_now.append(_create_or_update(instance, parent, kind, existing, obj, current_objects, related))
            except ApiException as err:
                problem = f"{obj['kind']} {obj['metadata']['name']}: {err.status} {err.reason}"
                owned_now.extend([existing] if existing else [])
                break
        for kind, obj in current:
            if (obj["kind"], obj["metadata"]["name"]) in wanted:
                continue
            if problem is None and _writer.delete(kind, namespace, obj):
                text = f"Deleted {kind.kind} {obj['metadata']['name']}"
                kopf.info(parent, reason="Deleted", message=text)
            elif problem is not None:
                owned_now.append(obj)
        _write_status(instance, parent, owned_now, related, problem)
        if problem:
            raise kopf.TemporaryError(problem, delay=5)


def _create_or_update(
    instance: Any, parent: dict, kind: Any, existing: Optional[dict], want: dict, owned: list, related: list
) -> dict:
    namespace, child = parent["metadata"]["namespace"], want["metadata"]["name"]
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if existing is not None and same_ignoring_nulls(existing, want):
            return existing
        try:
            if existing is None:
                written, reason = _writer.create(kind, namespace, want), "Created"
            else:
                written, reason = _writer.replace(kind, namespace, want), "Updated"
        except ApiException as err:
            if err.status != 409 or attempt == MAX_ATTEMPTS:
                raise
            existing = _writer.get(kind, namespace, child)
            others = [o for o in owned if (o["kind"], o["metadata"]["name"]) != (want["kind"], child)]
            answer = instance.desired(parent, others + ([existing] if existing else []), related)
            same = (want["kind"], child)
            want = next(o for o in map(json.loads, answer) if (o["kind"], o["metadata"]["name"]) == same)
            continue
        kopf.info(parent, reason=reason, message=f"{reason} {kind.kind} {child}")
        return written
    raise AssertionError("unreachable")


def _write_status(instance: Any, parent: dict, owned: Iterable[dict], related: list, problem: Optional[str]) -> bool:
    """The component's status for `parent`, patched through the status
    subresource when it differs; True when written."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    new = json.loads(instance.status(parent, list(owned), related, now, problem))
    old = parent.get("status") or {}
    if same_ignoring_nulls(old, new):
        return False
    meta = parent["metadata"]
    key = (meta["namespace"], meta["name"])
    memo = _written_status.get(key)
    if memo and memo[0] == meta.get("resourceVersion") and same_ignoring_nulls(memo[1], new):
        return False
    _writer.patch_status(PARENT, meta["namespace"], meta["name"], merge_patch(old, new))
    _written_status[key] = (meta.get("resourceVersion"), new)
    return True
