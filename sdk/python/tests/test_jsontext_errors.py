"""JSON text and the error types."""

import json

import pytest

from wasm_operator_sdk import FieldError, Invalid, Malformed, Unsupported, describe, invalid, malformed, unsupported
from wasm_operator_sdk.jsontext import MAX_DEPTH, dump, parse, parse_object


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "parent: not JSON: Expecting property name"),
        ("NaN", "parent: not JSON: NaN is not JSON"),
        ("[1]", "parent: expected a JSON object, got an array"),
        ("42", "parent: expected a JSON object, got a number"),
        ("null", "parent: expected a JSON object, got null"),
        (b"{}", "parent: expected JSON text, got bytes"),
    ],
)
def test_parse_object_says_why_not(text, message):
    with pytest.raises(Malformed) as error:
        parse_object(text, "parent")
    [(path, got)] = error.value.errors
    assert path == ""
    assert got.startswith(message)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100000 + "]" * 100000,
        '{"a":' * 3000 + "1" + "}" * 3000,
        '{"x": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}",
    ],
)
def test_deep_nesting_is_malformed_not_a_crash(text):
    with pytest.raises(Malformed) as error:
        parse(text)
    assert f"nested deeper than {MAX_DEPTH}" in error.value.errors[0].message


def test_nesting_up_to_the_limit_and_brackets_in_strings_parse():
    nested = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert parse_object('{"x": ' + nested + "}")["x"] is not None
    many = json.dumps({"text": "[{" * 5000, "x": [[1]] * 1000})
    assert parse_object(many)["text"] == "[{" * 5000


def test_dump_is_compact_ascii_even_for_a_lone_surrogate():
    text = dump({"a": "\ud800x", "b": [1, "wörld"]})
    text.encode("utf-8")  # what a WIT string needs: would raise on a lone surrogate
    assert text == '{"a":"\\ud800x","b":[1,"w\\u00f6rld"]}'
    with pytest.raises(ValueError, match="JSON"):
        dump({"x": float("nan")})


def test_errors_take_one_field_or_a_list():
    assert Invalid("spec.a", "must be set").errors == [("spec.a", "must be set")]
    error = Malformed([("a", "x"), ("b", "y")])
    assert error.errors == [FieldError("a", "x"), FieldError("b", "y")]
    assert str(error) == "a: x; b: y"
    assert invalid("spec.a", "m").errors == Invalid("spec.a", "m").errors
    assert malformed("", "m").errors == [("", "m")]
    assert unsupported("no").message == "no"
    assert isinstance(unsupported("no"), Unsupported)
    with pytest.raises(TypeError):
        Invalid("spec.a")
    with pytest.raises(ValueError, match="at least one"):
        Invalid([])


def test_describe():
    assert describe([("spec.text", "must be a string"), ("", "whole")]) == "spec.text: must be a string; whole"
