"""The StaticSite module under CPython, without the component: its logic
through the SDK's glue on texts (what the host sends and gets back), and the
componentize-py glue against the bindings componentize-py generates.
`target/venv-componentize/bin/python -m pytest -q examples/static-site/python`
(with sdk/python on the path, as conftest.py puts it). The golden cases in
../cases hold the built component to the Rust module's answers."""

import copy
import importlib
import json
import os
import subprocess
import sys

import app
import pytest
from wasm_operator_sdk import Invalid, run_desired, run_references, run_status

SITES = app.StaticSites()
UID = "0c0ffee0-0000-4000-8000-000000000001"
NOW = "2026-01-01T00:00:00Z"
LABELS = {"app.kubernetes.io/name": "static-site", "app.kubernetes.io/instance": "docs"}
OWNER = {
    "apiVersion": "sites.example.com/v1",
    "kind": "StaticSite",
    "name": "docs",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def site(files=None, generation=1, status=None, **spec):
    spec["files"] = {"index.html": "<h1>Docs</h1>"} if files is None else files
    obj = {
        "apiVersion": "sites.example.com/v1",
        "kind": "StaticSite",
        "metadata": {"name": "docs", "namespace": "web", "uid": UID, "generation": generation},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def desired(parent, owned=()):
    return [json.loads(t) for t in run_desired(SITES, json.dumps(parent), [json.dumps(o) for o in owned], [])]


def status(parent, owned=(), problem=None, now=NOW):
    return json.loads(run_status(SITES, json.dumps(parent), [json.dumps(o) for o in owned], [], now, problem))


def deployment(ready=None):
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "docs", "namespace": "web"}}
    if ready is not None:
        obj["status"] = {"replicas": 2, "readyReplicas": ready}
    return obj


def ready_condition(status, reason, message, since, generation=1):
    return {
        "type": "Ready",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


# --- manifest and references -------------------------------------------------


def test_manifest_names_the_parent_and_the_owned_kinds_in_order():
    manifest = SITES.manifest
    assert (manifest.name, manifest.version) == ("static-site", "0.1.0")
    assert manifest.parent == app.Kind("sites.example.com", "v1", "StaticSite", "staticsites")
    assert [(k.group, k.version, k.kind, k.plural) for k in manifest.owned] == [
        ("", "v1", "ConfigMap", "configmaps"),
        ("apps", "v1", "Deployment", "deployments"),
        ("", "v1", "Service", "services"),
    ]
    assert "name: staticsites.sites.example.com" in manifest.crd


def test_references_are_none():
    assert run_references(SITES, json.dumps(site())) == []


# --- desired -----------------------------------------------------------------


def test_a_new_site_gets_a_config_map_a_deployment_and_a_service():
    files = {"index.html": "<h1>Docs</h1>", "about.html": "<p>About</p>"}
    meta = {"namespace": "web", "labels": LABELS, "ownerReferences": [OWNER]}
    assert desired(site(files)) == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "docs-files", **meta},
            "data": files,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "docs", **meta},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": LABELS},
                "template": {
                    "metadata": {"labels": LABELS},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": "nginx:1.27-alpine",
                                "ports": [{"name": "http", "containerPort": 80}],
                                "volumeMounts": [
                                    {"name": "files", "mountPath": "/usr/share/nginx/html", "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [{"name": "files", "configMap": {"name": "docs-files"}}],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "docs", **meta},
            "spec": {"selector": LABELS, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        },
    ]


def test_replicas_and_image_come_from_the_spec():
    [_, dep, _] = desired(site(replicas=3, image="nginx:1.27"))
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    [_, dep, _] = desired(site(replicas=0))
    assert dep["spec"]["replicas"] == 0


@pytest.mark.parametrize("files", [{}, {"about.html": "<p>About</p>"}, {"INDEX.HTML": "x"}])
def test_a_site_without_an_index_html_is_invalid_at_spec_files(files):
    with pytest.raises(Invalid) as error:
        desired(site(files))
    assert error.value.errors == [("spec.files", "must have an index.html")]


def test_a_removed_file_goes_and_what_the_server_filled_in_stays():
    current = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "docs-files", "namespace": "web", "resourceVersion": "7", "ownerReferences": [OWNER]},
        "data": {"index.html": "old", "old.html": "gone"},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "docs", "namespace": "web", "labels": LABELS, "ownerReferences": [OWNER]},
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.0.0.42",
            "selector": LABELS,
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}],
        },
    }
    [cm, _, svc] = desired(site(), [current, service])
    assert cm["data"] == {"index.html": "<h1>Docs</h1>"}
    assert cm["metadata"]["resourceVersion"] == "7"
    assert svc == service  # a steady state writes nothing


def test_another_controllers_object_is_refused():
    taken = {**deployment(), "metadata": {**deployment()["metadata"], "ownerReferences": [{**OWNER, "uid": "x"}]}}
    with pytest.raises(Invalid) as error:
        desired(site(), [taken])
    assert [path for path, _ in error.value.errors] == ["metadata.ownerReferences"]


# --- status ------------------------------------------------------------------


def test_a_new_site_is_progressing():
    assert status(site()) == {
        "observedGeneration": 1,
        "readyReplicas": 0,
        "url": "http://docs.web.svc",
        "conditions": [ready_condition("False", "Progressing", "0 of 1 replicas ready", NOW)],
    }


def test_ready_when_the_ready_replicas_reach_the_spec():
    got = status(site(replicas=2), [deployment(ready=2)])
    assert got["readyReplicas"] == 2
    assert got["conditions"] == [ready_condition("True", "Available", "2 of 2 replicas ready", NOW)]
    got = status(site(replicas=2), [deployment(ready=1)])
    assert got["conditions"] == [ready_condition("False", "Progressing", "1 of 2 replicas ready", NOW)]
    got = status(site(replicas=0), [deployment()])
    assert got["conditions"] == [ready_condition("True", "Available", "0 of 0 replicas ready", NOW)]


def test_a_problem_fails_the_condition():
    problem = "invalid: spec.files: must have an index.html"
    got = status(site({}), problem=problem)
    assert got["conditions"] == [ready_condition("False", "Failed", problem, NOW)]
    assert got["readyReplicas"] == 0


def test_only_our_ready_condition_is_kept_and_its_time_moves_only_on_a_flip():
    earlier = "2025-12-31T23:00:00Z"
    stalled = {"type": "Stalled", "status": "True", "lastTransitionTime": earlier, "reason": "X", "message": "y"}
    before = ready_condition("False", "Progressing", "1 of 2 replicas ready", earlier)
    parent = site(replicas=2, generation=3, status={"conditions": [stalled, before]})
    got = status(parent, [deployment(ready=1)])
    assert got["conditions"] == [ready_condition("False", "Progressing", "1 of 2 replicas ready", earlier, 3)]
    got = status(parent, [deployment(ready=2)])
    assert got["conditions"] == [ready_condition("True", "Available", "2 of 2 replicas ready", NOW, 3)]


def test_status_without_a_generation_or_a_namespace():
    parent = site()
    del parent["metadata"]["generation"], parent["metadata"]["namespace"]
    got = status(parent)
    assert got["observedGeneration"] is None
    assert got["url"] == "http://docs..svc"
    assert "observedGeneration" not in got["conditions"][0]


def test_status_changes_nothing_it_is_given():
    parent = site(status={"conditions": [ready_condition("True", "Available", "1 of 1 replicas ready", "t")]})
    kept = copy.deepcopy(parent)
    status(parent, [deployment(ready=1)])
    assert parent == kept


# --- the componentize-py glue, against the generated bindings ----------------

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
GENERATED = ("wit_world", "componentize_py_types", "componentize_py_async_support", "poll_loop")


@pytest.fixture(scope="module")
def bound(tmp_path_factory):
    """The bindings `componentize-py bindings` generates from wit/controller."""
    tool = os.path.join(os.path.dirname(sys.executable), "componentize-py")
    if not os.path.exists(tool):
        pytest.skip("componentize-py is not installed beside this Python (use target/venv-componentize)")
    out = tmp_path_factory.mktemp("bindings")
    wit = os.path.join(ROOT, "wit", "controller")
    run = subprocess.run([tool, "-d", wit, "-w", "logic-module", "bindings", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, "componentize-py cannot read the contract:\n" + run.stderr[:2000]
    sys.path.insert(0, str(out))
    try:
        yield (
            importlib.import_module("wit_world.exports.reconciler"),
            importlib.import_module("componentize_py_types"),
        )
    finally:
        sys.path.remove(str(out))
        for name in list(sys.modules):
            if name.split(".")[0] in GENERATED:
                del sys.modules[name]


def test_the_component_manifest(bound):
    wit, _ = bound
    manifest = app.Reconciler().manifest()
    assert (manifest.name, manifest.version) == ("static-site", "0.1.0")
    assert manifest.parent == wit.KindInfo("sites.example.com", "v1", "StaticSite", "staticsites", True)
    assert manifest.owned == [
        wit.KindInfo("", "v1", "ConfigMap", "configmaps", True),
        wit.KindInfo("apps", "v1", "Deployment", "deployments", True),
        wit.KindInfo("", "v1", "Service", "services", True),
    ]
    assert (manifest.field_manager, manifest.event_reporter) == ("static-site-operator", "static-site-operator")
    with open(os.path.join(HERE, "crd.yaml"), encoding="utf-8") as file:
        assert manifest.crd == file.read()


def test_invalid_is_err_invalid_at_spec_files(bound):
    wit, types = bound
    with pytest.raises(types.Err) as error:
        app.Reconciler().desired(json.dumps(site({})), [], [])
    assert error.value.value == wit.Error_Invalid([wit.FieldError("spec.files", "must have an index.html")])
