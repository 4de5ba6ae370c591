"""metacontroller hooks for the logic component (target/memcached.wasm).

A CompositeController's sync hook is an HTTP endpoint that gets the parent and
the children metacontroller observed and answers the children it should have
and the parent's status; metacontroller does every write. Here both answers
come from the component; the kinds come from its manifest.

    python controllers/metacontroller/hook.py serve --port 8090
    python controllers/metacontroller/hook.py controller --url http://HOOK:8090   # the CompositeController (JSON)

POST /customize: the related objects (the component's `references`: Secrets).
POST /sync:      children from `desired`, status from `status`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "python"))
from memcached_logic import Logic, LogicError  # noqa: E402  (the embedding, reused as is)

LOGIC = Logic(os.environ.get("MEMCACHED_WASM") or Path(__file__).resolve().parents[2] / "target" / "memcached.wasm")
MANIFEST = LOGIC.instance().manifest()
# Fields the API server fills in: metacontroller applies what we answer, so
# they stay out of it (the component keeps them from the observed children).
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"

log = logging.getLogger("memcached-metacontroller-hook")


def composite_controller(url: str, resync_seconds: int = 0) -> dict:
    """The CompositeController that points metacontroller at these hooks."""
    parent = MANIFEST.parent
    spec: dict[str, Any] = {
        "parentResource": {"apiVersion": parent.api_version, "resource": parent.plural},
        # InPlace: a changed child is updated, not left for a manual delete (OnDelete).
        "childResources": [
            {"apiVersion": kind.api_version, "resource": kind.plural, "updateStrategy": {"method": "InPlace"}}
            for kind in MANIFEST.owned
        ],
        # Memcached has no spec.selector: metacontroller labels children with
        # controller-uid and selects them by it.
        "generateSelector": True,
        "hooks": {
            "sync": {"webhook": {"url": f"{url.rstrip('/')}/sync"}},
            "customize": {"webhook": {"url": f"{url.rstrip('/')}/customize"}},
        },
    }
    if resync_seconds:
        spec["resyncPeriodSeconds"] = resync_seconds
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": f"{MANIFEST.name}-wasm"},
        "spec": spec,
    }


def customize(request: dict) -> dict:
    parent = request["parent"]
    namespace = parent["metadata"].get("namespace")
    rules = []
    for ref in LOGIC.instance().references(parent):
        kind = next((k for k in MANIFEST.reads if (k.group, k.kind) == (ref.group, ref.kind)), None)
        if kind is None:
            continue
        api_version = f"{ref.group}/{ref.version}" if ref.group else ref.version
        rules.append({"apiVersion": api_version, "resource": kind.plural, "namespace": ref.namespace or namespace,
                      "names": [ref.name]})
    return {"relatedResources": rules}


def sync(request: dict) -> dict:
    parent = request["parent"]
    observed = list(_objects(request.get("children")))
    related = list(_objects(request.get("related")))
    instance = LOGIC.instance()  # fresh per call, like the Rust host
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        children = [json.loads(text) for text in instance.desired(parent, observed, related)]
    except LogicError as err:
        # Bad input changes and deletes nothing: keep what is there, report it.
        log.warning("%s/%s: the spec is invalid; nothing changed: %s",
                    parent["metadata"].get("namespace"), parent["metadata"]["name"], err)
        children = observed
    status = json.loads(instance.status(parent, observed, related, now, None))
    return {"status": status, "children": [_as_applied(child) for child in children]}


def _objects(groups: Any) -> Iterable[dict]:
    """metacontroller's {"Kind.group/version": {"name": object}} maps, flattened."""
    for objects in (groups or {}).values():
        yield from objects.values()


def _as_applied(obj: dict) -> dict:
    obj = dict(obj)
    obj.pop("status", None)
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in SERVER_METADATA}
    if LAST_APPLIED in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != LAST_APPLIED}
    obj["metadata"] = meta
    return obj


class Hooks(BaseHTTPRequestHandler):
    routes = {"/sync": sync, "/customize": customize}
    calls = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        route = self.routes.get(self.path)
        if route is None:
            self.send_error(404, f"no hook at {self.path}; there are {sorted(self.routes)}")
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            answer = json.dumps(route(request)).encode()
        except Exception as err:  # a hook error is metacontroller's to retry; say why
            log.exception("%s failed", self.path)
            self.send_error(500, f"{type(err).__name__}: {err}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        if self.path == "/sync":
            parent = request["parent"]["metadata"]
            # One line per sync, for tests and benchmarks to count.
            print(json.dumps({"msg": "synced", "namespace": parent.get("namespace"), "name": parent["name"]}), flush=True)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug(format, *args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve /sync and /customize")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8090)
    controller = commands.add_parser("controller", help="print the CompositeController as JSON")
    controller.add_argument("--url", required=True, help="where metacontroller reaches this hook server")
    controller.add_argument("--resync-seconds", type=int, default=0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.command == "controller":
        print(json.dumps(composite_controller(args.url, args.resync_seconds), indent=2))
        return
    server = ThreadingHTTPServer((args.host, args.port), Hooks)
    print(json.dumps({"msg": "serving", "url": f"http://{args.host}:{server.server_port}"}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
