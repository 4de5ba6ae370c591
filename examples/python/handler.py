"""A kopf-style handler for Memcached CRs, with every decision taken by the
logic component. Registered in a kopf operator it reads:

    @kopf.on.create("memcached.c5c3.io", "v1alpha1", "memcacheds")
    @kopf.on.update("memcached.c5c3.io", "v1alpha1", "memcacheds")
    @kopf.on.resume("memcached.c5c3.io", "v1alpha1", "memcacheds")
    def reconcile(body, logger, **kwargs): ...

kopf calls it with keyword arguments (body, spec, meta, name, namespace,
logger, patch, ...); it answers what to apply (server-side apply, so it needs
no current objects) and which optional kinds to delete.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

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


def reconcile(body: Mapping[str, Any], logger: logging.Logger | None = None, secrets=(), **_: Any) -> dict:
    """One reconcile: {"apply": [objects in reconcile order], "delete":
    [kinds whose object must not exist]}. An invalid CR raises
    PermanentError naming each field path, and deletes nothing."""
    logger = logger or logging.getLogger(__name__)
    instance = logic().instance()  # fresh per reconcile, like the Rust host
    owned = [k.kind for k in instance.manifest().owned]
    try:
        desired = instance.desired_all(dict(body), [None] * len(owned), list(secrets))
    except LogicError as err:
        raise PermanentError(f"{body.get('metadata', {}).get('name', '?')}: {err}") from err
    plan = {"apply": [], "delete": []}
    for kind, text in zip(owned, desired):
        if text is None:
            plan["delete"].append(kind)
        else:
            plan["apply"].append(json.loads(text))
    logger.info("apply %s; delete %s", [o["kind"] for o in plan["apply"]], plan["delete"])
    return plan
