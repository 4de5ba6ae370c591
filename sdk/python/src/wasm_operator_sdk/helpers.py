"""Kubernetes plumbing on plain dicts: controller owner references,
adoption, merging onto the server's object, conditions. Each is usable on
its own; the SDK's glue applies `adopt` and `merge` to every desired object.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from .errors import Invalid, Malformed
from .jsontext import JsonObject, type_name

OWNER_REFERENCES = "metadata.ownerReferences"


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise Malformed("metadata", "must be an object, got " + type_name(metadata))
    return metadata


def required(obj: Any, path: str) -> Any:
    """The value at `path` (fields separated by dots, such as
    `spec.credentialsSecret`) of `obj`. Missing or None, it or a field
    above it, is `Invalid` at the whole path, "required": the error the
    Rust SDK's typed parent gives for a missing field.

    `secret = required(parent, "spec.credentialsSecret")`"""
    value = obj
    for field in path.split("."):
        value = value.get(field) if isinstance(value, Mapping) else None
        if value is None:
            raise Invalid(path, "required")
    return value


def owner_reference(parent: Mapping[str, Any]) -> JsonObject:
    """The controller owner reference to `parent`: `apiVersion`, `kind`,
    `name`, `uid`, `controller: true`, `blockOwnerDeletion: true`.
    `Malformed` naming every field the parent lacks."""
    metadata = _metadata(parent)
    fields = {
        "apiVersion": parent.get("apiVersion"),
        "kind": parent.get("kind"),
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
    }
    missing = [
        ((key if key in ("apiVersion", "kind") else "metadata." + key), "must be a non-empty string")
        for key, value in fields.items()
        if not isinstance(value, str) or not value
    ]
    if missing:
        raise Malformed(missing)
    return {**fields, "controller": True, "blockOwnerDeletion": True}


def _owner_references(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if obj is None:
        return []
    references = _metadata(obj).get("ownerReferences")
    if references is None:
        return []
    if not isinstance(references, list) or not all(isinstance(r, Mapping) for r in references):
        raise Malformed(OWNER_REFERENCES, "must be an array of objects")
    return references


def controller_of(obj: Mapping[str, Any] | None) -> Optional[Mapping[str, Any]]:
    """The object's controller owner reference (`controller: true`), or None."""
    for reference in _owner_references(obj):
        if reference.get("controller") is True:
            return reference
    return None


def adopt(parent: Mapping[str, Any], current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> JsonObject:
    """`desired` with the parent's controller owner reference, keeping every
    other (non-controller) reference it or `current` had (current's order
    first). An orphan is adopted; an object `current` or `desired` says
    another controller owns is refused: `Invalid` at
    `metadata.ownerReferences`, "owned by another controller (<kind> <name>)".
    Returns a new object; the arguments are not changed."""
    ours = owner_reference(parent)
    for obj in (current, desired):
        controller = controller_of(obj)
        if controller is not None and controller.get("uid") != ours["uid"]:
            raise Invalid(
                OWNER_REFERENCES,
                f"owned by another controller ({controller.get('kind')} {controller.get('name')})",
            )
    references: list[Any] = []
    positions: dict[Any, int] = {}
    for reference in (*_owner_references(current), *_owner_references(desired)):
        uid = reference.get("uid")
        value = ours if uid == ours["uid"] else copy.deepcopy(dict(reference))
        if uid in positions:
            references[positions[uid]] = value
        else:
            positions[uid] = len(references)
            references.append(value)
    if ours["uid"] not in positions:
        references.append(ours)
    result = dict(desired)
    result["metadata"] = {**_metadata(desired), "ownerReferences": references}
    return result


def _named(items: Sequence[Any]) -> bool:
    """Every item an object with a string `name`, each name once."""
    names = set()
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            return False
        names.add(item["name"])
    return len(names) == len(items)


def merge(current: Any, desired: Any) -> Any:
    """`current` with `desired`'s fields applied, as a new value.

    Objects merge member by member, recursively; a member `desired` sets to
    None is removed. A list whose items are all objects with distinct
    `name`s (containers, ports, env, volumes) merges item by item by name,
    in desired's order (items desired does not list are dropped). Any other
    list, and any scalar, is replaced. What the server filled in survives,
    so merging the same desired onto the server's answer gives back the
    server's answer exactly: a steady state writes nothing.
    """
    if isinstance(desired, Mapping):
        base: Mapping[str, Any] = current if isinstance(current, Mapping) else {}
        result: JsonObject = {}
        for key, value in base.items():
            if key not in desired:
                result[key] = copy.deepcopy(value)
            elif desired[key] is not None:
                result[key] = merge(value, desired[key])
        for key, value in desired.items():
            if key not in base and value is not None:
                result[key] = merge(None, value)
        return result
    if isinstance(desired, list):
        if isinstance(current, list) and desired and _named(desired):
            by_name = {
                item["name"]: item
                for item in current
                if isinstance(item, Mapping) and isinstance(item.get("name"), str)
            }
            return [merge(by_name.get(item["name"]), item) for item in desired]
        return [merge(None, item) if isinstance(item, Mapping) else copy.deepcopy(item) for item in desired]
    return desired


class _Replacing(dict[str, Any]):
    """A desired object marked by `replacing`: the JSON pointers it owns whole."""

    replaced: tuple[str, ...] = ()


def _pointer(pointer: str) -> list[str]:
    """The member names of a JSON pointer (`/data`, `/spec/a~1b`)."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise ValueError(f"replacing: {pointer!r} is not a JSON pointer to a member (such as '/data')")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def replacing(obj: Mapping[str, Any], *pointers: str) -> JsonObject:
    """`obj` (a desired object, copied) marked as owning the members at these
    JSON pointers (`"/data"`) whole: after the merge onto the current object
    they are exactly `obj`'s, so keys the server (or an earlier version of
    the module) has there and `obj` lacks are removed instead of kept; a
    pointer `obj` has no value at removes the member. The same as the Rust
    SDK's `Object::replacing`."""
    for pointer in pointers:
        _pointer(pointer)
    result = _Replacing(obj)
    result.replaced = (*replaced_pointers(obj), *pointers)
    return result


def replaced_pointers(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The pointers `replacing` marked on `obj` (none for a plain dict)."""
    return obj.replaced if isinstance(obj, _Replacing) else ()


def replace_at(merged: JsonObject, desired: Mapping[str, Any], pointer: str) -> None:
    """Makes the member of `merged` at `pointer` exactly `desired`'s (removed
    when `desired` has none there, or None), in place. Nothing happens when
    `merged` has no object to hold it."""
    *path, key = _pointer(pointer)
    slot: Any = merged
    source: Any = desired
    for token in path:
        slot = slot.get(token) if isinstance(slot, dict) else None
        source = source.get(token) if isinstance(source, Mapping) else None
    if not isinstance(slot, dict):
        return
    value = source.get(key) if isinstance(source, Mapping) else None
    if value is None:
        slot.pop(key, None)
    else:
        slot[key] = merge(None, value)


def set_condition(
    conditions: Iterable[Mapping[str, Any]] | None,
    type: str,
    status: str | bool,
    reason: str,
    message: str,
    now: str,
    observed_generation: int | None = None,
) -> list[JsonObject]:
    """The conditions with the one of this `type` set (a new list; the order
    kept, a new type appended). `lastTransitionTime` stays unless `status`
    changed (or the condition is new): then it is `now`. `status` is
    "True", "False" or "Unknown" (a bool becomes "True"/"False")."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    result: list[JsonObject] = []
    found = False
    for condition in conditions or ():
        if condition.get("type") != type:
            result.append(copy.deepcopy(dict(condition)))
            continue
        if found:
            continue  # one condition per type
        found = True
        kept = condition.get("lastTransitionTime")
        since = kept if condition.get("status") == status and isinstance(kept, str) and kept else now
        result.append(_condition(type, status, reason, message, since, observed_generation))
    if not found:
        result.append(_condition(type, status, reason, message, now, observed_generation))
    return result


def _condition(type: str, status: str, reason: str, message: str, since: str, generation: int | None) -> JsonObject:
    condition: JsonObject = {"type": type, "status": status}
    if generation is not None:
        condition["observedGeneration"] = generation
    condition.update(lastTransitionTime=since, reason=reason, message=message)
    return condition


def find_condition(conditions: Iterable[Mapping[str, Any]] | None, type: str) -> Optional[Mapping[str, Any]]:
    """The condition of this `type`, or None."""
    for condition in conditions or ():
        if condition.get("type") == type:
            return condition
    return None


def observed_generation(parent: Mapping[str, Any]) -> int | None:
    """The parent's `metadata.generation` (for `status.observedGeneration`),
    or None when it has none. `Malformed` when it is not an integer."""
    generation = _metadata(parent).get("generation")
    if generation is None:
        return None
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise Malformed("metadata.generation", "must be an integer, got " + type_name(generation))
    return generation
