"""How to start each controller against the local control plane, watching one
namespace (metacontroller watches every namespace: it must run alone). Each
runs as the plane's admin; `reconciles()` counts the log lines that say it
handled a parent, so a test knows when a pass is over."""

from __future__ import annotations

import json
import subprocess
from typing import Optional

from cluster import KOPF, OPERATOR, PYTHON, ROOT, ControlPlane, Process, eventually


class Controller:
    name = ""
    # A log line per parent handled.
    reconciled = ""

    def __init__(self, plane: ControlPlane, namespace: str):
        self.plane = plane
        self.namespace = namespace
        self.env = {"KUBECONFIG": plane.kubeconfig}
        self.process: Optional[Process] = None

    def args(self) -> list:
        raise NotImplementedError

    def start(self) -> "Controller":
        self.process = Process(self.name, self.args(), self.env)
        return self

    def restart(self) -> None:
        self.stop()
        self.start()

    def reconciles(self) -> int:
        return self.process.count(self.reconciled) if self.process else 0

    def pids(self) -> list[int]:
        return [self.process.process.pid] if self.process else []

    def stop(self) -> None:
        if self.process:
            self.process.stop()

    def log(self) -> str:
        return self.process.tail() if self.process else ""


class Rust(Controller):
    """The project's own host, the reference."""

    name = "rust"
    reconciled = r" reconciled\""  # one line per object it reconciled

    def args(self) -> list:
        # As the admin, like the frameworks it is compared with (they have no
        # ServiceAccount per module), so it writes as itself.
        return [OPERATOR, "run", "--namespace", self.namespace, "--leader-elect=false", "--module-identity=operator",
                "--metrics-bind-address", "127.0.0.1:0", "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:0", "--concurrency", "8"]


class Kopf(Controller):
    name = "kopf"
    reconciled = r"Handler 'reconcile_handler' succeeded"

    def args(self) -> list:
        return [KOPF, "run", "--standalone", "--namespace", self.namespace, ROOT / "controllers" / "kopf" / "operator.py"]


class Node(Controller):
    name = "node"
    reconciled = r'"msg":"reconciled"'

    def args(self) -> list:
        controller = ROOT / "controllers" / "node" / "controller.mjs"
        return ["node", controller, "--namespace", self.namespace, "--concurrency", "8"]


def metacontroller_binary() -> str:
    """scripts/metacontroller.sh: the cached build (or METACONTROLLER_BIN)."""
    done = subprocess.run(["bash", ROOT / "scripts" / "metacontroller.sh"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/metacontroller.sh failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


class Metacontroller(Controller):
    """metacontroller (built from its pinned source) plus the hook server;
    the CompositeController is created on start and deleted on stop."""

    name = "metacontroller"
    reconciled = r'"msg": "synced"'

    def __init__(self, plane: ControlPlane, namespace: str, qps: float = 5, burst: int = 10):
        super().__init__(plane, namespace)
        self.binary = metacontroller_binary()
        self.hook: Optional[Process] = None
        self.qps, self.burst = qps, burst
        # Syncs before the last restart: the hook server outlives restarts.
        self.offset = 0

    def start(self) -> "Controller":
        if self.hook is None:
            hook = ROOT / "controllers" / "metacontroller" / "hook.py"
            self.hook = Process("hook", [PYTHON, hook, "serve", "--port", "0"])
            line = eventually(lambda: self.hook.lines[:1], 60, "the hook server to listen")[0]
            url = json.loads(line)["url"]
            controller = subprocess.run(
                [PYTHON, hook, "controller", "--url", url],
                capture_output=True, text=True, check=True, cwd=ROOT,
            ).stdout
            self.plane.kubectl("apply", "-f", "-", input=controller)
            self.controller_name = json.loads(controller)["metadata"]["name"]
        self.process = Process(self.name, [
            self.binary, "--metrics-address=0", "--health-probe-bind-address=0", "--discovery-interval=2s",
            f"--client-go-qps={self.qps}", f"--client-go-burst={self.burst}",
        ], self.env)
        return self

    def reconciles(self) -> int:
        return self.hook.count(self.reconciled) - self.offset if self.hook else 0

    def pids(self) -> list[int]:
        return super().pids() + ([self.hook.process.pid] if self.hook else [])

    def restart(self) -> None:
        super().stop()
        self.offset += self.reconciles()
        self.start()

    def stop(self) -> None:
        super().stop()
        if self.hook:
            self.plane.kubectl("delete", "compositecontroller", self.controller_name, "--ignore-not-found")
            self.hook.stop()
            self.hook = None

    def log(self) -> str:
        return super().log() + "\n--- hook ---\n" + (self.hook.tail() if self.hook else "")


FRAMEWORKS = {"kopf": Kopf, "metacontroller": Metacontroller, "node": Node}
