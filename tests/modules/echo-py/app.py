"""The Echo logic module: logic.py behind the WIT contract.

componentize-py (scripts/build-python-module.sh) builds this into
target/echo-py.wasm against wit/controller (world `logic-module`). It
generates the `wit_world` package: the exported interface's Protocol is
`wit_world.exports.Reconciler`, its types are in
`wit_world.exports.reconciler`, and an `error` answer is raised as
`componentize_py_types.Err(<variant>)`. This file only converts; the logic,
and its tests, are in logic.py and test_logic.py.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import reconciler as wit

import logic


def _field_errors(errors):
    return [wit.FieldError(path=path, message=message) for path, message in errors]


def _to_wit_error(error):
    if isinstance(error, logic.Malformed):
        return wit.Error_Malformed(_field_errors(error.errors))
    if isinstance(error, logic.Invalid):
        return wit.Error_Invalid(_field_errors(error.errors))
    if isinstance(error, logic.Unsupported):
        return wit.Error_Unsupported(error.message)
    # A bug in this module, not in the input: still an answer, never a trap.
    return wit.Error_Malformed([wit.FieldError(path="", message="echo-py: internal error: " + type(error).__name__)])


def _call(function, *args):
    """Runs a logic function; every exception becomes an `Err(error)`."""
    try:
        return function(*args)
    except Err:
        raise
    except Exception as error:  # noqa: BLE001 - a trap would mark the module broken
        raise Err(_to_wit_error(error)) from None


def _kind(group, version, kind, plural, namespaced):
    return wit.KindInfo(group=group, version=version, kind=kind, plural=plural, namespaced=namespaced)


class Reconciler(exports.Reconciler):
    def manifest(self):
        return wit.ModuleManifest(
            name=logic.NAME,
            version=logic.VERSION,
            parent=_kind(logic.GROUP, logic.PARENT_VERSION, logic.PARENT_KIND, logic.PARENT_PLURAL, True),
            crd=logic.CRD,
            owned=[_kind("", "v1", "ConfigMap", "configmaps", True)],
            reads=[],
            field_manager=logic.NAME,
            event_reporter=logic.NAME,
        )

    def references(self, parent):
        return _call(logic.references, parent)

    def desired(self, parent, owned, related):
        return _call(logic.desired, parent, owned, related)

    def status(self, parent, owned, related, now, problem):
        return _call(logic.status, parent, owned, related, now, problem)
