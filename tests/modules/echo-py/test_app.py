"""The Echo module under CPython, without the component: its logic through
the SDK's glue on texts (what the host sends and gets back), then the
componentize-py glue against the bindings componentize-py generates.
`target/venv-componentize/bin/python -m pytest -q tests/modules/echo-py`
(with sdk/python on the path, as conftest.py puts it)."""

import importlib
import json
import os
import subprocess
import sys

import app
import pytest
from wasm_operator_sdk import Invalid, Malformed, run_desired, run_references, run_status

ECHO = app.Echo()

UID = "6f1c2a7e-0000-4000-8000-000000000001"


def echo(text=None, shout=None, name="hello", namespace="default", uid=UID, generation=3, spec=True):
    metadata = {"name": name, "namespace": namespace, "uid": uid, "generation": generation}
    obj = {"apiVersion": "python.example.c5c3.io/v1", "kind": "Echo", "metadata": metadata}
    if spec:
        obj["spec"] = {}
        if text is not None:
            obj["spec"]["text"] = text
        if shout is not None:
            obj["spec"]["shout"] = shout
    return json.dumps(obj)


def server_config_map(name="hello-echo", data=None, owner_uid=UID, extra_refs=()):
    """A ConfigMap as the API server returns it: fields it filled in, and a
    label, an annotation and an owner reference someone else added."""
    refs = list(extra_refs)
    if owner_uid is not None:
        refs.append(
            {
                "apiVersion": "python.example.c5c3.io/v1",
                "kind": "Echo",
                "name": "hello",
                "uid": owner_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": "cm-uid-1",
            "resourceVersion": "4711",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "echo-py", "operation": "Apply"}],
            "labels": {
                "app.kubernetes.io/managed-by": "echo-py",
                "python.example.c5c3.io/echo": "hello",
                "team": "blue",
            },
            "annotations": {"note": "keep me"},
            "ownerReferences": refs,
        },
        "data": data if data is not None else {"text": "hi", "echo": "hi", "language": "python"},
    }


def desired(parent, owned=(), related=()):
    return [json.loads(text) for text in run_desired(ECHO, parent, [json.dumps(o) for o in owned], list(related))]


def status(parent, owned=(), problem=None):
    text = run_status(ECHO, parent, [json.dumps(o) for o in owned], [], "2026-01-01T00:00:00Z", problem)
    return json.loads(text)


# --- manifest and references -------------------------------------------------


def test_crd_is_embedded_and_names_the_parent():
    assert "kind: CustomResourceDefinition" in ECHO.manifest.crd
    assert "name: echoes.python.example.c5c3.io" in ECHO.manifest.crd
    assert "plural: echoes" in ECHO.manifest.crd
    assert "kind: Echo" in ECHO.manifest.crd


def test_references_are_none():
    assert run_references(ECHO, echo("hi")) == []


@pytest.mark.parametrize("text", ["", "{", "not json", "[1, 2]", '"a string"', "null", "NaN", '{"a": Infinity}'])
def test_references_refuse_malformed_parent(text):
    with pytest.raises(Malformed) as error:
        run_references(ECHO, text)
    assert [path for path, _ in error.value.errors] == [""]


# --- desired: creation -------------------------------------------------------


def test_creates_the_config_map():
    [cm] = desired(echo("hi"))
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "hello-echo",
            "namespace": "default",
            "labels": {
                "app.kubernetes.io/managed-by": "echo-py",
                "python.example.c5c3.io/echo": "hello",
            },
            "ownerReferences": [
                {
                    "apiVersion": "python.example.c5c3.io/v1",
                    "kind": "Echo",
                    "name": "hello",
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {"text": "hi", "echo": "hi", "language": "python"},
    }


def test_shout_upper_cases_the_echo_only():
    [cm] = desired(echo("Hello, wörld", shout=True))
    assert cm["data"] == {"text": "Hello, wörld", "echo": "HELLO, WÖRLD", "language": "python"}
    [cm] = desired(echo("Hello", shout=False))
    assert cm["data"]["echo"] == "Hello"


def test_output_is_ascii_json_even_for_a_lone_surrogate():
    parent = '{"metadata":{"name":"a","namespace":"n","uid":"u"},"spec":{"text":"\\ud800x"}}'
    [text] = run_desired(ECHO, parent, [], [])
    text.encode("utf-8")  # what the WIT string needs: would raise on a lone surrogate
    assert json.loads(text)["data"]["text"] == "\ud800x"


@pytest.mark.parametrize("spec", [{"spec": False}, {"text": ""}, {"text": "", "shout": True}, {}])
def test_empty_or_absent_text_wants_nothing(spec):
    parent = echo(spec=False) if spec == {"spec": False} else echo(**spec)
    # Even with a ConfigMap present: the answer omits it, so the host deletes it.
    assert desired(parent, [server_config_map()]) == []


def test_null_text_is_absent():
    parent = json.dumps({"metadata": {"name": "a", "namespace": "n", "uid": "u"}, "spec": {"text": None}})
    assert run_desired(ECHO, parent, [], []) == []


# --- desired: in place -------------------------------------------------------


def test_mutates_the_current_config_map_in_place():
    current = server_config_map(data={"text": "old", "echo": "OLD", "language": "python", "stray": "x"})
    [cm] = desired(echo("new", shout=True), [current])
    meta = cm["metadata"]
    assert meta["uid"] == "cm-uid-1"
    assert meta["resourceVersion"] == "4711"
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert meta["managedFields"] == [{"manager": "echo-py", "operation": "Apply"}]
    assert meta["annotations"] == {"note": "keep me"}
    assert meta["labels"]["team"] == "blue"
    assert meta["labels"]["python.example.c5c3.io/echo"] == "hello"
    assert len(meta["ownerReferences"]) == 1
    assert cm["data"] == {"text": "new", "echo": "NEW", "language": "python"}


def test_steady_state_changes_nothing():
    current = server_config_map()
    [cm] = desired(echo("hi"), [current])
    assert cm == current


def test_other_owned_objects_are_not_taken():
    other = server_config_map(name="someone-else")
    [cm] = desired(echo("hi"), [other])
    assert "resourceVersion" not in cm["metadata"]
    assert cm["metadata"]["name"] == "hello-echo"


def test_keeps_non_controller_owner_references():
    foreign = {"apiVersion": "v1", "kind": "Namespace", "name": "x", "uid": "other-uid"}
    [cm] = desired(echo("hi"), [server_config_map(extra_refs=[foreign], owner_uid=None)])
    refs = cm["metadata"]["ownerReferences"]
    assert refs[0] == foreign
    assert refs[1]["uid"] == UID
    assert refs[1]["controller"] is True
    assert len(refs) == 2


def test_refreshes_a_stale_controller_reference_of_ours():
    current = server_config_map()
    current["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
    current["metadata"]["ownerReferences"][0]["name"] = "renamed"
    [cm] = desired(echo("hi"), [current])
    [ref] = cm["metadata"]["ownerReferences"]
    assert ref["blockOwnerDeletion"] is True
    assert ref["name"] == "hello"


def test_refuses_a_config_map_with_another_controller():
    with pytest.raises(Invalid) as error:
        desired(echo("hi"), [server_config_map(owner_uid="another-uid")])
    assert error.value.errors == [("metadata.ownerReferences", "owned by another controller (Echo hello)")]


# --- desired: invalid and malformed -----------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"text": 5}, [("spec.text", "must be a string")]),
        ({"text": ["a"]}, [("spec.text", "must be a string")]),
        ({"text": "hi", "shout": "yes"}, [("spec.shout", "must be a boolean")]),
        ({"text": "hi", "shout": 1}, [("spec.shout", "must be a boolean")]),
        ({"text": True, "shout": 0}, [("spec.text", "must be a string"), ("spec.shout", "must be a boolean")]),
        # A broken rule is reported even when the text is empty.
        ({"text": "", "shout": "no"}, [("spec.shout", "must be a boolean")]),
    ],
)
def test_invalid_spec_names_every_broken_field(spec, expected):
    with pytest.raises(Invalid) as error:
        desired(echo(**spec))
    assert error.value.errors == expected


def test_spec_that_is_not_an_object_is_invalid():
    parent = json.dumps({"metadata": {"name": "a", "namespace": "n", "uid": "u"}, "spec": "hi"})
    with pytest.raises(Invalid) as error:
        run_desired(ECHO, parent, [], [])
    assert error.value.errors == [("spec", "must be an object")]


def test_a_name_too_long_for_a_label_is_invalid():
    with pytest.raises(Invalid) as error:
        desired(echo("hi", name="x" * 64))
    assert [path for path, _ in error.value.errors] == ["metadata.name"]
    assert len(desired(echo("hi", name="x" * 63))) == 1


@pytest.mark.parametrize(
    "parent", ["", "{", "[]", "42", '{"metadata": []}', '{"metadata": {}}', '{"metadata": {"name": 7}}']
)
def test_desired_refuses_malformed_parent(parent):
    with pytest.raises(Malformed):
        run_desired(ECHO, parent, [], [])


def test_desired_needs_namespace_and_uid():
    with pytest.raises(Malformed) as error:
        desired(echo("hi", namespace=None, uid=None))
    assert [path for path, _ in error.value.errors] == ["metadata.namespace", "metadata.uid"]


def test_desired_refuses_malformed_owned_object():
    with pytest.raises(Malformed) as error:
        run_desired(ECHO, echo("hi"), ["{nope"], [])
    assert "owned object 0" in error.value.errors[0][1]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100000 + "]" * 100000,
        '{"a":' * 3000 + "1" + "}" * 3000,
        '{"metadata": {"name": "a"}, "x": ' + "[" * 257 + "]" * 257 + "}",
    ],
)
def test_deeply_nested_json_is_malformed_not_a_crash(text):
    # In the component, ~2,000 levels overflow the wasm stack in json.loads (a trap).
    with pytest.raises(Malformed) as error:
        run_references(ECHO, text)
    assert "nested deeper than 256" in error.value.errors[0][1]


def test_nesting_up_to_the_limit_and_brackets_in_strings_are_fine():
    nested = "[" * 254 + "]" * 254  # 255 levels with the parent's own object
    assert run_references(ECHO, '{"metadata": {"name": "a"}, "x": ' + nested + "}") == []
    many = json.dumps({"metadata": {"name": "a"}, "spec": {"text": "[{" * 5000}, "x": [[1]] * 1000})
    assert run_references(ECHO, many) == []


# --- status ------------------------------------------------------------------


def test_status_with_the_config_map():
    assert status(echo("hi", shout=True), [server_config_map(data={"echo": "HI"})]) == {
        "observedGeneration": 3,
        "echoed": "HI",
    }


def test_status_without_the_config_map_omits_echoed():
    assert status(echo("hi")) == {"observedGeneration": 3}
    assert status(echo("hi"), [server_config_map(name="other-echo")]) == {"observedGeneration": 3}


def test_status_without_generation_is_zero():
    assert status(echo("hi", generation=None)) == {"observedGeneration": 0}


def test_status_reports_the_hosts_problem():
    got = status(echo("hi"), problem="refused: quota exceeded")
    assert got == {"observedGeneration": 3, "problem": "refused: quota exceeded"}


def test_status_reports_an_invalid_spec_without_the_host_saying_so():
    got = status(echo(7, shout="loud"))
    assert got == {"observedGeneration": 3, "problem": "spec.text: must be a string; spec.shout: must be a boolean"}


def test_status_is_a_compact_json_object_without_nulls():
    text = run_status(ECHO, echo("hi"), [], [], "2026-01-01T00:00:00Z", None)
    assert text == '{"observedGeneration":3}'
    assert "null" not in run_status(ECHO, echo(""), [], [], "now", None)


@pytest.mark.parametrize("parent", ["nope", "[]", '{"metadata": {"name": "a", "generation": "3"}}'])
def test_status_refuses_malformed_parent(parent):
    with pytest.raises(Malformed):
        run_status(ECHO, parent, [], [], "now", None)


# --- misbehaving on purpose ----------------------------------------------------


def test_the_text_raise_raises_an_unexpected_exception():
    with pytest.raises(RuntimeError, match=r"asked to raise by spec\.text"):
        desired(echo("raise"))
    # Only desired: the status still reports.
    assert status(echo("raise")) == {"observedGeneration": 3}


# --- the componentize-py glue, against the generated bindings ----------------

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
GENERATED = ("wit_world", "componentize_py_types", "componentize_py_async_support", "poll_loop")


@pytest.fixture(scope="module")
def bound(tmp_path_factory):
    """The bindings `componentize-py bindings` generates from wit/controller
    (ECHO_WIT_DIR names another contract folder): the same types the component gets."""
    tool = os.path.join(os.path.dirname(sys.executable), "componentize-py")
    if not os.path.exists(tool):
        pytest.skip("componentize-py is not installed beside this Python (use target/venv-componentize)")
    out = tmp_path_factory.mktemp("bindings")
    wit = os.environ.get("ECHO_WIT_DIR", os.path.join(ROOT, "wit", "controller"))
    run = subprocess.run([tool, "-d", wit, "-w", "logic-module", "bindings", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, "componentize-py cannot read the contract:\n" + run.stderr[:2000]
    sys.path.insert(0, str(out))
    try:
        yield (
            importlib.import_module("wit_world.exports.reconciler"),
            importlib.import_module("wit_world.imports.log"),
            importlib.import_module("componentize_py_types"),
        )
    finally:
        sys.path.remove(str(out))
        for name in list(sys.modules):
            if name.split(".")[0] in GENERATED:
                del sys.modules[name]


def parent(spec):
    return json.dumps(
        {"metadata": {"name": "hello", "namespace": "default", "uid": "u1", "generation": 1}, "spec": spec}
    )


def test_manifest(bound):
    wit, _, _ = bound
    manifest = app.Reconciler().manifest()
    assert (manifest.name, manifest.version) == ("echo-py", "0.1.0")
    assert manifest.parent == wit.KindInfo("python.example.c5c3.io", "v1", "Echo", "echoes", True)
    assert manifest.owned == [wit.KindInfo("", "v1", "ConfigMap", "configmaps", True)]
    assert manifest.reads == []
    assert (manifest.field_manager, manifest.event_reporter) == ("echo-py", "echo-py")
    with open(os.path.join(HERE, "crd.yaml"), encoding="utf-8") as file:
        assert manifest.crd == file.read()


def test_answers_pass_through(bound):
    reconciler = app.Reconciler()
    assert reconciler.references(parent({})) == []
    [text] = reconciler.desired(parent({"text": "hi"}), [], [])
    assert json.loads(text)["data"]["echo"] == "hi"
    status = json.loads(reconciler.status(parent({"text": 1}), [], [], "now", None))
    assert status["problem"] == "spec.text: must be a string"


def test_invalid_is_err_invalid_with_field_errors(bound):
    wit, _, types = bound
    with pytest.raises(types.Err) as error:
        app.Reconciler().desired(parent({"text": 1, "shout": "x"}), [], [])
    assert error.value.value == wit.Error_Invalid(
        [
            wit.FieldError("spec.text", "must be a string"),
            wit.FieldError("spec.shout", "must be a boolean"),
        ]
    )


def test_malformed_is_err_malformed(bound):
    wit, _, types = bound
    for call in (
        lambda r: r.references("{"),
        lambda r: r.desired("[]", [], []),
        lambda r: r.status("x", [], [], "now", None),
    ):
        with pytest.raises(types.Err) as error:
            call(app.Reconciler())
        assert isinstance(error.value.value, wit.Error_Malformed)
        assert error.value.value.value[0].path == ""


def test_an_unexpected_exception_is_logged_then_traps(bound, monkeypatch):
    # In the component the exception traps the call; the host reports the
    # last error line written through the log import.
    _, wit_log, _ = bound
    lines = []
    monkeypatch.setattr(wit_log, "write", lambda level, message: lines.append((level, message)))
    with pytest.raises(RuntimeError, match="asked to raise"):
        app.Reconciler().desired(parent({"text": "raise"}), [], [])
    assert {level for level, _ in lines} == {wit_log.Level.ERROR}
    assert "Traceback" in lines[0][1]
    assert lines[-1][1] == "desired: RuntimeError: asked to raise by spec.text"
