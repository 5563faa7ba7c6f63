"""HTTP endpoints for operators: ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz``.

``/healthz`` answers 200 while the process runs; ``/readyz`` answers 200 only when the readiness
check passes (caches synced, every MediaProcessingEntity Job watch connected) and otherwise 503
with the reason, like controller-runtime's probes.

The server is bounded, so nobody who can reach the port can starve the controller
(docs/security.md, "Endpoints"): at most :data:`MAX_CONNECTIONS` connections are served at once,
at most :data:`MAX_PER_CLIENT` of one client address (one more is closed at once), a connection
that sends nothing for :data:`IDLE_TIMEOUT` seconds is closed, and only ``GET`` of the three paths
is answered. With ``tls`` and ``authorize``
(``taskfsm run --metrics-secure``) ``/metrics`` is served over HTTPS to callers whose bearer token
the API server authenticates and allows ``get`` on the ``/metrics`` path, as controller-runtime's
``WithAuthenticationAndAuthorization`` filter does (:mod:`taskfsm.manager.metrics_auth`). The
standard library's server is kept (no new dependency) because the three endpoints need nothing
more than these bounds.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

ReadinessCheck = Callable[[], str]
"""Returns "" when ready, else a short reason."""

Authorize = Callable[[str, str], tuple[int, str]]
"""(bearer token or "", path) → (HTTP status, reason): 200 to serve, else 401/403/503."""

MAX_CONNECTIONS = 32
"""Connections served at once; Prometheus and the kubelet need a handful."""
MAX_PER_CLIENT = 8
"""Connections served at once for one client address, so one client cannot take every slot
(the kubelet's probes come from the node's address)."""
IDLE_TIMEOUT = 10.0
"""Seconds a connection may stay silent (request line, headers, TLS handshake)."""


def parse_address(address: str) -> tuple[str, int]:
    """``":8080"`` or ``"127.0.0.1:8080"`` → (host, port); host defaults to all interfaces."""
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most :data:`MAX_CONNECTIONS` of them; TLS optional (the
    handshake runs on the connection's thread, under its idle timeout)."""

    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        tls: Callable[[], ssl.SSLContext] | None,
    ) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._per_client: dict[str, int] = {}
        self._count_lock = threading.Lock()
        self._tls = tls
        self.refused = 0
        """Connections closed at once because every slot was taken (for tests and logs)."""
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, peer = self.socket.accept()
        if self._tls is not None:
            sock = self._tls().wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, peer

    def process_request(self, request: Any, client_address: Any) -> None:
        peer = str(client_address[0]) if client_address else ""
        with self._count_lock:
            crowded = self._per_client.get(peer, 0) >= MAX_PER_CLIENT
            if not crowded:
                self._per_client[peer] = self._per_client.get(peer, 0) + 1
        if crowded or not self._slots.acquire(blocking=False):
            if not crowded:
                self._leave(peer)
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            self._leave(peer)
            raise

    def _leave(self, peer: str) -> None:
        with self._count_lock:
            left = self._per_client.get(peer, 1) - 1
            if left > 0:
                self._per_client[peer] = left
            else:
                self._per_client.pop(peer, None)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(IDLE_TIMEOUT)
            if isinstance(request, ssl.SSLSocket):
                try:
                    request.do_handshake()
                except (OSError, ssl.SSLError):
                    self.shutdown_request(request)
                    return
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
            self._leave(str(client_address[0]) if client_address else "")

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that went away or timed out: nothing to report


class EndpointServer:
    """Serves the endpoints on one address in a background thread.

    Args:
        address: ``host:port``; port 0 picks a free one (see :attr:`port`).
        registry: Prometheus registry for ``/metrics`` (None: no metrics endpoint).
        ready: readiness check for ``/readyz`` (None: no health endpoints).
        tls: returns the TLS context for a new connection (None: plain HTTP).
        authorize: decides who may read ``/metrics`` (None: anyone who reaches the port).
    """

    def __init__(
        self,
        address: str,
        *,
        registry: CollectorRegistry | None,
        ready: ReadinessCheck | None,
        tls: Callable[[], ssl.SSLContext] | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        registry_, ready_, authorize_ = registry, ready, authorize

        class Handler(BaseHTTPRequestHandler):
            timeout = IDLE_TIMEOUT

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics" and registry_ is not None:
                    if authorize_ is not None:
                        code, reason = authorize_(_bearer(self.headers.get("Authorization")), path)
                        if code != 200:
                            self._reply(code, reason.encode() + b"\n")
                            return
                    self._reply(200, generate_latest(registry_), CONTENT_TYPE_LATEST)
                elif path == "/healthz" and ready_ is not None:
                    self._reply(200, b"ok\n")
                elif path == "/readyz" and ready_ is not None:
                    reason = ready_()
                    self._reply(503 if reason else 200, (reason or "ok").encode() + b"\n")
                else:
                    self._reply(404, b"not found\n")

            def _reply(
                self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8"
            ) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if code == 401:
                    self.send_header("WWW-Authenticate", 'Bearer realm="taskfsm"')
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # probes every few seconds: no access log
                return

        self._server = _BoundedServer(parse_address(address), Handler, tls)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="endpoints", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def refused(self) -> int:
        """Connections closed at once because :data:`MAX_CONNECTIONS` were being served."""
        return self._server.refused

    def start(self) -> EndpointServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _bearer(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header ("" for none)."""
    scheme, _, token = (header or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
