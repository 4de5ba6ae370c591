import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from handler import PermanentError, reconcile
from memcached_logic import Logic, LogicError, as_json_list

HERE = Path(__file__).resolve().parent.parent
FIXTURES = HERE.parents[1] / "tests" / "fixtures"


def cr(name):
    return yaml.safe_load((FIXTURES / name / "memcached.yaml").read_text())


@pytest.fixture(scope="session")
def logic():
    return Logic()


def test_render_answers_the_golden_objects_byte_for_byte(logic):
    instance = logic.instance()
    for name in ("minimal", "everything", "tls-mtls"):
        objects = [json.loads(o) for o in instance.render(cr(name))]
        assert as_json_list(objects) == (FIXTURES / name / "objects.json").read_text(), name
        assert instance.to_yaml(objects) == (FIXTURES / name / "objects.yaml").read_text(), name


def test_guards_answer_for_the_optional_kinds(logic):
    instance = logic.instance()
    assert set(instance.guards(cr("minimal")).values()) == {False}
    assert set(instance.guards(cr("everything")).values()) == {True}
    assert instance.guards(cr("high-availability"))["pdb-enabled"] is True


def test_validate_lists_every_problem_with_its_path(logic):
    bad = cr("tls-mtls")
    bad["spec"]["replicas"] = 99
    del bad["spec"]["security"]["tls"]["certificateSecretRef"]
    paths = sorted(e.path for e in logic.instance().validate(bad))
    assert paths == ["spec.replicas", "spec.security.tls.certificateSecretRef.name"]
    assert logic.instance().validate(cr("minimal")) == []


def test_bad_input_is_a_logic_error_never_a_crash(logic):
    instance = logic.instance()
    with pytest.raises(LogicError) as err:
        instance.render("{not json")
    assert err.value.tag == "malformed"
    with pytest.raises(LogicError) as err:
        instance.render({**cr("minimal"), "kind": "Redis"})
    assert err.value.tag == "malformed" and err.value.field_errors[0].path == "kind"
    with pytest.raises(LogicError) as err:
        instance.desired(cr("minimal"), ['{"kind": "Deployment"'])
    assert err.value.tag == "malformed" and "owned object" in str(err.value)
    # The same instance still answers after errors.
    assert len(instance.render(cr("minimal"))) == 2


def test_manifest_names_the_parent_and_every_kind(logic):
    manifest = logic.instance().manifest()
    assert (manifest.name, manifest.parent.kind, manifest.parent.api_version) == (
        "memcached", "Memcached", "memcached.c5c3.io/v1beta1")
    assert [k.kind for k in manifest.owned] == [
        "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"]
    assert [k.kind for k in manifest.reads] == ["Secret"]
    assert manifest.field_manager == manifest.event_reporter == "memcached-operator"
    assert "kind: CustomResourceDefinition" in manifest.crd


def test_desired_answers_the_rendered_objects_in_manifest_order(logic):
    instance = logic.instance()
    owned = [k.kind for k in instance.manifest().owned]
    desired = [json.loads(d) for d in instance.desired(cr("monitoring-full"))]
    rendered = [json.loads(o) for o in instance.render(cr("monitoring-full"))]
    assert desired == rendered
    kinds = [o["kind"] for o in desired]
    assert kinds == [k for k in owned if k in kinds]
    assert "ServiceMonitor" in kinds and "HorizontalPodAutoscaler" not in kinds


def test_references_name_the_secrets_a_cr_needs(logic):
    refs = logic.instance().references(cr("sasl"))
    assert [(r.group, r.version, r.kind, r.namespace, r.name) for r in refs] == [("", "v1", "Secret", None, "memcached-sasl")]
    assert logic.instance().references(cr("minimal")) == []


def test_kopf_style_handler_plans_applies_and_deletes(logic):
    body = cr("high-availability")
    plan = reconcile(body=body, spec=body["spec"], meta=body["metadata"], name="x", namespace="default", patch={})
    assert [o["kind"] for o in plan["apply"]] == ["Deployment", "Service", "PodDisruptionBudget"]
    assert plan["delete"] == []
    assert all(o["metadata"]["ownerReferences"][0]["controller"] for o in plan["apply"])

    # Applied, the same CR answers the same objects and deletes nothing.
    body = cr("everything")
    current = reconcile(body=body)["apply"]
    assert len(current) == 6
    steady = reconcile(body=body, owned=current)
    assert steady == {"apply": current, "delete": []}

    # Turning monitoring and the NetworkPolicy off deletes exactly their objects.
    body["spec"]["monitoring"]["enabled"] = False
    body["spec"]["security"]["networkPolicy"]["enabled"] = False
    off = reconcile(body=body, owned=current)
    assert [o["kind"] for o in off["apply"]] == ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"]
    assert off["delete"] == [current[4], current[5]]
    assert [o["kind"] for o in off["delete"]] == ["ServiceMonitor", "NetworkPolicy"]


def test_kopf_style_handler_rejects_an_invalid_cr_permanently():
    body = cr("minimal")
    current = reconcile(body=body)["apply"]
    body["spec"] = {"replicas": -1, "memcached": {"maxMemoryMB": 1}}
    with pytest.raises(PermanentError, match=r"spec\.replicas.*spec\.memcached\.maxMemoryMB"):
        reconcile(body=body, owned=current)  # raises: no plan, so no deletes


def test_render_command_matches_the_cli_and_fails_on_bad_yaml():
    ok = subprocess.run([sys.executable, str(HERE / "render.py"), "-f", str(FIXTURES / "sasl" / "memcached.yaml")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == (FIXTURES / "sasl" / "objects.yaml").read_text()
    bad = subprocess.run([sys.executable, str(HERE / "render.py"), "-f", "-"], input="spec: [unclosed\n",
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "line 2" in bad.stderr or "line 1" in bad.stderr
