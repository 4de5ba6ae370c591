"""wasm-operator's Python SDK: write a logic module's `desired` and
`status` on dicts; the SDK does the JSON, the WIT glue, owner references
and merging. See sdk/python/README.md.
"""

from . import log
from .component import reconciler, writes
from .errors import (
    FieldError,
    Invalid,
    Malformed,
    ModuleError,
    Unsupported,
    describe,
    invalid,
    malformed,
    unsupported,
)
from .helpers import (
    adopt,
    controller_of,
    find_condition,
    merge,
    observed_generation,
    owner_reference,
    replace_at,
    replaced_pointers,
    replacing,
    required,
    set_condition,
)
from .jsontext import JsonObject
from .module import (
    Context,
    Kind,
    Manifest,
    Module,
    ObjectRef,
    Objects,
    StatusContext,
    WriteModel,
    module,
    read_text,
    run_desired,
    run_references,
    run_status,
    write_model,
)

__all__ = [
    "Context",
    "FieldError",
    "Invalid",
    "JsonObject",
    "Kind",
    "Malformed",
    "Manifest",
    "Module",
    "ModuleError",
    "ObjectRef",
    "Objects",
    "StatusContext",
    "Unsupported",
    "WriteModel",
    "adopt",
    "controller_of",
    "describe",
    "find_condition",
    "invalid",
    "log",
    "malformed",
    "merge",
    "module",
    "observed_generation",
    "owner_reference",
    "read_text",
    "reconciler",
    "replace_at",
    "replaced_pointers",
    "replacing",
    "required",
    "run_desired",
    "run_references",
    "run_status",
    "set_condition",
    "unsupported",
    "write_model",
    "writes",
]
