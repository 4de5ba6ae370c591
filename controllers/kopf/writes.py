"""The API writes a host makes for a logic module, over the official
`kubernetes` client's ApiClient: paths come from the module's kind-info
(group, version, plural), so no discovery is needed and no kind is known here.

The decisions stay with the component; this only compares and writes:
CreateOrUpdate (no call when equal), deletes with a uid precondition, and
the status merge patch through the status subresource.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException


def collection_path(kind: Any, namespace: str) -> str:
    """`kind` is a memcached_logic.KindInfo."""
    base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    return f"{base}/namespaces/{namespace}/{kind.plural}" if kind.namespaced else f"{base}/{kind.plural}"


class Writer:
    def __init__(self, api: ApiClient, field_manager: str):
        self.api = api
        self.field_manager = field_manager

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        query = [("fieldManager", self.field_manager)] if method in ("POST", "PUT", "PATCH") else []
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self.api.param_serialize(
            method, path, query_params=query, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self.api.call_api(*request)
        data = response.read()
        if response.status >= 400:
            raise ApiException(http_resp=response)
        return json.loads(data or b"null")

    def get(self, kind: Any, namespace: str, name: str) -> Optional[dict]:
        try:
            return self.request("GET", f"{collection_path(kind, namespace)}/{name}")
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def create(self, kind: Any, namespace: str, obj: Mapping[str, Any]) -> dict:
        return self.request("POST", collection_path(kind, namespace), obj)

    def replace(self, kind: Any, namespace: str, obj: Mapping[str, Any]) -> dict:
        return self.request("PUT", f"{collection_path(kind, namespace)}/{obj['metadata']['name']}", obj)

    def delete(self, kind: Any, namespace: str, obj: Mapping[str, Any]) -> bool:
        """Deletes exactly this object (uid precondition); False when it is gone already."""
        body = {"preconditions": {"uid": obj["metadata"]["uid"]}, "propagationPolicy": "Background"}
        try:
            self.request("DELETE", f"{collection_path(kind, namespace)}/{obj['metadata']['name']}", body)
            return True
        except ApiException as err:
            if err.status in (404, 409):
                return False
            raise

    def patch_status(self, kind: Any, namespace: str, name: str, patch: Mapping[str, Any]) -> dict:
        path = f"{collection_path(kind, namespace)}/{name}/status"
        return self.request("PATCH", path, {"status": patch}, "application/merge-patch+json")


def same_ignoring_nulls(a: Any, b: Any) -> bool:
    """Equal, counting a null member as absent (the API server drops nulls)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = {k for k, v in a.items() if v is not None} | {k for k, v in b.items() if v is not None}
        return all(same_ignoring_nulls(a.get(k), b.get(k)) for k in keys)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_ignoring_nulls(x, y) for x, y in zip(a, b))
    return a == b


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) from `old` to `new`."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    patch: dict = {k: None for k, v in old.items() if v is not None and new.get(k) is None}
    for key, value in new.items():
        if value is None or (key in old and same_ignoring_nulls(old[key], value)):
            continue
        patch[key] = merge_patch(old[key], value) if isinstance(old.get(key), dict) else value
    return patch
