"""The Echo module: an Echo's `spec.text` echoed into a ConfigMap named
`<name>-echo` (upper case with `spec.shout`), written with the Python SDK
(sdk/python). `scripts/build-python-module.sh` builds it into
target/echo-py.wasm with componentize-py.

A test module, so it can misbehave: the text `raise` makes `desired` raise
an unexpected exception (the component traps; the SDK logs its message),
and `print` writes to WASI's standard output behind the SDK's back (the
host discards it and the echo goes on).
"""

import os

from wasm_operator_sdk import (
    Context,
    Invalid,
    JsonObject,
    Kind,
    Manifest,
    Module,
    StatusContext,
    describe,
    observed_generation,
    read_text,
    reconciler,
)

GROUP = "python.example.c5c3.io"
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
MAX_NAME = 63  # the parent's name is also a label value


def validate(parent: JsonObject) -> tuple[list[tuple[str, str]], str, bool]:
    """Every rule the parent breaks, and the spec's text and shout."""
    errors, text, shout = [], "", False
    if len(parent["metadata"]["name"]) > MAX_NAME:
        errors.append(("metadata.name", f"must be at most {MAX_NAME} characters (it is a label value)"))
    spec = parent.get("spec")
    spec = {} if spec is None else spec
    if not isinstance(spec, dict):
        return [*errors, ("spec", "must be an object")], text, shout
    if spec.get("text") is not None and not isinstance(spec["text"], str):
        errors.append(("spec.text", "must be a string"))
    if spec.get("shout") is not None and not isinstance(spec["shout"], bool):
        errors.append(("spec.shout", "must be a boolean"))
    return errors, spec.get("text") or "", spec.get("shout") or False


def config_map_name(parent: JsonObject) -> str:
    return str(parent["metadata"]["name"]) + "-echo"


class Echo(Module):
    manifest = Manifest(
        name="echo-py",
        version="0.1.0",
        parent=Kind(GROUP, "v1", "Echo", "echoes"),
        # Read when componentize-py imports this file at build time: the component carries the text.
        crd=read_text(__file__, "crd.yaml"),
        owned=[CONFIG_MAP],
        field_manager="echo-py",
        event_reporter="echo-py",
    )

    def desired(self, parent: JsonObject, ctx: Context) -> list[JsonObject]:
        errors, text, shout = validate(parent)
        if errors:
            raise Invalid(errors)
        if text == "raise":
            raise RuntimeError("asked to raise by spec.text")
        if text == "print":
            os.write(1, b"straight to WASI stdout\n")
        if not text:
            return []  # the host deletes the ConfigMap
        name = config_map_name(parent)
        # The module owns all of data: the keys it does not set go (null removes).
        current = ctx.owned.get(CONFIG_MAP, name) or {}
        data = dict.fromkeys(current.get("data") or {})
        data.update(text=text, echo=text.upper() if shout else text, language="python")
        labels = {"app.kubernetes.io/managed-by": "echo-py", GROUP + "/echo": parent["metadata"]["name"]}
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data}]

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        status: JsonObject = {"observedGeneration": observed_generation(parent) or 0}
        current = ctx.owned.get(CONFIG_MAP, config_map_name(parent))
        echoed = ((current or {}).get("data") or {}).get("echo")
        if isinstance(echoed, str):
            status["echoed"] = echoed
        problem = ctx.problem or describe(validate(parent)[0])
        if problem:
            status["problem"] = problem
        return status


Reconciler = reconciler(Echo())
