"""The log helper without any bindings: standard error."""

import pytest

from wasm_operator_sdk import log


def test_without_bindings_lines_go_to_stderr(capsys):
    log.warn("careful")
    log.error("broken: x")
    log.debug("d")
    assert capsys.readouterr().err == "[warn] careful\n[error] broken: x\n[debug] d\n"


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="error, warn, info, debug"):
        log.write("trace", "x")
