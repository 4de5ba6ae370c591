"""The Countdown module under CPython, without the component: its logic
through the SDK's glue on texts, as a host of contract 1.3 calls it
(`run_answer`, told the time). `target/venv-componentize/bin/python -m
pytest -q examples/countdown/python` (with sdk/python on the path, as
conftest.py puts it). The golden cases in ../cases hold the built component
to the Rust module's answers."""

import json

import app
import pytest
from wasm_operator_sdk import Invalid, run_answer, run_status

COUNTDOWNS = app.Countdowns()
DEADLINE = "2026-12-02T10:00:10Z"


def parent(**spec):
    spec = spec or {"deadline": DEADLINE, "everySeconds": 2}
    metadata = {"name": "launch", "namespace": "ns", "uid": "u-1", "generation": 1}
    return json.dumps({"apiVersion": "example.c5c3.io/v1", "kind": "Countdown", "metadata": metadata, "spec": spec})


def answer(now, text=None):
    return run_answer(COUNTDOWNS, text or parent(), [], [], now)


def status(now, problem=None):
    return json.loads(run_status(COUNTDOWNS, parent(), [], [], now, problem))


def test_it_asks_for_the_next_tick_until_the_deadline_and_nothing_after():
    assert answer("2026-12-02T10:00:00Z").again_after_ms == 2_000
    assert answer("2026-12-02T10:00:09Z").again_after_ms == 1_000, "the deadline comes before the tick"
    assert answer("2026-12-02T10:00:10Z").again_after_ms is None
    assert answer("2026-12-02T10:00:00Z", parent(deadline=DEADLINE)).again_after_ms == 1_000, "every second by default"


def test_it_owns_one_config_map_holding_the_deadline_which_no_tick_changes():
    objects = answer("2026-12-02T10:00:00Z").objects
    assert objects == answer("2026-12-02T10:00:05Z").objects
    [config_map] = [json.loads(text) for text in objects]
    assert config_map["metadata"]["name"] == "launch"
    assert config_map["metadata"]["namespace"] == "ns"
    assert config_map["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert config_map["data"] == {"deadline": DEADLINE}


@pytest.mark.parametrize(
    ("spec", "path", "message"),
    [
        ({"deadline": "soon"}, "spec.deadline", '"soon" is not an RFC 3339 time'),
        ({"deadline": DEADLINE, "everySeconds": 0}, "spec.everySeconds", "must be at least 1"),
    ],
)
def test_a_bad_spec_is_invalid_at_its_field(spec, path, message):
    with pytest.raises(Invalid) as error:
        answer("2026-12-02T10:00:00Z", parent(**spec))
    assert error.value.errors == [(path, message)]


def test_the_status_counts_down_then_says_done():
    assert status("2026-12-02T10:00:03Z") == {"observedGeneration": 1, "phase": "Counting", "remainingSeconds": 7}
    assert status("2026-12-02T10:00:11Z") == {"observedGeneration": 1, "phase": "Done", "remainingSeconds": 0}


def test_the_status_reports_why_the_reconcile_failed():
    assert status("2026-12-02T10:00:03Z", "invalid: spec.deadline: no") == {
        "observedGeneration": 1,
        "phase": "Invalid",
        "remainingSeconds": 0,
        "message": "invalid: spec.deadline: no",
    }


def test_epoch_seconds_reads_rfc_3339_only_to_whole_seconds():
    assert app.epoch_seconds("1970-01-01T00:01:00.9Z") == 60
    assert app.epoch_seconds("1970-01-01T01:00:00+01:00") == 0
    assert app.epoch_seconds("1970-01-01") is None
    assert app.epoch_seconds("1970-02-30T00:00:00Z") is None
    assert app.epoch_seconds(60) is None
