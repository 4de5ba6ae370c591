"""`bindings`: the Python bindings `componentize-py bindings` generates from
wit/controller's world logic-module-reach (the types a component gets),
importable for one test module.
Skipped when componentize-py is not beside this Python."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GENERATED = ("wit_world", "componentize_py_types", "componentize_py_async_support", "poll_loop")


@pytest.fixture(scope="module")
def bindings(tmp_path_factory):
    tool = Path(sys.executable).parent / "componentize-py"
    if not tool.exists():
        pytest.skip("componentize-py is not installed beside this Python (use target/venv-python-sdk)")
    out = tmp_path_factory.mktemp("bindings")
    wit = os.environ.get("SDK_WIT_DIR", str(ROOT / "wit" / "controller"))
    run = subprocess.run(
        [str(tool), "-d", wit, "-w", "logic-module-reach", "bindings", str(out)], capture_output=True, text=True
    )
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
