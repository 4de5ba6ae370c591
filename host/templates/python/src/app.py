"""The {{name}} logic module: a {{kind}} ({{group}}/{{version}}) owns one
ConfigMap named after it whose data holds `spec.message`.

Written with the wasm-operator Python SDK (vendor/wasm-operator-sdk, see its
README): `desired` says which objects the parent should own, with only the
fields the module sets, `status` what its status says; the SDK does the
contract's JSON and the owner references. The module writes by server-side
apply (`writes = "apply"`): the host applies each answer under the module's
field manager, so a field the module stops setting is removed and fields
others set stay. `make` builds this file into target/{{name}}.wasm with
componentize-py (the `Reconciler` below is what it instantiates).
"""

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
    set_condition,
)

PARENT = Kind("{{group}}", "{{version}}", "{{kind}}", "{{plural}}")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")


def message_of(parent: JsonObject) -> str:
    """The parent's `spec.message`; `Invalid` when it is missing or empty
    (the host then changes nothing and reports the field in the status)."""
    spec = parent.get("spec")
    message = spec.get("message") if isinstance(spec, dict) else None
    if not isinstance(message, str) or not message:
        raise Invalid("spec.message", "must be a non-empty string")
    return message


def config_map(parent: JsonObject, message: str) -> JsonObject:
    """The ConfigMap the parent owns: only the fields the module sets. The SDK
    adds the namespace and the owner reference."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": parent["metadata"]["name"],
            "labels": {"app.kubernetes.io/managed-by": "{{name}}"},
        },
        "data": {"message": message},
    }


class App(Module):
    manifest = Manifest(
        name="{{name}}",
        version="0.1.0",
        parent=PARENT,
        # Read when componentize-py imports this file at build time: the component carries the text.
        crd=read_text(__file__, "crd.yaml"),
        owned=[CONFIG_MAP],
    )
    # Each answer is written by server-side apply: a data key the module no
    # longer answers is removed, what others set on the ConfigMap stays.
    writes = "apply"

    def desired(self, parent: JsonObject, ctx: Context) -> list[JsonObject]:
        return [config_map(parent, message_of(parent))]

    def status(self, parent: JsonObject, ctx: StatusContext) -> JsonObject:
        name = parent["metadata"]["name"]
        current = ctx.owned.get(CONFIG_MAP, name)
        published = current is not None and (current.get("data") or {}).get("message") == (
            (parent.get("spec") or {}).get("message")
        )
        if ctx.problem:
            ready, reason, message = False, "Invalid" if ctx.problem.startswith("invalid") else "Failed", ctx.problem
        elif published:
            ready, reason, message = True, "Published", f"ConfigMap {name} holds the message"
        else:
            ready, reason, message = False, "Pending", f"waiting for ConfigMap {name}"
        conditions = (parent.get("status") or {}).get("conditions")
        status: JsonObject = {
            "observedGeneration": observed_generation(parent) or 0,
            "conditions": set_condition(conditions, "Ready", ready, reason, message, ctx.now),
        }
        if ctx.problem:
            status["problem"] = ctx.problem
        return status


Reconciler = reconciler(App())  # what componentize-py instantiates for the `reconciler` export
