"""A kopf-style handler for Memcached CRs, with every decision taken by the
logic component. Registered in a kopf operator it reads:

    @kopf.on.create("memcached.c5c3.io", "v1beta1", "memcacheds")
    @kopf.on.update("memcached.c5c3.io", "v1beta1", "memcacheds")
    @kopf.on.resume("memcached.c5c3.io", "v1beta1", "memcacheds")
    def reconcile(body, logger, **kwargs): ...

kopf calls it with keyword arguments (body, spec, meta, name, namespace,
logger, patch, ...); the operator adds `owned`, the objects of the owned
kinds this CR controls now (listed by its controller owner reference), and
`secrets`, the referenced Secrets that exist. It answers what to apply, in
order, and which current objects to delete: those the answer leaves out.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

from memcached_logic import Logic, LogicError

try:
    from kopf import PermanentError
except ImportError:  # the example runs without kopf installed

    class PermanentError(Exception):
        """kopf's "do not retry": the CR itself must change."""


# Compiled once per process, as an operator does at start-up.
_LOGIC: Logic | None = None


def logic() -> Logic:
    global _LOGIC
    if _LOGIC is None:
        _LOGIC = Logic()
    return _LOGIC


def reconcile(
    body: Mapping[str, Any],
    logger: logging.Logger | None = None,
    owned: Sequence[Mapping[str, Any]] = (),
    secrets: Sequence[Mapping[str, Any]] = (),
    **_: Any,
) -> dict:
    """One reconcile: {"apply": [desired objects, in apply order], "delete":
    [current objects the answer leaves out]}. An invalid CR raises
    PermanentError naming each field path, and deletes nothing."""
    logger = logger or logging.getLogger(__name__)
    instance = logic().instance()  # fresh per reconcile, like the Rust host
    owned = [dict(o) for o in owned]
    try:
        desired = [json.loads(text) for text in instance.desired(dict(body), owned, [dict(s) for s in secrets])]
    except LogicError as err:
        raise PermanentError(f"{body.get('metadata', {}).get('name', '?')}: {err}") from err
    wanted = {identity(o) for o in desired}
    plan = {"apply": desired, "delete": [o for o in owned if identity(o) not in wanted]}
    logger.info("apply %s; delete %s", [identity(o) for o in plan["apply"]], [identity(o) for o in plan["delete"]])
    return plan


def identity(obj: Mapping[str, Any]) -> tuple[str, str]:
    """What identifies an owned object in its parent's namespace: kind and name."""
    return obj.get("kind", ""), (obj.get("metadata") or {}).get("name", "")
