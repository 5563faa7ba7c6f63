"""HTTP endpoints for operators: ``/metrics`` (Prometheus), ``/healthz`` and ``/readyz``.

``/healthz`` answers 200 while the process runs; ``/readyz`` answers 200 only when the readiness
check passes (caches synced, every MediaProcessingEntity Job watch connected) and otherwise 503
with the reason, like controller-runtime's probes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

ReadinessCheck = Callable[[], str]
"""Returns "" when ready, else a short reason."""


def parse_address(address: str) -> tuple[str, int]:
    """``":8080"`` or ``"127.0.0.1:8080"`` → (host, port); host defaults to all interfaces."""
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))


class EndpointServer:
    """Serves the endpoints on one address in a background thread.

    Args:
        address: ``host:port``; port 0 picks a free one (see :attr:`port`).
        registry: Prometheus registry for ``/metrics`` (None: no metrics endpoint).
        ready: readiness check for ``/readyz`` (None: no health endpoints).
    """

    def __init__(
        self, address: str, *, registry: CollectorRegistry | None, ready: ReadinessCheck | None
    ) -> None:
        registry_, ready_ = registry, ready

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics" and registry_ is not None:
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
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # probes every few seconds: no access log
                return

        self._server = ThreadingHTTPServer(parse_address(address), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="endpoints", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> EndpointServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
