"""Dict-in, dict-out calls on any Kubernetes resource, through the official client's transport.

The generated typed APIs of ``kubernetes`` validate every body into pydantic models; a controller
that only moves JSON around pays for that on every call and loses unknown fields. This module
builds requests with the client's own ``param_serialize``/``call_api`` (same auth, TLS, proxy and
retry settings) and returns plain dicts. Every request is reported to an observer (the
``rest_client_requests_total`` metric and per-test request counters).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm.kube import faults
from taskfsm.kube.errors import api_errors

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

#: (connect, read) seconds for ordinary requests: a dead connection must not block a worker
#: for ever (failure-modes.md F5; the client has no read timeout by default).
DEFAULT_TIMEOUT = (5.0, 30.0)

Observer = Callable[[str, str, int], None]
"""Called after each request with (HTTP method, resource plural or ``plural/subresource``, code);
code 0 means no response arrived."""


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` ("" for core), ``version``, ``plural``, ``kind``, scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


JOBS = Resource("batch", "v1", "jobs", "Job")
SECRETS = Resource("", "v1", "secrets", "Secret")
PODS = Resource("", "v1", "pods", "Pod")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class Rest:
    """JSON calls against one cluster.

    Args:
        api_client: the configured ``kubernetes.client.ApiClient``.
        observer: request hook, see :data:`Observer`.
        timeout: default ``(connect, read)`` timeout in seconds.

    Every method raises a :class:`taskfsm.kube.errors.KubeError` subclass on failure.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        observer: Observer | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
    ) -> None:
        self.api_client = api_client
        self.observer = observer
        self.timeout = timeout

    # -- verbs -----------------------------------------------------------------------------------

    def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        return self.request("GET", res, res.path(namespace, name))

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """One LIST. With ``limit``, one page: ``metadata.continue`` of the result asks for the
        next (pass it as ``continue_token``); an expired token raises :class:`Gone`."""
        query = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "resourceVersion": resource_version,
            "limit": str(limit) if limit else None,
            "continue": continue_token,
        }
        return self.request("GET", res, res.path(namespace), query=query, verb="LIST")

    def create(
        self, res: Resource, namespace: str | None, body: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        body = {"apiVersion": res.api_version, "kind": res.kind, **body}
        query = {"dryRun": "All" if dry_run else None}
        return self.request("POST", res, res.path(namespace), body=body, query=query)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
    ) -> dict[str, Any]:
        return self.request(
            "PATCH", res, res.path(namespace, name, subresource), body=patch, content_type=content_type
        )

    def replace(self, res: Resource, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("PUT", res, res.path(namespace, name), body=body)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with an optional UID precondition (409 Conflict when it does not match)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if propagation:
            body["propagationPolicy"] = propagation
        return self.request("DELETE", res, res.path(namespace, name), body=body)

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        timeout_seconds: int,
        read_timeout: float,
        **query: Any,
    ) -> Any:
        """Open a watch; returns the streaming ``urllib3`` response (for ``kubernetes.watch``)."""
        query = {**query, "watch": "true", "timeoutSeconds": timeout_seconds}
        return self.request(
            "GET",
            res,
            res.path(namespace),
            query=query,
            stream=True,
            timeout=(self.timeout[0], read_timeout),
            verb="WATCH",
        )

    # -- transport -------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        res: Resource,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        stream: bool = False,
        timeout: tuple[float, float] | None = None,
        verb: str | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        code = 0
        try:
            with api_errors():
                try:
                    call = self.api_client.param_serialize(
                        method,
                        path,
                        query_params=params,
                        header_params=headers,
                        body=body,
                        auth_settings=["BearerToken"],
                    )
                    response = self.api_client.call_api(*call, _request_timeout=timeout or self.timeout)
                    code = response.status
                    if stream and 200 <= code < 300:
                        return response.response
                    response.read()
                    if not 200 <= code < 300:
                        raise ApiException.from_response(http_resp=response, body=response.data.decode(errors="replace"), data=None)
                    if method in faults.WRITE_VERBS:
                        faults.after_write(method, _resource_label(res, path))
                    return json.loads(response.data) if response.data else {}
                except ApiException as exc:
                    code = exc.status or code
                    raise
        finally:
            if self.observer is not None:
                self.observer(verb or method, _resource_label(res, path), code)


def _resource_label(res: Resource, path: str) -> str:
    """``jobs``, or ``tasks/status`` for a subresource request."""
    sub = path.rsplit("/", 1)[-1] if path.endswith(("/status", "/log")) else ""
    return f"{res.plural}/{sub}" if sub else res.plural
