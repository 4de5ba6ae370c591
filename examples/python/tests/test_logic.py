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
        instance.call("c5c3:memcached/controller@0.1.0", "desired", "ConfigMap", json.dumps(cr("minimal")), None, [])
    assert err.value.tag == "unsupported"
    # The same instance still answers after errors.
    assert len(instance.render(cr("minimal"))) == 2


def test_desired_all_follows_the_manifest_order(logic):
    instance = logic.instance()
    owned = [k.kind for k in instance.manifest().owned]
    desired = instance.desired_all(cr("monitoring-full"), [None] * len(owned))
    rendered = [json.loads(o)["kind"] for o in instance.render(cr("monitoring-full"))]
    assert [k for k, d in zip(owned, desired) if d is not None] == rendered
    assert [json.loads(d)["kind"] for d in desired if d is not None] == rendered
    assert "ServiceMonitor" in rendered and "HorizontalPodAutoscaler" not in rendered


def test_kopf_style_handler_plans_applies_and_deletes(logic):
    body = cr("high-availability")
    plan = reconcile(body=body, spec=body["spec"], meta=body["metadata"], name="x", namespace="default", patch={})
    assert [o["kind"] for o in plan["apply"]] == ["Deployment", "Service", "PodDisruptionBudget"]
    assert plan["delete"] == ["HorizontalPodAutoscaler", "ServiceMonitor", "NetworkPolicy"]
    assert all(o["metadata"]["ownerReferences"][0]["controller"] for o in plan["apply"])


def test_kopf_style_handler_rejects_an_invalid_cr_permanently():
    body = cr("minimal")
    body["spec"] = {"replicas": -1, "memcached": {"maxMemoryMB": 1}}
    with pytest.raises(PermanentError, match=r"spec\.replicas.*spec\.memcached\.maxMemoryMB"):
        reconcile(body=body)


def test_render_command_matches_the_cli_and_fails_on_bad_yaml():
    ok = subprocess.run([sys.executable, str(HERE / "render.py"), "-f", str(FIXTURES / "sasl" / "memcached.yaml")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == (FIXTURES / "sasl" / "objects.yaml").read_text()
    bad = subprocess.run([sys.executable, str(HERE / "render.py"), "-f", "-"], input="spec: [unclosed\n",
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert "line 2" in bad.stderr or "line 1" in bad.stderr
