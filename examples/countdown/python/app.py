"""The Countdown module: `example.c5c3.io/v1` `Countdown` counts down to
`spec.deadline` (RFC 3339). Its status says how many seconds are left
(`remainingSeconds`, `phase: Counting`), then `phase: Done`. Nothing else
changes while it counts: the module asks the host to reconcile the parent
again every `spec.everySeconds` (1 by default) until the deadline, with
`ctx.reconcile_after`, and asks nothing once it has passed. It owns one
ConfigMap holding the deadline, which no tick changes. The same answers as
../rust, held to them by ../cases.
"""

import re
from datetime import datetime

from wasm_operator_sdk import (
    Context,
    Invalid,
    JsonObject,
    Kind,
    Manifest,
    Module,
    StatusContext,
    observed_generation,
    read_text,
    reconciler,
)

COUNTDOWN = Kind("example.c5c3.io", "v1", "Countdown", "countdowns")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")

RFC_3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def epoch_seconds(text: object) -> int | None:
    """An RFC 3339 time as whole seconds since the epoch; None for anything else."""
    match = RFC_3339.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    day, time, offset = match.groups()
    try:
        at = datetime.fromisoformat(f"{day}T{time}{'+00:00' if offset in 'Zz' else offset}")
    except ValueError:  # a day or hour that does not exist
        return None
    return int(at.timestamp())


def deadline(parent: JsonObject) -> int:
    """The deadline as seconds since the epoch."""
    text = (parent.get("spec") or {}).get("deadline")
    seconds = epoch_seconds(text)
    if seconds is None:
        raise Invalid("spec.deadline", f'"{text}" is not an RFC 3339 time')
    return seconds


def every(parent: JsonObject) -> int:
    """How often the status is brought up to date, in seconds (the CRD's default: 1)."""
    seconds = (parent.get("spec") or {}).get("everySeconds")
    if seconds is None:
        return 1
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise Invalid("spec.everySeconds", "must be a whole number of seconds")
    if seconds < 1:
        raise Invalid("spec.everySeconds", "must be at least 1")
    return seconds


def remaining(parent: JsonObject, now: str) -> int:
    """Seconds from `now` (the host's time) to the deadline, never below 0."""
    at = epoch_seconds(now)
    if at is None:
        raise ValueError(f"the host's time {now!r} is not RFC 3339")
    return max(deadline(parent) - at, 0)


class Countdowns(Module):
    manifest = Manifest(
        name="countdown",
        version="0.1.0",
        parent=COUNTDOWN,
        crd=read_text(__file__, "crd.yaml"),  # read at build time: the component carries it
        owned=[CONFIG_MAP],
    )
    # Server-side apply: each answer holds only the module's fields.
    writes = "apply"

    def desired(self, parent: JsonObject, ctx: Context) -> list[JsonObject]:
        left = remaining(parent, ctx.now)
        tick = every(parent)
        if left > 0:
            # The next tick, or the deadline itself if it comes first.
            ctx.reconcile_after(min(tick, left))
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": parent["metadata"]["name"]},
            "data": {"deadline": str(parent["spec"]["deadline"])},
        }
        return [config_map]

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        generation = observed_generation(parent)
        if ctx.problem is not None:
            return {"observedGeneration": generation, "phase": "Invalid", "remainingSeconds": 0, "message": ctx.problem}
        left = remaining(parent, ctx.now)
        return {"observedGeneration": generation, "phase": "Counting" if left > 0 else "Done", "remainingSeconds": left}


Reconciler = reconciler(Countdowns())  # what componentize-py instantiates for the `reconciler` export
