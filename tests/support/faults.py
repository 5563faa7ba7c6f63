"""Client-side request counting and fault injection for controller tests.

A :class:`~taskfsm.manager.manager.Manager` builds every :class:`~taskfsm.kube.rest.Rest` it uses
through its ``rest_factory``. Tests pass :func:`rest_factory` here to get, for the main cluster and
every MediaProcessingEntity cluster:

* a :class:`RequestLog` of every request (verb, resource, path, status code, a copy of the body),
  fed by the ``Rest`` observer hook and by :class:`FaultyRest` itself;
* :class:`Fault` rules that make chosen requests fail, either *before* they are sent (the server
  never sees them) or *after* the server answered (the write is committed, the client sees a
  timeout: docs/behaviour.md F2).

Nothing here talks to the API server except through the wrapped ``Rest``.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from taskfsm.kube.errors import KubeError, Unavailable
from taskfsm.kube.rest import Resource, Rest

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Request:
    """One request as the client saw it. ``code`` 0: no response arrived (or a fault fired)."""

    verb: str
    resource: str
    path: str
    code: int
    body: Any = None
    fault: str = ""

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def namespace(self) -> str:
        parts = self.path.split("/")
        return parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""


class RequestLog:
    """Thread-safe list of :class:`Request`\\ s, with the counts a cost report needs."""

    def __init__(self) -> None:
        self._requests: list[Request] = []
        self._lock = threading.Lock()

    def add(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def all(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def select(
        self, *, verb: str | None = None, resource: str | None = None, namespace: str | None = None
    ) -> list[Request]:
        """Requests matching every given filter (``resource`` is a plural or ``plural/sub``)."""
        return [
            r
            for r in self.all()
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and (namespace is None or r.namespace == namespace)
        ]

    def writes(self, *, events: bool = False) -> list[Request]:
        """Writes (POST/PUT/PATCH/DELETE); Events only when ``events`` is True."""
        return [r for r in self.all() if r.write and (r.resource == "events") == events]

    def uncached_reads(self) -> list[Request]:
        """Single-object GETs (lists and watches fill the caches and are not counted)."""
        return [r for r in self.all() if r.verb == "GET"]

    def summary(self) -> dict[str, int]:
        """``{"writes": n, "uncached_reads": n, "events": n, "<VERB> <resource>": n, ...}``."""
        out = {
            "writes": len(self.writes()),
            "uncached_reads": len(self.uncached_reads()),
            "events": len(self.writes(events=True)),
        }
        for r in self.all():
            if r.write or r.verb == "GET":
                key = f"{r.verb} {r.resource}"
                out[key] = out.get(key, 0) + 1
        return out


@dataclass
class Fault:
    """Make matching requests fail.

    Attributes:
        verb: HTTP method (``POST``, ``PATCH``, ...), or ``GET``/``LIST``/``WATCH``.
        resource: plural, or ``plural/subresource`` (e.g. ``tasks/status``).
        after_send: True: send the request, then raise as if the answer never arrived (the
            server committed it). False: raise without sending.
        times: how many matching requests fail (then the fault is spent).
        when: extra predicate on the request body (e.g. only a status patch setting a phase).
        error: builds the exception to raise.
    """

    verb: str
    resource: str
    after_send: bool = False
    times: int = 1
    when: Callable[[Any], bool] | None = None
    error: Callable[[], KubeError] = lambda: Unavailable("injected fault: read timed out")
    fired: int = field(default=0, init=False)

    def matches(self, verb: str, resource: str, body: Any) -> bool:
        if self.fired >= self.times or verb != self.verb or resource != self.resource:
            return False
        return self.when is None or bool(self.when(body))


class Faults:
    """A shared, thread-safe set of :class:`Fault` rules."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, verb: str, resource: str, body: Any) -> Fault | None:
        """The first live fault matching the request, counted as fired; None if none."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(verb, resource, body):
                    fault.fired += 1
                    return fault
        return None


def _resource_of(res: Resource, path: str) -> str:
    sub = path.rsplit("/", 1)[-1] if path.endswith(("/status", "/log")) else ""
    return f"{res.plural}/{sub}" if sub else res.plural


class FaultyRest(Rest):
    """A :class:`Rest` that logs every request and applies :class:`Faults`."""

    def __init__(
        self, api_client: client.ApiClient, *, log: RequestLog, faults: Faults, **kwargs: Any
    ) -> None:
        super().__init__(api_client, **kwargs)
        self.log = log
        self.faults = faults

    def request(self, method: str, res: Resource, path: str, **kwargs: Any) -> Any:
        verb = kwargs.get("verb") or method
        resource = _resource_of(res, path)
        body = kwargs.get("body")
        fault = self.faults.take(verb, resource, body)
        kept = copy.deepcopy(body) if verb in WRITE_VERBS else None
        if fault is not None and not fault.after_send:
            self.log.add(Request(verb, resource, path, 0, kept, fault="before_send"))
            raise fault.error()
        try:
            result = super().request(method, res, path, **kwargs)
        except KubeError as exc:
            self.log.add(Request(verb, resource, path, exc.status, kept))
            raise
        self.log.add(Request(verb, resource, path, 200, kept, fault="after_send" if fault else ""))
        if fault is not None:
            raise fault.error()
        return result


def rest_factory(
    log: RequestLog, faults: Faults | None = None
) -> Callable[[client.ApiClient], Rest]:
    """For ``Manager(rest_factory=...)``: FaultyRests sharing ``log`` and ``faults``."""
    shared = faults or Faults()

    def build(api: client.ApiClient) -> Rest:
        return FaultyRest(api, log=log, faults=shared)

    return build


class RequestCounter:
    """A ``Rest`` observer counting requests by (verb, resource, code); no paths, no bodies."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()

    def __call__(self, verb: str, resource: str, code: int) -> None:
        with self._lock:
            key = (verb, resource, code)
            self.counts[key] = self.counts.get(key, 0) + 1

    def snapshot(self) -> dict[tuple[str, str, int], int]:
        with self._lock:
            return dict(self.counts)

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()

    @staticmethod
    def writes(counts: dict[tuple[str, str, int], int], *, events: bool = False) -> int:
        return sum(
            n
            for (verb, resource, _), n in counts.items()
            if verb in WRITE_VERBS and (resource == "events") == events
        )

    @staticmethod
    def uncached_reads(counts: dict[tuple[str, str, int], int]) -> int:
        return sum(n for (verb, _, _), n in counts.items() if verb == "GET")


class ReconcileTap:
    """Counts finished Task reconciles per key, so a test can wait for one that *started* after
    a change it made (phases are levels: a test asserting "nothing changed" needs that barrier).

    Install on a Manager built with ``start=False`` (workers bind ``reconcile`` at start).
    """

    def __init__(self, controller: Any) -> None:
        self.controller = controller
        self._counts: dict[str, int] = {}
        self._cv = threading.Condition()
        inner = controller.reconciler.reconcile

        def reconcile(key: str) -> Any:
            try:
                return inner(key)
            finally:
                with self._cv:
                    self._counts[key] = self._counts.get(key, 0) + 1
                    self._cv.notify_all()

        controller.reconciler.reconcile = reconcile

    def count(self, key: str) -> int:
        with self._cv:
            return self._counts.get(key, 0)

    def settle(self, key: str, timeout: float = 30.0) -> None:
        """Return once a reconcile of ``key`` that started after this call has finished."""
        for _ in range(2):  # the first may coalesce into a reconcile already running
            with self._cv:
                seen = self._counts.get(key, 0)
            self.controller.queue.add(key)
            with self._cv:
                done = self._cv.wait_for(lambda seen=seen: self._counts.get(key, 0) > seen, timeout)
                if not done:
                    raise TimeoutError(f"no reconcile of {key} within {timeout:.0f}s")
