"""The module under plain CPython: through the SDK's glue on JSON texts
(`run_desired`, `run_status`), exactly what the host sends and gets back.
`make unit` runs these; `make cases` runs cases/*.yaml against the built
component."""

import json
from typing import Any

import pytest
from wasm_operator_sdk import Invalid, WriteModel, run_desired, run_references, run_status, write_model

import app

MODULE = app.App()
UID = "00000000-0000-4000-8000-000000000001"
NOW = "2026-01-01T00:00:00Z"


def parent(message: Any = "hi", status: Any = None) -> str:
    obj: dict[str, Any] = {
        "apiVersion": "{{group}}/{{version}}",
        "kind": "{{kind}}",
        "metadata": {"name": "hello", "namespace": "default", "uid": UID, "generation": 2},
        "spec": {} if message is None else {"message": message},
    }
    if status is not None:
        obj["status"] = status
    return json.dumps(obj)


def server_config_map(data: dict[str, str]) -> dict[str, Any]:
    """The ConfigMap as the API server returns it: with what it filled in."""
    [text] = run_desired(MODULE, parent(), [], [])
    config_map: dict[str, Any] = json.loads(text)
    config_map["metadata"].update(uid="cm-uid", resourceVersion="7", creationTimestamp=NOW)
    config_map["data"] = data
    return config_map


def desired(parent_text: str, owned: tuple[dict[str, Any], ...] = ()) -> list[dict[str, Any]]:
    return [json.loads(t) for t in run_desired(MODULE, parent_text, [json.dumps(o) for o in owned], [])]


def status(parent_text: str, owned: tuple[dict[str, Any], ...] = (), problem: str | None = None) -> Any:
    return json.loads(run_status(MODULE, parent_text, [json.dumps(o) for o in owned], [], NOW, problem))


def test_manifest_carries_the_crd() -> None:
    assert MODULE.manifest.name == "{{name}}"
    assert "kind: CustomResourceDefinition" in MODULE.manifest.crd
    assert "name: {{plural}}.{{group}}" in MODULE.manifest.crd


def test_references_none() -> None:
    assert run_references(MODULE, parent()) == []


def test_publishes_the_message_in_a_config_map() -> None:
    [config_map] = desired(parent("hi"))
    assert config_map["metadata"]["name"] == "hello"
    assert config_map["metadata"]["namespace"] == "default"
    assert config_map["metadata"]["ownerReferences"][0]["uid"] == UID
    assert config_map["data"] == {"message": "hi"}


def test_writes_by_server_side_apply() -> None:
    assert write_model(MODULE) is WriteModel.APPLY


def test_the_answer_is_the_modules_fields_whatever_the_server_has() -> None:
    # What the server filled in (uid, resourceVersion) is not in the answer:
    # nothing is merged, the host applies the answer and the server keeps the rest.
    current = server_config_map({"message": "hi"})
    assert desired(parent("hi"), (current,)) == desired(parent("hi"))


def test_an_edit_answers_the_new_message_alone() -> None:
    # The key an earlier version applied is not in the answer: the server
    # removes it, as the module no longer applies it.
    current = server_config_map({"message": "old", "left": "by an earlier version"})
    [config_map] = desired(parent("new"), (current,))
    assert config_map["data"] == {"message": "new"}
    assert "resourceVersion" not in config_map["metadata"]


@pytest.mark.parametrize("message", ["", None, 42])
def test_an_empty_or_missing_message_is_invalid(message: Any) -> None:
    with pytest.raises(Invalid) as error:
        desired(parent(message))
    assert error.value.errors == [("spec.message", "must be a non-empty string")]


def test_status_ready_once_published() -> None:
    got = status(parent("hi"), (server_config_map({"message": "hi"}),))
    assert got["observedGeneration"] == 2
    [ready] = got["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Published")
    assert "problem" not in got


def test_status_pending_without_the_config_map() -> None:
    [ready] = status(parent("hi"))["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "Pending")


def test_status_reports_the_problem() -> None:
    problem = "invalid: spec.message: must be a non-empty string"
    got = status(parent(""), problem=problem)
    assert got["problem"] == problem
    [ready] = got["conditions"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "Invalid", problem)


def test_status_keeps_the_transition_time_while_ready() -> None:
    earlier = {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    got = status(parent("hi", status={"conditions": [earlier]}), (server_config_map({"message": "hi"}),))
    assert got["conditions"][0]["lastTransitionTime"] == "2025-01-01T00:00:00Z"
