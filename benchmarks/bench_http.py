"""Benchmark: the controller's client-side CPU per API request, today's HTTP transport against others.

Run: ``make bench`` (after the controller benchmark) or ``.venv/bin/python benchmarks/bench_http.py``
(``--quick`` for a smoke run of under a minute; ``--help``). Nothing is asserted: the table goes to
stdout, to the ``## HTTP client CPU per request`` section of ``docs/benchmarks.md`` (replaced in
place, the rest of the file kept) and to ``benchmarks/last-http-run.json`` (``--from-json`` renders
the section again).

What it measures, against a local kube-apiserver of its own (``ControlPlane`` without the
controller manager: nothing else writes) over TLS with a bearer token, as the controller talks
to its API server:

* the request mix a Task costs the controller: GET of a Job, LIST of a page of 5 Tasks, a merge
  PATCH of a Task's ``/status`` carrying a resourceVersion precondition, POST of a Job, DELETE of
  that Job with a UID precondition, and a watch's per-event cost (reading the stream, splitting
  lines, decoding the event). Bodies are encoded with ``orjson`` and answers decoded with
  ``taskfsm.kube.wire.loads`` for every client alike, so the rows differ only by the transport;
* for each transport, the CPU seconds of this process (``time.process_time``: every thread, user +
  system; the machine is shared, and CPU time depends far less on the load than wall time) over
  a batch of sequential requests on a warm connection, divided by the batch. Rounds alternate the
  transports' order; the table gives the median over the rounds and the spread (min-max);
* the watch events come from a writer in a separate process (its CPU is not counted) patching one
  Task's status at a steady rate; the CPU is counted from the first event to the last;
* ``GET x8`` is the same GET from 8 threads at once on one client (the controller's workers share
  one client): CPU per request when requests overlap (connection pool or HTTP/2 multiplexing).

The transports:

``rest``
    today's path as the controller runs it: :class:`taskfsm.kube.rest.Rest` as shipped (the
    kubernetes client's urllib3 pool; libcurl, :mod:`taskfsm.kube.curl`, is opt-in; auth hook,
    observer, retry loop); watches
    through the kubernetes client's urllib3 pool and ``kubernetes.watch``'s line splitter as
    :mod:`taskfsm.kube.informer` reads them.
``urllib3``
    the kubernetes client's pool manager called bare (no ``Rest`` layer): the transport of
    ``Rest``'s requests before libcurl, and of watches.
``http.client``
    the standard library's ``HTTPSConnection``, one persistent connection per thread.
``pycurl``, ``pycurl-h2``
    libcurl (the wheel's own build) with one reused easy handle per thread, HTTP/1.1 or HTTP/2.
``aiohttp``
    aiohttp's client (C parser) with the requests awaited one after another on its event loop:
    the transport's own cost, for a controller that would be asyncio throughout.
``aiohttp-thread``
    the same client driven from the calling thread through ``run_coroutine_threadsafe`` (and a
    queue for watch events): what this threaded controller would pay.
``httpx``, ``httpx-h2``
    httpx's sync client, HTTP/1.1 or HTTP/2 (h2: every request multiplexed on one connection).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import io
import json
import os
import queue
import random
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kubernetes.watch.watch import iter_resp_lines  # noqa: E402 (after the sys.path entry above)
from report import publish  # noqa: E402 (this script's folder is on sys.path)

from taskfsm.kube import wire  # noqa: E402 (after the sys.path entry above)
from taskfsm.kube.client import from_kubeconfig  # noqa: E402 (after the sys.path entry above)
from taskfsm.kube.resources import TASKS  # noqa: E402 (after the sys.path entry above)
from taskfsm.kube.rest import JOBS, NAMESPACES, Rest  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev import objects  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev.controlplane import ControlPlane  # noqa: E402 (after the sys.path entry above)
from taskfsm_dev.crds import install_crds  # noqa: E402 (after the sys.path entry above)

SECTION = "## HTTP client CPU per request"
VERBS = ("GET", "LIST", "PATCH status", "POST Job", "DELETE Job", "WATCH event", "GET x8")
TRANSPORTS = (
    "rest",
    "urllib3",
    "http.client",
    "pycurl",
    "pycurl-h2",
    "aiohttp",
    "aiohttp-thread",
    "httpx",
    "httpx-h2",
)
LIST_PAGE = 5
THREADS = 8
USER_AGENT = "taskfsm-bench-http"

Request = tuple[str, str, bytes | None, str | None]
"""(method, path with query, body, content type)."""


def log(text: str) -> None:
    print(f"[bench-http {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Target:
    server: str
    ca_file: str
    token: str
    namespace: str

    @property
    def host(self) -> str:
        return urlsplit(self.server).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.server).port or 443

    def headers(self, content_type: str | None) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Authorization": f"Bearer {self.token}",
            "User-Agent": USER_AGENT,
        }
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)


# -- the objects ---------------------------------------------------------------------------------


def job_body(name: str) -> dict[str, Any]:
    """A Job shaped like the ones the controller creates (labels, helper Secret volume, env)."""
    labels = {
        "engine.nagare.media/task-name": name,
        "engine.nagare.media/task-namespace": "bench",
        "engine.nagare.media/workflow-name": "bench",
        "app.kubernetes.io/managed-by": "taskfsm",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"engine.nagare.media/task-uid": "0" * 36},
            "finalizers": ["engine.nagare.media/job-protection"],
        },
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "function",
                            "image": "example.invalid/function:latest",
                            "env": [
                                {"name": "NAGARE_TASK", "value": name},
                                {"name": "NAGARE_CONFIG", "value": "/run/secrets/engine/data"},
                            ],
                            "volumeMounts": [
                                {
                                    "name": "helper-data",
                                    "mountPath": "/run/secrets/engine",
                                    "readOnly": True,
                                }
                            ],
                        }
                    ],
                    "volumes": [{"name": "helper-data", "secret": {"secretName": f"{name}-data"}}],
                },
            },
        },
    }


def task_status(i: int) -> dict[str, Any]:
    """A Running Task's status (what a controller's status write carries); ``i`` varies it."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "phase": "Running",
        "message": f"write {i}",
        "queuedTime": now,
        "startTime": now,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "JobRunning",
                "message": "the Job is running",
            }
        ],
        "jobRef": {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "0" * 36},
    }


def prepare(cp: ControlPlane) -> Target:
    """A namespace with a Job to GET and Tasks to LIST, PATCH and watch."""
    namespace = f"bench-http-{os.getpid()}"
    with cp.api_client() as api:
        rest = Rest(api)
        rest.create(NAMESPACES, None, {"metadata": {"name": namespace}})
        rest.create(JOBS, namespace, job_body("get-me"))
        for i in range(LIST_PAGE * 2):
            rest.create(TASKS, namespace, objects.task(f"listed-{i}", workflow_name="bench"))
        for name in (*TRANSPORTS, "watched"):
            rest.create(TASKS, namespace, objects.task(f"t-{name}", workflow_name="bench"))
            patch = {"status": task_status(0)}
            rest.patch(TASKS, namespace, f"t-{name}", patch, subresource="status")
    return Target(cp.server, str(cp.ca_file), cp.token, namespace)


# -- transports ----------------------------------------------------------------------------------


def split_lines(on_line: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """A chunk consumer calling ``on_line`` for every complete non-empty line."""
    buffer = bytearray()

    def feed(chunk: bytes) -> None:
        buffer.extend(chunk)
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            if end > start:
                on_line(bytes(buffer[start:end]))
            start = end + 1
        del buffer[:start]

    return feed


class Enough(Exception):
    """Raised from a watch consumer once it has seen the events it wanted."""


class Transport:
    """One client under test; ``request`` is one HTTP exchange, ``watch`` reads events until
    ``on_event`` raises :class:`Enough`."""

    name = ""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.dropped = 0
        """Requests sent again because the connection had closed (an idle keep-alive connection
        the server closed, or an HTTP/2 connection it ended)."""

    def request(self, req: Request) -> tuple[int, bytes]:
        raise NotImplementedError

    def batch(
        self, n: int, make: Callable[[int], Request], after: Callable[[int, Any], None]
    ) -> None:
        """``n`` requests one after another: ``make(i)`` builds the i-th (after the answer to
        the one before went to ``after``)."""
        for i in range(n):
            req = make(i)
            status, data = self.request(req)
            if not 200 <= status < 300:
                raise RuntimeError(f"{self.name}: {req[0]} {req[1]}: {status} {data[:200]!r}")
            after(i, wire.loads(data) if data else {})

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        raise NotImplementedError

    def concurrent(self, reqs: list[Request]) -> None:
        """``reqs`` from :data:`THREADS` threads sharing this client."""
        chunks = [reqs[i::THREADS] for i in range(THREADS)]
        errors: list[BaseException] = []

        def run(chunk: list[Request]) -> None:
            try:
                self.batch(len(chunk), chunk.__getitem__, ignore)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(c,)) for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def close(self) -> None:
        pass


class RestTransport(Transport):
    """Today's path: the controller's Rest class, as shipped (see the module docstring)."""

    name = "rest"

    def __init__(self, target: Target, kubeconfig: Path) -> None:
        super().__init__(target)
        self.api = from_kubeconfig(kubeconfig)
        self.rest = Rest(self.api, observer=lambda method, label, code: None)

    def request(self, req: Request) -> tuple[int, bytes]:  # pragma: no cover (batch is used)
        raise NotImplementedError

    def batch(
        self, n: int, make: Callable[[int], Request], after: Callable[[int, Any], None]
    ) -> None:
        for i in range(n):
            method, path, body, content_type = make(i)
            base, _, query = path.partition("?")
            params = dict(parse_qsl(query))
            parsed = orjson.loads(body) if body else None
            res = JOBS if "/jobs" in base else TASKS
            answer = self.rest.request(
                method, res, base, query=params, body=parsed, content_type=content_type
            )
            after(i, answer)

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        base, _, query = path.partition("?")
        params = dict(parse_qsl(query))
        response = self.rest.request(
            "GET", TASKS, base, query=params, stream=True, timeout=(10.0, 60.0), verb="WATCH"
        )
        try:
            for line in iter_resp_lines(response):
                if line:
                    on_event(wire.loads(line))
        except Enough:
            pass
        finally:
            response.close()
            response.release_conn()

    def close(self) -> None:
        self.api.close()


class Urllib3Transport(Transport):
    """The kubernetes client's urllib3 pool manager, called bare."""

    name = "urllib3"

    def __init__(self, target: Target, kubeconfig: Path) -> None:
        super().__init__(target)
        self.api = from_kubeconfig(kubeconfig)
        self.pool = self.api.rest_client.pool_manager
        import urllib3

        self.timeout = urllib3.Timeout(connect=10.0, read=10.0)

    def request(self, req: Request) -> tuple[int, bytes]:
        method, path, body, content_type = req
        response = self.pool.request(
            method,
            self.target.server + path,
            body=body,
            headers=self.target.headers(content_type),
            timeout=self.timeout,
            preload_content=False,
        )
        data = response.data
        return response.status, data

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        response = self.pool.request(
            "GET",
            self.target.server + path,
            headers=self.target.headers(None),
            preload_content=False,
        )
        feed = split_lines(lambda line: on_event(wire.loads(line)))
        try:
            for chunk in response.stream(amt=None, decode_content=False):
                feed(chunk)
        except Enough:
            pass
        finally:
            response.close()
            response.release_conn()

    def close(self) -> None:
        self.api.close()


class HttpClientTransport(Transport):
    """``http.client.HTTPSConnection``: one persistent connection per thread."""

    name = "http.client"

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self.context = target.ssl_context()
        self.local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                self.target.host, self.target.port, timeout=10.0, context=self.context
            )
            self.local.conn = conn
        return conn

    def request(self, req: Request) -> tuple[int, bytes]:
        method, path, body, content_type = req
        for attempt in (1, 2):
            conn = self._conn()
            try:
                conn.request(method, path, body=body, headers=self.target.headers(content_type))
                response = conn.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                # the server closed the idle keep-alive connection: once on a fresh one
                conn.close()
                self.local.conn = None
                self.dropped += 1
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        conn = http.client.HTTPSConnection(
            self.target.host, self.target.port, timeout=60.0, context=self.context
        )
        try:
            conn.request("GET", path, headers=self.target.headers(None))
            response = conn.getresponse()
            feed = split_lines(lambda line: on_event(wire.loads(line)))
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                feed(chunk)
        except Enough:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()


class PycurlTransport(Transport):
    """libcurl through pycurl: one reused easy handle per thread."""

    name = "pycurl"
    http2 = False

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        import pycurl

        self.pycurl = pycurl
        self.local = threading.local()

    def _handle(self, timeout_ms: int = 10_000) -> Any:
        pycurl = self.pycurl
        curl = pycurl.Curl()
        curl.setopt(pycurl.CAINFO_BLOB, Path(self.target.ca_file).read_bytes())
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, 10_000)
        curl.setopt(pycurl.TIMEOUT_MS, timeout_ms)
        curl.setopt(pycurl.NOSIGNAL, 1)
        curl.setopt(pycurl.TCP_KEEPALIVE, 1)
        curl.setopt(
            pycurl.HTTP_VERSION,
            pycurl.CURL_HTTP_VERSION_2TLS if self.http2 else pycurl.CURL_HTTP_VERSION_1_1,
        )
        return curl

    def request(self, req: Request) -> tuple[int, bytes]:
        pycurl = self.pycurl
        curl = getattr(self.local, "curl", None)
        if curl is None:
            curl = self.local.curl = self._handle()
        method, path, body, content_type = req
        out = io.BytesIO()
        curl.setopt(pycurl.URL, self.target.server + path)
        curl.setopt(pycurl.CUSTOMREQUEST, method)
        curl.setopt(
            pycurl.HTTPHEADER,
            [f"{k}: {v}" for k, v in self.target.headers(content_type).items()],
        )
        if body is not None:
            curl.setopt(pycurl.POSTFIELDS, body)
        else:
            curl.setopt(pycurl.HTTPGET, 1)
            curl.setopt(pycurl.CUSTOMREQUEST, method)
        curl.setopt(pycurl.WRITEDATA, out)
        curl.perform()
        return curl.getinfo(pycurl.RESPONSE_CODE), out.getvalue()

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        pycurl = self.pycurl
        curl = self._handle(timeout_ms=60_000)
        feed = split_lines(lambda line: on_event(wire.loads(line)))
        stopped = []

        def write(chunk: bytes) -> int | None:
            try:
                feed(chunk)
            except Enough:
                stopped.append(True)
                return 0  # aborts the transfer
            return None

        curl.setopt(pycurl.URL, self.target.server + path)
        curl.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in self.target.headers(None).items()])
        curl.setopt(pycurl.WRITEFUNCTION, write)
        try:
            curl.perform()
        except pycurl.error:
            if not stopped:
                raise
        finally:
            curl.close()

    def close(self) -> None:
        curl = getattr(self.local, "curl", None)
        if curl is not None:
            curl.close()


class PycurlH2Transport(PycurlTransport):
    name = "pycurl-h2"
    http2 = True


class AiohttpTransport(Transport):
    """aiohttp's client; ``batch`` awaits the requests one after another on its loop."""

    name = "aiohttp"

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        import aiohttp

        self.aiohttp = aiohttp
        self.loop = asyncio.new_event_loop()
        self.session = self.loop.run_until_complete(self._session())

    async def _session(self) -> Any:
        aiohttp = self.aiohttp
        connector = aiohttp.TCPConnector(ssl=self.target.ssl_context(), limit=64)
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(sock_connect=10.0, sock_read=10.0),
            auto_decompress=False,
        )

    async def _request(self, req: Request) -> tuple[int, bytes]:
        method, path, body, content_type = req
        for attempt in (1, 2):
            try:
                async with self.session.request(
                    method,
                    self.target.server + path,
                    data=body,
                    headers=self.target.headers(content_type),
                ) as response:
                    return response.status, await response.read()
            except (self.aiohttp.ServerDisconnectedError, self.aiohttp.ClientOSError):
                self.dropped += 1
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _batch(
        self, n: int, make: Callable[[int], Request], after: Callable[[int, Any], None]
    ) -> None:
        for i in range(n):
            req = make(i)
            status, data = await self._request(req)
            if not 200 <= status < 300:
                raise RuntimeError(f"{self.name}: {req[0]} {req[1]}: {status} {data[:200]!r}")
            after(i, wire.loads(data) if data else {})

    def batch(
        self, n: int, make: Callable[[int], Request], after: Callable[[int, Any], None]
    ) -> None:
        self.loop.run_until_complete(self._batch(n, make, after))

    def concurrent(self, reqs: list[Request]) -> None:
        async def all_of() -> None:
            chunks = [reqs[i::THREADS] for i in range(THREADS)]
            await asyncio.gather(*(self._batch(len(c), c.__getitem__, ignore) for c in chunks))

        self.loop.run_until_complete(all_of())

    async def _watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        timeout = self.aiohttp.ClientTimeout(sock_connect=10.0, sock_read=60.0)
        async with self.session.get(
            self.target.server + path, headers=self.target.headers(None), timeout=timeout
        ) as response:
            try:
                async for line in response.content:
                    if line.strip():
                        on_event(wire.loads(line))
            except Enough:
                pass

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        self.loop.run_until_complete(self._watch(path, on_event))

    def close(self) -> None:
        self.loop.run_until_complete(self.session.close())
        self.loop.close()


class AiohttpThreadTransport(AiohttpTransport):
    """aiohttp on a loop thread, called from the caller's threads (what a threaded controller
    pays: a cross-thread hand-off per request, a queue per watch event)."""

    name = "aiohttp-thread"

    def __init__(self, target: Target) -> None:
        Transport.__init__(self, target)
        import aiohttp

        self.aiohttp = aiohttp
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.session = self._call(self._session())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def request(self, req: Request) -> tuple[int, bytes]:
        result: tuple[int, bytes] = self._call(self._request(req))
        return result

    def batch(
        self, n: int, make: Callable[[int], Request], after: Callable[[int, Any], None]
    ) -> None:
        Transport.batch(self, n, make, after)

    def concurrent(self, reqs: list[Request]) -> None:
        Transport.concurrent(self, reqs)

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        events: queue.Queue[Any] = queue.Queue()
        done = object()

        async def read() -> None:
            timeout = self.aiohttp.ClientTimeout(sock_connect=10.0, sock_read=60.0)
            try:
                async with self.session.get(
                    self.target.server + path, headers=self.target.headers(None), timeout=timeout
                ) as response:
                    async for line in response.content:
                        if line.strip():
                            events.put(wire.loads(line))
            finally:
                events.put(done)

        future = asyncio.run_coroutine_threadsafe(read(), self.loop)
        try:
            while (event := events.get()) is not done:
                on_event(event)
        except Enough:
            pass
        finally:
            future.cancel()
            with contextlib.suppress(BaseException):
                future.result(5)

    def close(self) -> None:
        self._call(self.session.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class HttpxTransport(Transport):
    """httpx's sync client (one client shared by every thread)."""

    name = "httpx"
    http2 = False

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        import httpx

        self.httpx = httpx
        self.client = httpx.Client(
            verify=target.ssl_context(),
            http2=self.http2,
            timeout=httpx.Timeout(10.0),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        )

    def request(self, req: Request) -> tuple[int, bytes]:
        method, path, body, content_type = req
        for attempt in (1, 2):
            try:
                response = self.client.request(
                    method,
                    self.target.server + path,
                    content=body,
                    headers=self.target.headers(content_type),
                )
                return response.status_code, response.content
            except (self.httpx.RemoteProtocolError, self.httpx.ReadError):
                self.dropped += 1
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def watch(self, path: str, on_event: Callable[[Any], None]) -> None:
        timeout = self.httpx.Timeout(10.0, read=60.0)
        with self.client.stream(
            "GET", self.target.server + path, headers=self.target.headers(None), timeout=timeout
        ) as response:
            feed = split_lines(lambda line: on_event(wire.loads(line)))
            try:
                for chunk in response.iter_raw():
                    feed(chunk)
            except Enough:
                pass

    def close(self) -> None:
        self.client.close()


class HttpxH2Transport(HttpxTransport):
    name = "httpx-h2"
    http2 = True


def make(name: str, target: Target, kubeconfig: Path) -> Transport:
    if name == "rest":
        return RestTransport(target, kubeconfig)
    if name == "urllib3":
        return Urllib3Transport(target, kubeconfig)
    classes: dict[str, type[Transport]] = {
        "http.client": HttpClientTransport,
        "pycurl": PycurlTransport,
        "pycurl-h2": PycurlH2Transport,
        "aiohttp": AiohttpTransport,
        "aiohttp-thread": AiohttpThreadTransport,
        "httpx": HttpxTransport,
        "httpx-h2": HttpxH2Transport,
    }
    return classes[name](target)  # type: ignore[call-arg]


# -- the measurements ----------------------------------------------------------------------------


def cpu_of(run: Callable[[], None], n: int) -> tuple[float, float]:
    """(CPU µs, wall µs) per request of ``run`` doing ``n`` requests."""
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    return (time.process_time() - cpu) / n * 1e6, (time.perf_counter() - wall) / n * 1e6


def ignore(i: int, obj: Any) -> None:
    pass


def measure_verbs(
    t: Transport,
    target: Target,
    n: int,
    tag: str,
    cpu_of: Callable[[Callable[[], None], int], tuple[float, float]] = cpu_of,
) -> dict[str, tuple[float, float]]:
    """CPU and wall µs per request for each verb but the watch, ``n`` requests each (``cpu_of``
    runs and times each verb's batch)."""
    ns = target.namespace
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    tasks = f"/apis/engine.nagare.media/v1alpha1/namespaces/{ns}/tasks"
    own = f"{tasks}/t-{t.name}"
    out: dict[str, tuple[float, float]] = {}
    get: Request = ("GET", f"{jobs}/get-me", None, None)
    t.batch(3, lambda i: get, ignore)  # the connection (and TLS session) warm first
    out["GET"] = cpu_of(lambda: t.batch(n, lambda i: get, ignore), n)

    page: Request = ("GET", f"{tasks}?limit={LIST_PAGE}", None, None)
    out["LIST"] = cpu_of(lambda: t.batch(n, lambda i: page, ignore), n)

    # Each status patch carries the version the previous one returned (a precondition, as the
    # controller's status writes do).
    version: list[str] = []

    def read(i: int, obj: Any) -> None:
        version.append(obj["metadata"]["resourceVersion"])

    t.batch(1, lambda i: ("GET", own, None, None), read)

    def patch(i: int) -> Request:
        body = {"metadata": {"resourceVersion": version[0]}, "status": task_status(i)}
        return ("PATCH", f"{own}/status", orjson.dumps(body), "application/merge-patch+json")

    def patched(i: int, obj: Any) -> None:
        version[0] = obj["metadata"]["resourceVersion"]

    out["PATCH status"] = cpu_of(lambda: t.batch(n, patch, patched), n)

    created: list[tuple[str, str]] = []

    def post(i: int) -> Request:
        return ("POST", jobs, orjson.dumps(job_body(f"{tag}-{i}")), "application/json")

    def posted(i: int, obj: Any) -> None:
        created.append((obj["metadata"]["name"], obj["metadata"]["uid"]))

    out["POST Job"] = cpu_of(lambda: t.batch(n, post, posted), n)

    def delete(i: int) -> Request:
        name, uid = created[i]
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
            "propagationPolicy": "Background",
        }
        return ("DELETE", f"{jobs}/{name}", orjson.dumps(body), "application/json")

    out["DELETE Job"] = cpu_of(lambda: t.batch(len(created), delete, ignore), len(created))
    return out


def measure_concurrent(t: Transport, target: Target, n: int) -> tuple[float, float]:
    """CPU per GET when :data:`THREADS` threads share the client."""
    reqs: list[Request] = [
        ("GET", f"/apis/batch/v1/namespaces/{target.namespace}/jobs/get-me", None, None)
    ] * n
    t.concurrent(reqs[: THREADS * 2])  # every thread's connection open
    return cpu_of(lambda: t.concurrent(reqs), n)


def measure_watch(t: Transport, target: Target, events: int, rate: float) -> tuple[float, float]:
    """CPU and wall µs per watch event: ``events`` status patches of one Task by a writer
    process, counted from the first event seen to the last."""
    ns = target.namespace
    tasks = f"/apis/engine.nagare.media/v1alpha1/namespaces/{ns}/tasks"
    probe = HttpClientTransport(target)
    current = wire.loads(probe.request(("GET", f"{tasks}/t-watched", None, None))[1])
    probe.close()
    query = urlencode(
        {
            "watch": "true",
            "fieldSelector": "metadata.name=t-watched",
            "resourceVersion": current["metadata"]["resourceVersion"],
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "120",
        }
    )
    writer = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--writer",
            json.dumps(
                {
                    "server": target.server,
                    "ca": target.ca_file,
                    "token": target.token,
                    "path": f"{tasks}/t-watched/status",
                    "events": events,
                    "rate": rate,
                }
            ),
        ]
    )
    seen = [0]
    marks: list[tuple[float, float]] = []

    def on_event(event: Any) -> None:
        if event.get("type") != "MODIFIED":
            return
        seen[0] += 1
        if seen[0] == 1 or seen[0] == events:
            marks.append((time.process_time(), time.perf_counter()))
        if seen[0] >= events:
            raise Enough

    try:
        t.watch(f"{tasks}?{query}", on_event)
    finally:
        writer.wait(120)
    if len(marks) != 2:
        raise RuntimeError(f"{t.name}: the watch saw {seen[0]} of {events} events")
    (cpu0, wall0), (cpu1, wall1) = marks
    return (cpu1 - cpu0) / (events - 1) * 1e6, (wall1 - wall0) / (events - 1) * 1e6


def writer(spec: dict[str, Any]) -> None:
    """The watch's event source (a process of its own): status patches at a steady rate."""
    parts = urlsplit(spec["server"])
    context = ssl.create_default_context(cafile=spec["ca"])
    conn = http.client.HTTPSConnection(parts.hostname, parts.port, context=context, timeout=10)
    headers = {
        "Authorization": f"Bearer {spec['token']}",
        "Content-Type": "application/merge-patch+json",
        "Accept": "application/json",
    }
    time.sleep(0.3)  # let the watch open first (it resumes from a version anyway)
    start = time.monotonic()
    for i in range(spec["events"]):
        delay = start + i / spec["rate"] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = orjson.dumps({"status": task_status(random.randrange(1 << 30))})
        conn.request("PATCH", spec["path"], body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"writer: {response.status}")
    conn.close()


CALLGRIND_VERBS = VERBS[:5]


def in_marker(run: Callable[[], None], n: int) -> tuple[float, float]:
    """Run ``run`` as a ctypes callback (the comparator of glibc's ``lfind``, called once for one
    element). ctypes enters every callback through its C function ``closure_fcn``, which nothing
    else in the process calls; callgrind collects only inside it
    (``--toggle-collect=closure_fcn``) and dumps after it (``--dump-after=closure_fcn``), so every
    batch becomes a profile of its own."""
    import ctypes

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def compare(a: Any, b: Any) -> int:
        run()
        return 0

    key, one = ctypes.c_int(1), (ctypes.c_int * 1)(1)
    count = ctypes.c_size_t(1)
    libc = ctypes.CDLL(None)
    libc.lfind.restype = ctypes.c_void_p
    libc.lfind(ctypes.byref(key), one, ctypes.byref(count), ctypes.sizeof(ctypes.c_int), compare)
    return (0.0, 0.0)


def callgrind_child(spec: dict[str, Any]) -> None:
    """Under valgrind: one transport, every verb's batch in :func:`in_marker`."""
    target = Target(**spec["target"])
    t = make(spec["transport"], target, Path(spec["kubeconfig"]))
    t.batch(5, lambda i: ("GET", f"/api/v1/namespaces/{target.namespace}", None, None), ignore)
    measure_verbs(t, target, spec["requests"], spec["tag"], in_marker)
    t.close()


def run_callgrind(args: argparse.Namespace) -> dict[str, Any]:
    """Instructions per request (valgrind's callgrind: independent of the machine's load) of
    each transport, each in a process of its own under valgrind."""
    import shutil
    import tempfile

    if shutil.which("valgrind") is None:
        raise SystemExit("bench_http: --callgrind needs valgrind (Debian's valgrind package)")
    out: dict[str, dict[str, float]] = {}
    with ControlPlane(name="taskfsm-bench-http-cg", controller_manager=False) as cp:
        with cp.api_client() as api:
            from taskfsm.api.crdgen import crd_documents

            install_crds(api, crd_documents())
        target = prepare(cp)
        for name in args.callgrind_transports:
            work = Path(tempfile.mkdtemp(prefix="bench-http-cg-"))
            spec = {
                "target": {
                    "server": target.server,
                    "ca_file": target.ca_file,
                    "token": target.token,
                    "namespace": target.namespace,
                },
                "transport": name,
                "kubeconfig": str(cp.kubeconfig),
                "requests": args.callgrind_requests,
                "tag": f"cg-{TRANSPORTS.index(name)}",
            }
            log(f"callgrind: {name}")
            proc = subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    "--collect-atstart=no",
                    "--toggle-collect=closure_fcn",
                    "--dump-after=closure_fcn",
                    f"--callgrind-out-file={work}/cg.out",
                    sys.executable,
                    __file__,
                    "--callgrind-child",
                    json.dumps(spec),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"{name} under callgrind failed: {proc.stderr[-3000:]}")
            dumps = sorted(
                (p for p in work.iterdir() if p.name.startswith("cg.out.")),
                key=lambda p: int(p.name.rsplit(".", 1)[1]),
            )
            totals = []
            for dump in dumps:
                for line in dump.read_text().splitlines():
                    if line.startswith(("summary:", "totals:")):
                        totals.append(int(line.split()[1]))
                        break
            if len(totals) != len(CALLGRIND_VERBS):
                raise RuntimeError(f"{name}: {len(totals)} callgrind dumps, not 5: {dumps}")
            out[name] = {
                verb: total / args.callgrind_requests
                for verb, total in zip(CALLGRIND_VERBS, totals, strict=True)
            }
            shutil.rmtree(work, ignore_errors=True)
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, dict[str, list[list[float]]]] = {
        name: {verb: [] for verb in VERBS} for name in args.transports
    }
    failures: dict[str, list[str]] = {name: [] for name in args.transports}
    with ControlPlane(name="taskfsm-bench-http", controller_manager=False) as cp:
        with cp.api_client() as api:
            from taskfsm.api.crdgen import crd_documents

            install_crds(api, crd_documents())
        target = prepare(cp)
        transports = {name: make(name, target, cp.kubeconfig) for name in args.transports}
        dropped = dict.fromkeys(args.transports, 0)

        def attempt(name: str, what: str, measure: Callable[[Transport], Any]) -> Any:
            """``measure`` on the transport; a failure is recorded (and the transport made
            anew) instead of ending the run: how often a client fails is a finding too."""
            try:
                return measure(transports[name])
            except Exception as exc:
                failures[name].append(f"{what}: {type(exc).__name__}: {str(exc)[:120]}")
                log(f"{name}: {failures[name][-1]}")
                old = transports[name]
                dropped[name] += old.dropped
                with contextlib.suppress(Exception):
                    old.close()
                transports[name] = make(name, target, cp.kubeconfig)
                return None

        try:
            for r in range(args.rounds):
                order = list(args.transports)
                random.shuffle(order)
                log(f"round {r + 1} of {args.rounds}: {', '.join(order)}")
                for name in order:
                    tag = f"r{r}-{TRANSPORTS.index(name)}"
                    verbs = attempt(
                        name,
                        "verbs",
                        lambda t, tag=tag: measure_verbs(t, target, args.requests, tag),
                    )
                    for verb, value in (verbs or {}).items():
                        results[name][verb].append(list(value))
                    many = attempt(
                        name, "GET x8", lambda t: measure_concurrent(t, target, args.requests)
                    )
                    if many is not None:
                        results[name]["GET x8"].append(list(many))
                    watch = attempt(
                        name, "WATCH", lambda t: measure_watch(t, target, args.events, args.rate)
                    )
                    if watch is not None:
                        results[name]["WATCH event"].append(list(watch))
        finally:
            for name, t in transports.items():
                dropped[name] += t.dropped
                with contextlib.suppress(Exception):
                    t.close()
    import aiohttp
    import httpx
    import pycurl
    import urllib3

    return {
        "results": results,
        "dropped": dropped,
        "failures": failures,
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": os.popen(f"git -C {REPO} rev-parse --short HEAD").read().strip() or "?",
            "rounds": args.rounds,
            "requests": args.requests,
            "events": args.events,
            "rate": args.rate,
            "versions": {
                "python": sys.version.split()[0],
                "openssl": ssl.OPENSSL_VERSION,
                "urllib3": urllib3.__version__,
                "pycurl": pycurl.version,
                "aiohttp": aiohttp.__version__,
                "httpx": httpx.__version__,
            },
            "load": os.getloadavg(),
        },
    }


def render(data: dict[str, Any]) -> str:
    results, meta = data["results"], data["meta"]
    base = results.get("rest")

    def cell(values: list[list[float]], ref: list[list[float]] | None) -> str:
        if not values:
            return "-"
        cpu = [v[0] for v in values]
        middle = statistics.median(cpu)
        text = f"{middle:,.0f}"
        if len(cpu) > 1:
            text += f" ({min(cpu):,.0f}-{max(cpu):,.0f})"
        if ref:
            text += f" x{middle / statistics.median(v[0] for v in ref):.2f}"
        return text

    lines = [
        SECTION,
        "",
        "`benchmarks/bench_http.py`: the controller's client-side CPU (this process's user + system "
        "time, every thread) per request against a local kube-apiserver over TLS, for the request "
        "mix a Task costs; median over "
        f"{meta['rounds']} rounds of {meta['requests']} requests per verb ({meta['events']} watch "
        f"events at {meta['rate']:.0f}/s), (min-max), and x: the ratio to today's path (`rest`). "
        "Bodies encoded with orjson and answers decoded with `taskfsm.kube.wire.loads` alike. "
        f"Measured, not asserted; {meta['date']}, commit {meta['commit']}; "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + ".",
        "",
        "| transport | " + " | ".join(f"{verb} (µs)" for verb in VERBS) + " |",
        "|---|" + "---:|" * len(VERBS),
    ]
    for name, verbs in results.items():
        row = [cell(verbs[verb], base[verb] if base and name != "rest" else None) for verb in VERBS]
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    counted = data.get("callgrind") or {}
    if counted:
        ref = counted.get("rest")
        lines += [
            "",
            "The same requests counted in instructions executed by this process (valgrind's "
            "callgrind, every instruction of Python, the client and OpenSSL; independent of the "
            f"machine's load), thousands per request, {meta.get('callgrind_requests', '?')} "
            "requests per verb, one process per transport; x: the ratio to `rest`:",
            "",
            "| transport | " + " | ".join(f"{verb} (k instr.)" for verb in CALLGRIND_VERBS) + " |",
            "|---|" + "---:|" * len(CALLGRIND_VERBS),
        ]
        for name, verbs in counted.items():
            cells = []
            for verb in CALLGRIND_VERBS:
                text = f"{verbs[verb] / 1000:,.0f}"
                if ref and name != "rest":
                    text += f" x{verbs[verb] / ref[verb]:.2f}"
                cells.append(text)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    dropped = {k: v for k, v in data.get("dropped", {}).items() if v}
    if dropped:
        lines += [
            "",
            "Requests sent again because the connection had been closed meanwhile (an idle "
            "keep-alive connection the API server closed between rounds, or an HTTP/2 connection "
            "it ended), all rounds: " + ", ".join(f"{k} {v}" for k, v in dropped.items()) + ".",
        ]
    failed = {k: v for k, v in data.get("failures", {}).items() if v}
    if failed:
        lines += [
            "",
            "Measurements that failed (the client raised; the round's figure is missing):",
            "",
        ]
        lines += [f"- {k}: " + "; ".join(sorted(set(v))) for k, v in failed.items()]
    lines += [
        "",
        "Wall time per request, median (µs; loaded machine, for orientation only):",
        "",
        "| transport | " + " | ".join(VERBS) + " |",
        "|---|" + "---:|" * len(VERBS),
    ]
    for name, verbs in results.items():
        row = [
            f"{statistics.median(v[1] for v in verbs[verb]):,.0f}" if verbs[verb] else "-"
            for verb in VERBS
        ]
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 round, few requests")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--requests", type=int, default=300, help="requests per verb and round")
    parser.add_argument("--events", type=int, default=300, help="watch events per round")
    parser.add_argument("--rate", type=float, default=200.0, help="watch events per second")
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="comma-separated subset")
    parser.add_argument(
        "--output",
        default=str(REPO / "docs" / "benchmarks.md"),
        help=f"report whose '{SECTION}' section is replaced ('' = none)",
    )
    parser.add_argument(
        "--json", default=str(REPO / "benchmarks" / "last-http-run.json"), help="raw results"
    )
    parser.add_argument("--from-json", help="render from a --json file instead of running")
    parser.add_argument(
        "--callgrind-transports",
        default="rest,urllib3,http.client,pycurl,aiohttp",
        help="transports also counted in instructions under valgrind's callgrind ('' = none)",
    )
    parser.add_argument(
        "--callgrind-requests", type=int, default=40, help="requests per verb under callgrind"
    )
    parser.add_argument(
        "--callgrind-only",
        action="store_true",
        help="only the callgrind counts, added to the results already in --json",
    )
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    parser.add_argument("--callgrind-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        writer(json.loads(args.writer))
        return 0
    if args.callgrind_child:
        callgrind_child(json.loads(args.callgrind_child))
        return 0
    args.transports = [t for t in args.transports.split(",") if t]
    unknown = set(args.transports) - set(TRANSPORTS)
    if unknown:
        parser.error(f"unknown transports: {sorted(unknown)}")
    if args.quick:
        args.rounds, args.requests, args.events = 1, 20, 20
        args.callgrind_transports, args.callgrind_requests = "rest", 5
    args.callgrind_transports = [t for t in args.callgrind_transports.split(",") if t]
    if set(args.callgrind_transports) - set(TRANSPORTS):
        parser.error(
            f"unknown transports: {sorted(set(args.callgrind_transports) - set(TRANSPORTS))}"
        )
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    elif args.callgrind_only:
        data = json.loads(Path(args.json).read_text())
        data["callgrind"] = run_callgrind(args)
        data["meta"]["callgrind_requests"] = args.callgrind_requests
        Path(args.json).write_text(json.dumps(data, indent=1))
    else:
        data = run(args)
        if args.callgrind_transports:
            data["callgrind"] = run_callgrind(args)
            data["meta"]["callgrind_requests"] = args.callgrind_requests
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1))
    section = render(data)
    publish(section, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
