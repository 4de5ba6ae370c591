"""The componentize-py glue against the real generated bindings (under
CPython: the same Python types the component gets, the `log` import's stub)."""

import importlib
import json
import sys
import traceback
from types import ModuleType

import pytest

from wasm_operator_sdk import (
    Admission,
    Invalid,
    Kind,
    Malformed,
    Manifest,
    Module,
    Unsupported,
    WriteModel,
    component,
    log,
    reach,
    reconciler,
    writes,
)
from wasm_operator_sdk.component import format_traceback

UID = "u-1"
SITE = Kind("example.com", "v1", "Site", "sites")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
SECRET = Kind("", "v1", "Secret", "secrets", namespaced=True)


class Site(Module):
    manifest = Manifest("site", "1.2.3", SITE, crd="crd text", owned=[CONFIG_MAP], reads=[SECRET])

    def references(self, parent):
        return [SECRET.ref("creds"), SECRET.ref("shared", namespace="global")]

    def desired(self, parent, ctx):
        spec = parent.get("spec", {})
        if spec.get("fail") == "invalid":
            raise Invalid([("spec.a", "must be set"), ("spec.b", "must be a number")])
        if spec.get("fail") == "unsupported":
            raise Unsupported("no such thing")
        if spec.get("fail") == "bug":
            return [{}][1]  # IndexError: a bug
        name = parent["metadata"]["name"]
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}}]

    def status(self, parent, ctx):
        if ctx.problem == "raise":
            raise RuntimeError("status broke")
        return {"problem": ctx.problem, "now": ctx.now}


Reconciler = reconciler(Site())


def parent(**spec):
    metadata = {"name": "blog", "namespace": "web", "uid": UID}
    return json.dumps({"apiVersion": "example.com/v1", "kind": "Site", "metadata": metadata, "spec": spec})


def test_the_class_componentize_py_instantiates(bindings):
    assert Reconciler.__name__ == "Reconciler"
    wit, _, _ = bindings
    manifest = Reconciler().manifest()
    assert manifest == wit.ModuleManifest(
        name="site",
        version="1.2.3",
        parent=wit.KindInfo("example.com", "v1", "Site", "sites", True),
        crd="crd text",
        owned=[wit.KindInfo("", "v1", "ConfigMap", "configmaps", True)],
        reads=[wit.KindInfo("", "v1", "Secret", "secrets", True)],
        field_manager="site-operator",
        event_reporter="site-operator",
    )


def test_answers(bindings):
    wit, _, _ = bindings
    reconciler_ = Reconciler()
    assert reconciler_.references(parent()) == [
        wit.ObjectRef(group="", version="v1", kind="Secret", namespace=None, name="creds"),
        wit.ObjectRef(group="", version="v1", kind="Secret", namespace="global", name="shared"),
    ]
    [text] = reconciler_.desired(parent(), [], [])
    assert json.loads(text)["metadata"]["ownerReferences"][0]["uid"] == UID
    assert json.loads(reconciler_.status(parent(), [], [], "now", "p")) == {"problem": "p", "now": "now"}


def test_the_writes_class_answers_the_modules_write_model(bindings):
    wit = importlib.import_module("wit_world.exports.writes")
    assert writes(Reconciler).__name__ == "Writes"
    assert writes(Reconciler)().model() is wit.WriteModel.REPLACE

    class Applying(Site):
        writes = "apply"

    assert writes(reconciler(Applying()))().model() is wit.WriteModel.APPLY
    assert writes(object)().model() is wit.WriteModel.REPLACE, "a class reconciler() did not make"


def test_the_entry_exports_the_app_files_reconciler_and_its_writes(bindings, monkeypatch):
    wit = importlib.import_module("wit_world.exports.writes")

    class Applying(Site):
        writes = WriteModel.APPLY

    app = ModuleType("app")
    app.Reconciler = reconciler(Applying())
    monkeypatch.setitem(sys.modules, "app", app)
    monkeypatch.delitem(sys.modules, "wasm_operator_sdk.entry", raising=False)
    entry = importlib.import_module("wasm_operator_sdk.entry")
    assert entry.Reconciler is app.Reconciler
    assert entry.Writes().model() is wit.WriteModel.APPLY
    assert entry.Reach.__name__ == "Reach"
    assert entry.Admission is Admission
    # An app file's own Writes is kept.
    app.Writes = writes(Reconciler)
    assert importlib.reload(entry).Writes is app.Writes
    monkeypatch.delitem(sys.modules, "wasm_operator_sdk.entry")


def test_module_errors_are_the_wit_error_variant(bindings):
    wit, _, types = bindings
    with pytest.raises(types.Err) as error:
        Reconciler().desired(parent(fail="invalid"), [], [])
    assert error.value.value == wit.Error_Invalid(
        [wit.FieldError("spec.a", "must be set"), wit.FieldError("spec.b", "must be a number")]
    )
    with pytest.raises(types.Err) as error:
        Reconciler().desired(parent(fail="unsupported"), [], [])
    assert error.value.value == wit.Error_Unsupported("no such thing")
    for call in (
        lambda r: r.references("{"),
        lambda r: r.desired("[]", [], []),
        lambda r: r.status(json.dumps({"metadata": {}}), [], [], "now", None),
    ):
        with pytest.raises(types.Err) as error:
            call(Reconciler())
        assert isinstance(error.value.value, wit.Error_Malformed)
    assert error.value.value == wit.Error_Malformed([wit.FieldError("metadata.name", "must be a non-empty string")])
    assert Malformed  # the SDK type the glue mapped


def test_a_bug_is_logged_at_error_then_raised_so_the_call_traps(bindings, monkeypatch):
    _, wit_log, _ = bindings
    lines = []
    monkeypatch.setattr(wit_log, "write", lambda level, message: lines.append((level, message)))
    with pytest.raises(IndexError, match="list index out of range"):
        Reconciler().desired(parent(fail="bug"), [], [])
    assert [level for level, _ in lines] == [wit_log.Level.ERROR, wit_log.Level.ERROR]
    trace, last = (message for _, message in lines)
    assert trace.startswith("Traceback (most recent call last):")
    assert "in desired" in trace
    assert trace.endswith("IndexError: list index out of range")
    # The last error line is the one the host reports for the trap.
    assert last == "desired: IndexError: list index out of range"

    lines.clear()
    with pytest.raises(RuntimeError, match="status broke"):
        Reconciler().status(parent(), [], [], "now", "raise")
    assert lines[-1] == (wit_log.Level.ERROR, "status: RuntimeError: status broke")


def test_a_long_traceback_keeps_its_end(bindings, monkeypatch):
    _, wit_log, _ = bindings
    lines = []
    monkeypatch.setattr(wit_log, "write", lambda level, message: lines.append(message))

    class Deep(Site):
        def desired(self, parent, ctx):
            cause = None
            for index in range(100):  # a long chain of causes: a traceback of about 20 KB
                try:
                    raise KeyError(f"cause {index}") from cause
                except KeyError as error:
                    cause = error
            raise ValueError("at the bottom") from cause

    with pytest.raises(ValueError, match="at the bottom"):
        reconciler(Deep())().desired(parent(), [], [])
    assert len(lines[0]) <= 4100
    assert lines[0].startswith("...\n")
    assert lines[0].endswith("ValueError: at the bottom")


def test_log_writes_through_the_import(bindings, monkeypatch):
    _, wit_log, _ = bindings
    lines = []
    monkeypatch.setattr(wit_log, "write", lambda level, message: lines.append((level, message)))
    log.debug("d")
    log.info("i")
    log.warn("w")
    log.error("e")
    assert lines == [
        (wit_log.Level.DEBUG, "d"),
        (wit_log.Level.INFO, "i"),
        (wit_log.Level.WARN, "w"),
        (wit_log.Level.ERROR, "e"),
    ]


def test_log_falls_back_to_stderr_under_cpython(bindings, capsys):
    # The generated stub of the import (not inside a component) raises NotImplementedError.
    log.info("hello")
    assert capsys.readouterr().err == "[info] hello\n"


def raised(function):
    try:
        function()
    except Exception as error:  # noqa: BLE001
        return error
    raise AssertionError("did not raise")


def test_format_traceback_is_pythons_without_source_lines():
    def chained():
        try:
            {}["k"]
        except KeyError as error:
            raise ValueError("bad") from error

    def during():
        try:
            [][0]
        except IndexError:
            raise RuntimeError()  # noqa: B904 - the context is what is tested

    def suppressed():
        try:
            [][0]
        except IndexError:
            raise OSError("quiet") from None

    for function in (chained, during, suppressed):
        error = raised(function)
        expected = [
            line
            for line in "".join(traceback.format_exception(error)).splitlines()
            if not line.startswith("    ") and not (line.strip() and set(line.strip()) <= set("^~"))
        ]
        assert format_traceback(error).splitlines() == expected


def test_in_a_component_a_bug_exits_after_the_log(bindings, monkeypatch):
    _, wit_log, _ = bindings
    events = []
    monkeypatch.setattr(wit_log, "write", lambda level, message: events.append(("log", message)))
    monkeypatch.setattr(log, "IN_COMPONENT", True)

    class Exited(BaseException):
        pass

    def exit_(status):
        events.append(("exit", status))
        raise Exited

    monkeypatch.setattr(component.os, "_exit", exit_)
    with pytest.raises(Exited):
        Reconciler().desired(parent(fail="bug"), [], [])
    assert events[-2:] == [("log", "desired: IndexError: list index out of range"), ("exit", 70)]
    # The glue's own frames are left out of the traceback: the module's come first.
    assert events[0][1].splitlines()[1].endswith("in desired")


def test_in_a_component_standard_output_and_error_go_nowhere(monkeypatch, capsys):
    monkeypatch.setattr(component.sys, "stdout", component.sys.stdout)
    monkeypatch.setattr(component.sys, "stderr", component.sys.stderr)
    component.discard_stdio()  # under CPython: nothing
    print("kept")
    assert capsys.readouterr().out == "kept\n"
    monkeypatch.setattr(log, "IN_COMPONENT", True)
    reconciler(Site())
    print("gone")
    print("gone too", file=component.sys.stderr)
    component.sys.stdout.flush()
    assert capsys.readouterr() == ("", "")


class Ticking(Site):
    def desired(self, parent, ctx):
        ctx.reconcile_after(30)
        ctx.reconcile_after(2.5)
        return super().desired(parent, ctx)


def test_the_reach_class_answers_desired_with_its_timer(bindings):
    wit = importlib.import_module("wit_world.exports.reach")
    assert reach(Reconciler).__name__ == "Reach"
    assert reach(Reconciler)().manifest() == wit.ReachManifest(False, False, False, [], [], None)
    assert reach(Reconciler)().selections(parent()) == []
    plain = reach(Reconciler)().answer(parent(), [], [], "2026-12-02T10:00:00Z")
    assert plain == wit.DesiredState(Reconciler().desired(parent(), [], []), None, [], [])
    ticking = reach(reconciler(Ticking()))().answer(parent(), [], [], "2026-12-02T10:00:00Z")
    assert ticking.again_after_ms == 2_500
    assert ticking.objects == plain.objects


def test_the_reach_of_a_class_reconciler_did_not_make_has_no_timer(bindings):
    class Hand:
        def desired(self, parent, owned, related):
            return ["{}"]

    wit = importlib.import_module("wit_world.exports.reach")
    assert reach(Hand)().answer(parent(), [], [], "now") == wit.DesiredState(["{}"], None, [], [])


def test_reach_answers_module_errors_and_refuses_what_it_does_not_do(bindings):
    wit, _, types = bindings
    with pytest.raises(types.Err) as error:
        reach(Reconciler)().answer(parent(fail="unsupported"), [], [], "now")
    assert error.value.value == wit.Error_Unsupported("no such thing")
    with pytest.raises(types.Err) as error:
        reach(Reconciler)().finalize(parent(), [], [], "now")
    assert error.value.value == wit.Error_Unsupported("this module does not finalize")
    assert Admission().takes_part() is False
    admission = importlib.import_module("wit_world.exports.admission")
    with pytest.raises(types.Err) as error:
        Admission().review(parent(), None, admission.Operation.CREATE)
    assert error.value.value == wit.Error_Unsupported("this module takes no part in admission")
