"""app.py, the WIT adapter, under CPython: against the Python bindings
`componentize-py bindings` generates from wit/controller (the same types the
component gets; ECHO_WIT_DIR names another contract folder)."""

import importlib
import json
import os
import subprocess
import sys

import pytest

import logic

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
GENERATED = ("app", "wit_world", "componentize_py_types", "componentize_py_async_support", "poll_loop")


@pytest.fixture(scope="module")
def bound(tmp_path_factory):
    tool = os.path.join(os.path.dirname(sys.executable), "componentize-py")
    if not os.path.exists(tool):
        pytest.skip("componentize-py is not installed beside this Python (use target/venv-componentize)")
    out = tmp_path_factory.mktemp("bindings")
    wit = os.environ.get("ECHO_WIT_DIR", os.path.join(ROOT, "wit", "controller"))
    run = subprocess.run([tool, "-d", wit, "-w", "logic-module", "bindings", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, "componentize-py cannot read the contract:\n" + run.stderr[:2000]
    sys.path.insert(0, str(out))
    try:
        app = importlib.import_module("app")
        wit = importlib.import_module("wit_world.exports.reconciler")
        types = importlib.import_module("componentize_py_types")
        yield app, wit, types
    finally:
        sys.path.remove(str(out))
        for name in list(sys.modules):
            if name.split(".")[0] in GENERATED:
                del sys.modules[name]


def parent(spec):
    return json.dumps({"metadata": {"name": "hello", "namespace": "default", "uid": "u1", "generation": 1}, "spec": spec})


def test_manifest(bound):
    app, wit, _ = bound
    manifest = app.Reconciler().manifest()
    assert (manifest.name, manifest.version) == ("echo-py", "0.1.0")
    assert manifest.parent == wit.KindInfo("python.example.c5c3.io", "v1", "Echo", "echoes", True)
    assert manifest.owned == [wit.KindInfo("", "v1", "ConfigMap", "configmaps", True)]
    assert manifest.reads == []
    assert (manifest.field_manager, manifest.event_reporter) == ("echo-py", "echo-py")
    assert manifest.crd == logic.CRD


def test_answers_pass_through(bound):
    app, _, _ = bound
    reconciler = app.Reconciler()
    assert reconciler.references(parent({})) == []
    [text] = reconciler.desired(parent({"text": "hi"}), [], [])
    assert json.loads(text)["data"]["echo"] == "hi"
    assert json.loads(reconciler.status(parent({"text": 1}), [], [], "now", None))["problem"] == "spec.text: must be a string"


def test_invalid_is_err_invalid_with_field_errors(bound):
    app, wit, types = bound
    with pytest.raises(types.Err) as error:
        app.Reconciler().desired(parent({"text": 1, "shout": "x"}), [], [])
    assert error.value.value == wit.Error_Invalid([
        wit.FieldError("spec.text", "must be a string"),
        wit.FieldError("spec.shout", "must be a boolean"),
    ])


def test_malformed_is_err_malformed(bound):
    app, wit, types = bound
    for call in (lambda r: r.references("{"), lambda r: r.desired("[]", [], []), lambda r: r.status("x", [], [], "now", None)):
        with pytest.raises(types.Err) as error:
            call(app.Reconciler())
        assert isinstance(error.value.value, wit.Error_Malformed)
        assert error.value.value.value[0].path == ""


def test_a_bug_is_an_answer_not_a_trap(bound, monkeypatch):
    app, wit, types = bound

    def broken(*_):
        raise KeyError("oops")

    monkeypatch.setattr(logic, "desired", broken)
    with pytest.raises(types.Err) as error:
        app.Reconciler().desired(parent({"text": "hi"}), [], [])
    assert error.value.value == wit.Error_Malformed([wit.FieldError("", "echo-py: internal error: KeyError")])
