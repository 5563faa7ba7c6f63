"""Dict-in, dict-out calls on any Kubernetes resource, through the official client's transport.

The generated typed APIs of ``kubernetes`` validate every body into pydantic models; a controller
that only moves JSON around pays for that on every call and loses unknown fields. This module
sends requests through the client's own connection pool (same auth, TLS and proxy settings: the
pool is the one the client built from its configuration) and returns plain dicts. The client's
``param_serialize``/``call_api`` are skipped for ordinary requests: they walk the whole body
again to sanitise it, build headers through several generic layers and wrap the response, about
60 microseconds a request and 4-5 % of the controller's CPU in a burst (docs/benchmarks.md); the
body here is JSON already. Authentication still comes from the client (``update_params_for_auth``:
the bearer token and its refresh hook), query parameters are encoded by the client's
``parameters_to_url_query``. Bodies are encoded and answers decoded with ``orjson`` (the same
values, several times faster than the standard library's ``json``, whose decoding was 5 % of the
CPU). Watches keep the client's path. Every request is
reported to an observer (the ``rest_client_requests_total`` metric and per-test request
counters) and timed by a timer (``rest_client_request_duration_seconds``).

Timeouts and retries live here, not in the HTTP client (whose own retries are off, see
:mod:`taskfsm.kube.client`), so that every retry passes the write guard again and respects a
deadline (docs/operations.md, "Request timeouts and retries"):

* ordinary requests time out after :data:`DEFAULT_TIMEOUT` (10 s to connect including the TLS
  handshake, 10 s without a byte of the answer); a caller with a deadline (the Lease elector)
  gets whatever time is left of it instead;
* a read timeout is not retried (a write's outcome is unknown; the caller retries from a fresh
  view) and closes the idle pooled connections to that server, which probably share the dead
  path, so the retry connects afresh instead of waiting on the next dead connection;
* a connection that closes or resets before the answer (a keep-alive connection the server had
  closed) is retried once for GET, PUT and DELETE;
* an answer 429 or 5xx with a ``Retry-After`` header is retried, never sooner than the header
  says, up to :data:`MAX_RETRY_AFTER` times and only while the wait fits the deadline (by default
  :data:`RETRY_AFTER_BUDGET` seconds); otherwise the error carries ``retry_after`` for the caller;
* a :data:`WriteGuard`, when set, is asked before every attempt of a write (POST, PUT, PATCH,
  DELETE) and refuses it unsent (:class:`~taskfsm.kube.errors.NotLeader`) when this replica
  cannot show it holds the leader-election Lease; a review (:attr:`Resource.review`) is a
  question, not a write, and is not asked.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, overload

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from taskfsm.kube import wire
from taskfsm.kube.curl_settings import settings_of
from taskfsm.kube.errors import ConnectionDropped, Forbidden, KubeError, Unavailable, api_errors

if TYPE_CHECKING:
    from taskfsm.kube.curl import CurlTransport

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
"""Accept header for a LIST that returns only each object's metadata."""

#: (connect, read) seconds for ordinary requests. A dead connection must not block a worker for
#: ever (docs/behaviour.md F5; the client has no read timeout by default), and one dead pooled
#: connection should cost seconds, not a minute; an API server answering within 5 s (slow but
#: correct) must still work, TLS handshake of a new connection included (urllib3 counts it in the
#: connect timeout). docs/operations.md has the reasoning.
DEFAULT_TIMEOUT = (10.0, 10.0)

#: Seconds an ordinary request may spend waiting for ``Retry-After`` in all (a caller's deadline
#: replaces it); a longer wait is left to the caller's backoff, with ``retry_after`` on the error.
RETRY_AFTER_BUDGET = 10.0

#: Retries after ``Retry-After`` answers per request (client-go's ceiling).
MAX_RETRY_AFTER = 10

#: The verbs that change something (the write guard is asked before each of them).
#: How long a permission refusal stays on ``/readyz`` unless refused again: more than twice
#: the longest retry backoff of a watch or a reconcile (30 s, jittered up to 45 s).
DENIAL_HOLD_SECONDS = 120.0

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: Verbs retried once when the connection drops before the answer (idempotent in HTTP terms).
IDEMPOTENT = frozenset({"GET", "PUT", "DELETE"})

WriteGuard = Callable[[str, str], float]
"""Asked before every attempt of a write with (HTTP method, resource label); returns for how many
more seconds writing is allowed (connecting may take no longer) or raises
:class:`~taskfsm.kube.errors.NotLeader`."""

Observer = Callable[[str, str, int], None]
"""Called after each request with (HTTP method, resource plural or ``plural/subresource``, code);
code 0 means no response arrived."""

Timer = Callable[[str, float], None]
"""Called after each request with (HTTP method, seconds from sending it to its answer, or to its
failure); a watch's answer is its response head, not the stream."""

WatchStream = urllib3.BaseHTTPResponse
"""An open watch: the streaming urllib3 response, not yet read (see :meth:`Rest.watch`)."""

Timeout = float | tuple[float, float]
"""A request timeout as urllib3 takes it: one total, or ``(connect, read)`` seconds."""


class _Answer(Protocol):
    """What :meth:`Rest._send` uses of the client's ``rest.RESTResponse``, whose own annotations
    leave ``read`` untyped and declare ``data`` as always None."""

    status: int
    response: urllib3.BaseHTTPResponse
    """The urllib3 response, not yet read (the client asks for it unloaded)."""

    def read(self) -> bytes: ...


@dataclass(frozen=True)
class Resource:
    """A REST resource: ``group`` ("" for core), ``version``, ``plural``, ``kind``, scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    review: bool = False
    """A review (TokenReview, SubjectAccessReview): a POST that asks the API server a question
    and stores nothing, so the write guard lets it through (a stand-by replica answers
    ``/metrics`` callers too)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
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
CORE_EVENTS = Resource("", "v1", "events", "Event")
"""The core Events API, whose field selectors reach ``involvedObject.uid`` and ``reason``."""
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False, review=True
)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io",
    "v1",
    "subjectaccessreviews",
    "SubjectAccessReview",
    namespaced=False,
    review=True,
)
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)


class Rest:
    """JSON calls against one cluster.

    Args:
        api_client: the configured ``kubernetes.client.ApiClient``.
        observer: request hook, see :data:`Observer`.
        timer: request duration hook, see :data:`Timer`.
        timeout: default ``(connect, read)`` timeout in seconds.
        write_guard: see :data:`WriteGuard`; None lets every write through. May be set later
            (the controller sets it once leader election starts).
        sleep: how to wait for ``Retry-After`` (tests pass a fake).
        clock: monotonic seconds, when a permission refusal was given (tests pass a fake).
        curl: send ordinary requests over libcurl where the client's configuration allows it
            (:mod:`taskfsm.kube.curl`; the controller's default, ``--http-transport``); False
            (this class's default, for tools and tests) keeps every request on the client's
            urllib3 pool.

    Every method raises a :class:`taskfsm.kube.errors.KubeError` subclass on failure.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        observer: Observer | None = None,
        timer: Timer | None = None,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        write_guard: WriteGuard | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        curl: bool = False,
    ) -> None:
        self.api_client = api_client
        self.observer = observer
        self.timer = timer
        self.timeout = timeout
        self.write_guard = write_guard
        self.sleep = sleep
        self.clock = clock
        self.max_response_bytes: int | None = None
        """Largest answer (and watch event) read, None for no bound: a remote
        MediaProcessingEntity's API server is its owner's, and could answer without end."""
        self._denied: dict[tuple[str, str], tuple[str, float]] = {}
        """(verb, resource) → the API server's message and when it was last given, while the
        latest such request was refused for lack of a permission (RBAC)."""
        self._denied_lock = threading.Lock()
        pool = getattr(getattr(api_client, "rest_client", None), "pool_manager", None)
        settings = settings_of(pool) if curl else None
        self.curl: CurlTransport | None = None
        if settings is not None:
            from taskfsm.kube.curl import CurlTransport  # pycurl only when asked for (libcurl)

            self.curl = CurlTransport(settings)
        """The libcurl transport of ordinary requests, None where they take the client's
        urllib3 pool (:mod:`taskfsm.kube.curl` says when)."""

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
        metadata_only: bool = False,
    ) -> dict[str, Any]:
        """One LIST. With ``limit``, one page: ``metadata.continue`` of the result asks for the
        next (pass it as ``continue_token``); an expired token raises :class:`Gone`.
        ``metadata_only`` asks for a ``PartialObjectMetadataList`` (no data, no spec)."""
        query = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "resourceVersion": resource_version,
            "limit": str(limit) if limit else None,
            "continue": continue_token,
        }
        accept = METADATA_LIST if metadata_only else None
        return self.request(
            "GET", res, res.path(namespace), query=query, verb="LIST", accept=accept
        )

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
            "PATCH",
            res,
            res.path(namespace, name, subresource),
            body=patch,
            content_type=content_type,
        )

    def replace(
        self, res: Resource, namespace: str | None, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        return self.request("PUT", res, res.path(namespace, name), body=body)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with optional UID and resourceVersion preconditions (409 Conflict when the
        object is another one, or changed since it was read)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            body["preconditions"] = preconditions
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
    ) -> WatchStream:
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

    @overload
    def request(
        self,
        method: str,
        res: Resource,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        stream: Literal[False] = False,
        timeout: tuple[float, float] | None = None,
        deadline: float | None = None,
        verb: str | None = None,
        accept: str | None = None,
    ) -> dict[str, Any]: ...

    @overload
    def request(
        self,
        method: str,
        res: Resource,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        stream: Literal[True],
        timeout: tuple[float, float] | None = None,
        deadline: float | None = None,
        verb: str | None = None,
        accept: str | None = None,
    ) -> WatchStream: ...

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
        deadline: float | None = None,
        verb: str | None = None,
        accept: str | None = None,
    ) -> dict[str, Any] | WatchStream:
        """One request, retried as the module docstring says: the answer's JSON object (``{}``
        for an empty body), or with ``stream`` the unread streaming response."""
        headers = {"Accept": accept or "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        label = _resource_label(res, path)
        guarded = method in WRITE_VERBS and not res.review
        limit = deadline if deadline is not None else time.monotonic() + RETRY_AFTER_BUDGET
        retries, dropped = 0, False
        while True:
            attempt_timeout, allowed = self._attempt_timeout(
                method, label, timeout, deadline, guarded
            )
            try:
                answer = self._send(
                    method,
                    path,
                    label,
                    params,
                    headers,
                    body,
                    stream,
                    attempt_timeout,
                    verb,
                    allowed,
                )
                if self._denied:
                    self._note_denied((verb or method, label), "")
                return answer
            except Forbidden as exc:
                if exc.rbac_denied:  # noted (and logged once, at WARNING) until one succeeds
                    self._note_denied((verb or method, label), str(exc))
                raise
            except ConnectionDropped:
                if dropped or method not in IDEMPOTENT:
                    raise
                dropped = True  # once: a keep-alive connection the server had closed
            except KubeError as exc:
                wait = exc.retry_after
                if wait is None or retries >= MAX_RETRY_AFTER or time.monotonic() + wait >= limit:
                    raise
                retries += 1
                self.sleep(wait)

    def _attempt_timeout(
        self,
        method: str,
        label: str,
        timeout: tuple[float, float] | None,
        deadline: float | None,
        guarded: bool,
    ) -> tuple[Timeout, float | None]:
        """The timeout of the next attempt: the deadline's remainder as one total (connect, TLS
        and answer together), else ``(connect, read)``; for a write, connecting may not outlast
        the write guard's permission. With it, that permission in seconds (None: no guard).
        Raises when no time is left or the guard refuses."""
        allowed = None
        if self.write_guard is not None and guarded:
            allowed = self.write_guard(method, label)  # raises NotLeader
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Unavailable(f"{method} {label}: no time left before the deadline")
            return (left if allowed is None else (min(left, allowed), left)), allowed
        connect, read = timeout or self.timeout
        return ((connect, read) if allowed is None else (min(connect, allowed), read)), allowed

    def denied(self, now: float | None = None) -> dict[tuple[str, str], str]:
        """(verb, resource) → the API server's message, for each request refused for lack of a
        permission (RBAC) within the last :data:`DENIAL_HOLD_SECONDS` and not succeeded since.
        The controller reports these on ``/readyz`` (docs/install.md, its opening paragraphs).

        A permission that is really missing is refused again at every retry (the longest
        backoff is well inside the hold), so it stays listed; a refusal that was the API
        server's own passing state (its RBAC caches still loading after a restart) goes after
        the hold even when that request is never made again."""
        now = self.clock() if now is None else now
        with self._denied_lock:
            for key, (_, at) in list(self._denied.items()):
                if now - at > DENIAL_HOLD_SECONDS:
                    del self._denied[key]
            return {key: message for key, (message, _) in self._denied.items()}

    def _note_denied(self, key: tuple[str, str], message: str) -> None:
        with self._denied_lock:
            if message:
                if key not in self._denied:
                    log.warning(
                        "the API server refused a request for lack of a permission",
                        extra={"verb": key[0], "resource": key[1], "error": message},
                    )
                self._denied[key] = (message, self.clock())
            else:
                self._denied.pop(key, None)

    def _send(
        self,
        method: str,
        path: str,
        label: str,
        params: Sequence[tuple[str, Any]],
        headers: dict[str, str],
        body: Any,
        stream: bool,
        timeout: Timeout,
        verb: str | None,
        allowed: float | None = None,
    ) -> dict[str, Any] | WatchStream:
        """One attempt; every failure as a :class:`~taskfsm.kube.errors.KubeError`.
        ``allowed``: the write guard's permission in seconds, for :meth:`_send_direct`."""
        code = 0
        started = time.monotonic()
        try:
            with api_errors():
                try:
                    if not stream:
                        code, answer = self._send_direct(
                            method, path, params, headers, body, timeout, allowed
                        )
                        return answer
                    call = self.api_client.param_serialize(
                        method,
                        path,
                        query_params=params,
                        header_params=dict(headers),
                        body=body,
                        auth_settings=["BearerToken"],
                    )
                    response = cast(
                        _Answer, self.api_client.call_api(*call, _request_timeout=timeout)
                    )
                    code = response.status
                    if 200 <= code < 300:
                        return response.response  # a watch: read by the caller
                    raise ApiException.from_response(
                        http_resp=response,
                        body=response.read().decode(errors="replace"),
                        data=None,
                    )
                except ApiException as exc:
                    code = exc.status or code
                    raise
                except urllib3.exceptions.ReadTimeoutError:
                    self.drop_idle_connections()
                    raise
                except urllib3.exceptions.ProtocolError as exc:
                    raise ConnectionDropped(f"connection dropped: {exc}") from None
        finally:
            if self.timer is not None:
                self.timer(verb or method, time.monotonic() - started)
            if self.observer is not None:
                self.observer(verb or method, label, code)

    def _send_direct(
        self,
        method: str,
        path: str,
        params: Sequence[tuple[str, Any]],
        headers: dict[str, str],
        body: Any,
        timeout: Timeout,
        allowed: float | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """A non-streaming request through the client's pool manager (module docstring): the
        status code and the answer's JSON object; raises ``ApiException`` for an error status.

        Over libcurl a guarded write (``allowed`` set) is never sent after the guard's
        permission ran out: libcurl sends a request again by itself, on a new connection, when
        a reused one turns out dead, and no connection is opened for it past the permission
        (urllib3 sends once, within it). The answer may come later."""
        api = self.api_client
        headers = {**api.default_headers, **headers}
        queries: list[tuple[str, str]] = []
        api.update_params_for_auth(headers, queries, ["BearerToken"], path, method, body)
        url = api.configuration.host.rstrip("/") + path
        query = [*params, *queries]
        if query:
            url += "?" + api.parameters_to_url_query(query, None)
        data = body
        if body is not None and not isinstance(body, (bytes, str)):
            data = orjson.dumps(body, default=api.sanitize_for_serialization)
        transport = self.curl
        if transport is not None:
            lines = [f"{name}: {value}" for name, value in headers.items()]
            sent = data.encode() if isinstance(data, str) else data
            answer = transport.request(
                method, url, lines, sent, timeout, self.max_response_bytes, within=allowed
            )
            if not 200 <= answer.status < 300:
                reason, received = answer.head()
                error = ApiException(
                    status=answer.status, reason=reason, body=answer.body.decode(errors="replace")
                )
                error.headers = received
                raise error
            return answer.status, (wire.loads(answer.body) if answer.body else {})
        response = api.rest_client.pool_manager.request(
            method,
            url,
            body=data,
            headers=headers,
            timeout=(
                urllib3.Timeout(total=timeout)
                if isinstance(timeout, (int, float))
                else urllib3.Timeout(connect=timeout[0], read=timeout[1])
            ),
            preload_content=False,
        )
        payload = self._read(response)
        if not 200 <= response.status < 300:
            raise ApiException.from_response(
                http_resp=client.rest.RESTResponse(response),
                body=payload.decode(errors="replace"),
                data=None,
            )
        return response.status, (wire.loads(payload) if payload else {})

    def _read(self, response: urllib3.BaseHTTPResponse) -> bytes:
        """The whole answer, or :class:`Unavailable` past :attr:`max_response_bytes`."""
        limit = self.max_response_bytes
        if limit is None:
            return response.data
        parts, size = [], 0
        while chunk := response.read(1024 * 1024):
            size += len(chunk)
            if size > limit:
                response.release_conn()
                raise Unavailable(f"an answer larger than {limit // (1024 * 1024)} MiB")
            parts.append(chunk)
        return b"".join(parts)

    def drop_idle_connections(self) -> int:
        """Close the idle pooled connections to this API server (they reconnect when next used);
        how many were closed. Called after a read timeout: the connections idle in the pool
        probably share the path that just went silent, and each would cost a read timeout.
        The libcurl transport's handles connect afresh too (:mod:`taskfsm.kube.curl`)."""
        if self.curl is not None:
            self.curl.drop_connections()
        try:
            manager = self.api_client.rest_client.pool_manager
            idle = manager.connection_from_url(self.api_client.configuration.host).pool
        except (AttributeError, urllib3.exceptions.HTTPError):
            return 0
        if idle is None:  # the pool is closed
            return 0
        taken = []
        while True:
            try:
                taken.append(idle.get(block=False))
            except queue.Empty:
                break
        closed = 0
        for conn in taken:
            if conn is not None and conn.sock is not None:
                conn.close()
                closed += 1
            with contextlib.suppress(queue.Full):
                idle.put(conn, block=False)  # a closed connection reconnects when next taken
        return closed


def _resource_label(res: Resource, path: str) -> str:
    """``jobs``, or ``tasks/status`` for a subresource request."""
    sub = path.rsplit("/", 1)[-1] if path.endswith(("/status", "/log")) else ""
    return f"{res.plural}/{sub}" if sub else res.plural
