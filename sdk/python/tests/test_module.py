"""The glue on plain texts (run_references, run_desired, run_status), as the
host would call it, without the bindings."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wasm_operator_sdk import (
    EPOCH,
    Answer,
    Context,
    Invalid,
    Kind,
    Malformed,
    Manifest,
    Module,
    Objects,
    StatusContext,
    WriteModel,
    module,
    observed_generation,
    read_text,
    replacing,
    run_answer,
    run_desired,
    run_references,
    run_status,
    set_condition,
    write_model,
)

UID = "0b7e4a52-0000-4000-8000-000000000001"
SITE = Kind("example.com", "v1", "Site", "sites")
CONFIG_MAP = Kind("", "v1", "ConfigMap", "configmaps")
SECRET = Kind("", "v1", "Secret", "secrets")
OURS = {
    "apiVersion": "example.com/v1",
    "kind": "Site",
    "name": "blog",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


class Site(Module):
    manifest = Manifest("site", "1.0.0", SITE, crd="kind: CustomResourceDefinition", owned=[CONFIG_MAP], reads=[SECRET])

    def references(self, parent):
        return [SECRET.ref(parent["spec"]["secret"])] if parent.get("spec", {}).get("secret") else []

    def desired(self, parent, ctx):
        text = parent.get("spec", {}).get("text")
        if not isinstance(text, str):
            raise Invalid("spec.text", "must be a string")
        secret = ctx.related.get("Secret", "creds")
        data = {"text": text, "secret": "yes" if secret else "no"}
        return [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": parent["metadata"]["name"]}, "data": data}
        ]

    def status(self, parent, ctx):
        ready = ctx.owned.get(CONFIG_MAP, parent["metadata"]["name"]) is not None
        conditions = set_condition(
            None, "Ready", ready, "Published" if ready else "Pending", ctx.problem or "", ctx.now
        )
        return {"observedGeneration": observed_generation(parent), "conditions": conditions}


def parent(text="hello", **metadata):
    meta = {"name": "blog", "namespace": "web", "uid": UID, "generation": 2, **metadata}
    return json.dumps({"apiVersion": "example.com/v1", "kind": "Site", "metadata": meta, "spec": {"text": text}})


def server_config_map(text="hello", owner=OURS):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "blog",
            "namespace": "web",
            "uid": "cm-uid",
            "resourceVersion": "77",
            "labels": {"added-by": "someone"},
            "ownerReferences": [owner],
        },
        "data": {"text": text, "secret": "no"},
    }


def desired(parent_text, owned=(), related=(), mod=None):
    texts = run_desired(mod or Site(), parent_text, [json.dumps(o) for o in owned], [json.dumps(o) for o in related])
    return [json.loads(t) for t in texts]


def test_a_new_object_is_placed_and_adopted():
    [cm] = desired(parent())
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "blog", "namespace": "web", "ownerReferences": [OURS]},
        "data": {"text": "hello", "secret": "no"},
    }


def test_steady_state_answers_the_servers_object_exactly():
    server = server_config_map()
    [text] = run_desired(Site(), parent(), [json.dumps(server)], [])
    assert json.loads(text) == server


def test_a_change_is_merged_onto_the_current_object():
    [cm] = desired(parent("new"), [server_config_map()])
    assert cm["data"]["text"] == "new"
    assert cm["metadata"]["resourceVersion"] == "77"
    assert cm["metadata"]["labels"] == {"added-by": "someone"}


def test_an_orphan_is_adopted_and_another_controllers_object_refused():
    orphan = server_config_map()
    del orphan["metadata"]["ownerReferences"]
    [cm] = desired(parent(), [orphan])
    assert cm["metadata"]["ownerReferences"] == [OURS]
    other = server_config_map(owner={**OURS, "kind": "Blog", "name": "them", "uid": "other"})
    with pytest.raises(Invalid) as error:
        desired(parent(), [other])
    assert error.value.errors == [("metadata.ownerReferences", "owned by another controller (Blog them)")]


def test_related_objects_are_looked_up_by_kind_and_name():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "web"}}
    [cm] = desired(parent(), related=[secret])
    assert cm["data"]["secret"] == "yes"


def test_the_author_may_change_the_owned_objects_it_is_given():
    class Mutating(Site):
        def desired(self, parent, ctx):
            current = ctx.owned.get("ConfigMap", "blog")
            current["data"]["text"] = "changed"
            del current["metadata"]["labels"]
            return [current]

    [cm] = desired(parent(), [server_config_map()], mod=Mutating())
    assert cm["data"]["text"] == "changed"
    # A deleted member is only a member the answer does not set: merging keeps it.
    assert cm["metadata"]["labels"] == {"added-by": "someone"}


def test_invalid_spec_is_the_authors_invalid():
    with pytest.raises(Invalid) as error:
        desired(parent(text=5))
    assert error.value.errors == [("spec.text", "must be a string")]


@pytest.mark.parametrize(
    ("text", "errors"),
    [
        ("nope", [("", "parent: not JSON: Expecting value: line 1 column 1 (char 0)")]),
        ("[]", [("", "parent: expected a JSON object, got an array")]),
        ('{"metadata": 3}', [("metadata", "must be an object, got a number")]),
        ("{}", [("metadata", "must be an object, got null")]),
        ('{"metadata": {"name": 7}}', [("metadata.name", "must be a non-empty string")]),
    ],
)
def test_a_malformed_parent_says_why(text, errors):
    for call in (
        lambda: run_references(Site(), text),
        lambda: run_desired(Site(), text, [], []),
        lambda: run_status(Site(), text, [], [], "now", None),
    ):
        with pytest.raises(Malformed) as error:
            call()
        assert error.value.errors == errors


def test_desired_needs_the_parents_namespace_and_uid():
    text = json.dumps({"metadata": {"name": "blog"}, "spec": {"text": "x"}})
    with pytest.raises(Malformed) as error:
        run_desired(Site(), text, [], [])
    assert error.value.errors == [
        ("metadata.namespace", "must be a non-empty string"),
        ("metadata.uid", "must be a non-empty string"),
    ]


def test_a_parent_without_api_version_gets_the_manifests():
    text = json.dumps({"metadata": {"name": "blog", "namespace": "web", "uid": UID}, "spec": {"text": "x"}})
    [cm] = [json.loads(t) for t in run_desired(Site(), text, [], [])]
    assert cm["metadata"]["ownerReferences"] == [OURS]


def test_a_malformed_owned_object_is_named():
    with pytest.raises(Malformed) as error:
        run_desired(Site(), parent(), ["{nope"], [])
    assert error.value.errors[0].message.startswith("owned object 0: not JSON")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("text", "desired object 0: must be a dict, got str"),
        ({"kind": "ConfigMap", "metadata": {"name": "x"}}, "desired object 0: apiVersion must be a non-empty string"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, "desired object 0: metadata.name must be"),
    ],
)
def test_an_unusable_desired_object_is_a_bug_in_the_module(answer, message):
    class Broken(Site):
        def desired(self, parent, ctx):
            return [answer]

    with pytest.raises(TypeError, match=message):
        run_desired(Broken(), parent(), [], [])


def test_status_gets_owned_now_and_problem():
    text = run_status(Site(), parent(), [json.dumps(server_config_map())], [], "2026-01-01T00:00:00Z", None)
    assert text.startswith('{"observedGeneration":2,')
    status = json.loads(text)
    assert status["conditions"][0]["status"] == "True"
    assert status["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    status = json.loads(run_status(Site(), parent(), [], [], "t", "invalid: spec.text: must be a string"))
    assert status["conditions"][0]["message"] == "invalid: spec.text: must be a string"


def test_references():
    text = json.dumps({"metadata": {"name": "b"}, "spec": {"secret": "creds"}})
    [ref] = run_references(Site(), text)
    assert (ref.group, ref.version, ref.kind, ref.name, ref.namespace) == ("", "v1", "Secret", "creds", None)
    assert run_references(Site(), parent()) == []


def test_a_module_from_functions_with_default_names():
    seen = []

    def status(parent, ctx):
        seen.append((type(ctx), ctx.now, ctx.problem))
        return {"ok": True}

    mod = module(Manifest("fn", "0.1.0", SITE), desired=lambda parent, ctx: [], status=status)
    assert mod.manifest.field_manager_name == "fn-operator"
    assert mod.manifest.event_reporter_name == "fn-operator"
    assert run_references(mod, parent()) == []
    assert run_desired(mod, parent(), [], []) == []
    assert run_status(mod, parent(), [], [], "now", "p") == '{"ok":true}'
    assert seen == [(StatusContext, "now", "p")]


def test_objects_lookup():
    cm = server_config_map()
    other_ns = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "blog", "namespace": "other"}}
    custom = {"apiVersion": "other.io/v2", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "web"}}
    objects = Objects([cm, other_ns, custom])
    assert objects.get("ConfigMap", "blog") is cm
    assert objects.get("ConfigMap", "blog", namespace="other") is other_ns
    assert objects.get(CONFIG_MAP, "x") is None
    assert objects.get("ConfigMap", "x") is custom
    assert objects.get("Secret", "blog") is None
    assert objects.of_kind(CONFIG_MAP) == [cm, other_ns]
    assert len(objects) == 3
    assert list(objects) == [cm, other_ns, custom]
    assert objects[2] is custom
    assert isinstance(Context().owned, Objects)


def test_the_package_imports_without_the_bindings():
    # The helpers and the glue under plain CPython: nothing of componentize-py loaded.
    root = Path(__file__).resolve().parent.parent
    code = (
        "import sys, wasm_operator_sdk\n"
        "assert not [m for m in sys.modules if m.startswith(('wit_world', 'componentize'))]"
    )
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    run = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_read_text_reads_beside_the_anchor(tmp_path):
    (tmp_path / "crd.yaml").write_text("kind: CustomResourceDefinition\n", encoding="utf-8")
    assert read_text(str(tmp_path / "app.py"), "crd.yaml") == "kind: CustomResourceDefinition\n"
    with pytest.raises(FileNotFoundError):
        read_text(str(tmp_path / "app.py"), "missing.yaml")


class Replacing(Site):
    """Owns the ConfigMap's data whole."""

    def desired(self, parent, ctx):
        return [replacing(obj, "/data") for obj in super().desired(parent, ctx)]


def test_replacing_removes_the_keys_the_answer_drops():
    server = server_config_map()
    server["data"]["stale"] = "from an earlier version"
    [merged] = desired(parent("new"), [server])
    assert merged["data"] == {"text": "new", "secret": "no", "stale": "from an earlier version"}
    [replaced] = desired(parent("new"), [server], mod=Replacing())
    assert replaced["data"] == {"text": "new", "secret": "no"}
    # Everything else is still merged.
    assert replaced["metadata"]["resourceVersion"] == "77"
    assert replaced["metadata"]["labels"] == {"added-by": "someone"}


def test_replacing_in_a_steady_state_answers_the_servers_object_exactly():
    server = server_config_map()
    [text] = run_desired(Replacing(), parent(), [json.dumps(server)], [])
    assert json.loads(text) == server


def test_replacing_a_member_the_answer_lacks_removes_it():
    class NoData(Site):
        def desired(self, parent, ctx):
            [cm] = super().desired(parent, ctx)
            del cm["data"]
            return [replacing(cm, "/data", "/metadata/labels")]

    [cm] = desired(parent(), [server_config_map()], mod=NoData())
    assert "data" not in cm
    assert "labels" not in cm["metadata"]
    assert cm["metadata"]["resourceVersion"] == "77"


class Applying(Replacing):
    """Written by server-side apply: its `replacing` marks have no effect."""

    writes = "apply"


def test_a_module_writes_by_replacing_unless_it_says_apply():
    assert write_model(Site()) is WriteModel.REPLACE
    assert write_model(Applying()) is WriteModel.APPLY
    assert write_model(module(Site.manifest, desired=Site().desired, status=Site().status)) is WriteModel.REPLACE
    functions = module(Site.manifest, desired=Site().desired, status=Site().status, writes=WriteModel.APPLY)
    assert write_model(functions) is WriteModel.APPLY

    class Merging(Site):
        writes = "merge"

    with pytest.raises(ValueError, match=r"Merging\.writes must be \"replace\" or \"apply\", not 'merge'"):
        write_model(Merging())


def test_an_applying_module_answers_only_its_fields():
    server = server_config_map()
    server["data"]["stale"] = "from an earlier version"
    server["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o-1"})
    [cm] = desired(parent("new"), [server], mod=Applying())
    # Nothing of the server's object (its resourceVersion, another's label
    # and owner reference, a key the answer lacks) is merged in.
    assert cm == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "blog", "namespace": "web", "ownerReferences": [OURS]},
        "data": {"text": "new", "secret": "no"},
    }


def test_an_applying_module_still_refuses_another_controllers_object():
    other = server_config_map(owner={**OURS, "kind": "Blog", "name": "them", "uid": "other"})
    with pytest.raises(Invalid) as error:
        desired(parent(), [other], mod=Applying())
    assert error.value.errors == [("metadata.ownerReferences", "owned by another controller (Blog them)")]


class Timed(Site):
    """Asks for the timers (seconds) its spec lists, and records the time it was told."""

    def __init__(self):
        self.told = []

    def desired(self, parent, ctx):
        self.told.append(ctx.now)
        for seconds in parent["spec"].get("timers", []):
            ctx.reconcile_after(seconds)
        return super().desired(parent, ctx)


def timed(*timers):
    return json.dumps(
        {"metadata": {"name": "blog", "namespace": "web", "uid": UID}, "spec": {"text": "t", "timers": list(timers)}}
    )


def test_answer_is_desired_told_the_time_with_no_timer_by_default():
    mod = Timed()
    answer = run_answer(mod, timed(), [], [], "2026-12-02T10:00:00Z")
    assert answer == Answer(run_desired(mod, timed(), [], []), None)
    assert mod.told == ["2026-12-02T10:00:00Z", EPOCH], "desired (a 1.2 host) is told the epoch"


def test_answer_asks_for_the_soonest_timer_in_milliseconds():
    def after(*timers):
        return run_answer(Timed(), timed(*timers), [], [], "now").again_after_ms

    assert after(30) == 30_000
    assert after(30, 5, 60) == 5_000
    assert after(1.5) == 1_500
    assert after(0.0004) == 0, "whole milliseconds"
    assert after(100 * 24 * 3600) == 2**32 - 1, "past u32 milliseconds: the longest the contract carries"


def test_a_context_keeps_the_soonest_timer():
    ctx = Context()
    assert ctx.again_after is None
    assert ctx.now == EPOCH
    ctx.reconcile_after(30)
    ctx.reconcile_after(5)
    ctx.reconcile_after(60)
    assert ctx.again_after == 5
    assert StatusContext(Objects(), Objects(), "now", "p").problem == "p", "positional fields as before"


@pytest.mark.parametrize(
    ("seconds", "error"),
    [(-1, ValueError), (float("nan"), ValueError), (float("inf"), ValueError), ("5", TypeError), (True, TypeError)],
)
def test_a_timer_that_is_no_duration_is_a_bug(seconds, error):
    with pytest.raises(error, match="reconcile_after: seconds must be"):
        Context().reconcile_after(seconds)
