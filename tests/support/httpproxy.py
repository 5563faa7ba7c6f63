"""A TLS-terminating HTTP proxy in front of an API server, for tests that must see, delay or
answer single requests (the TCP proxy in :mod:`tests.support.proxy` only relays bytes).

The proxy serves HTTPS on loopback with a certificate from its own throw-away CA (made with
``cryptography``), so the client under test gets a kubeconfig (:meth:`HttpApiProxy.kubeconfig`)
naming the proxy, that CA and the API server's token. Every request is forwarded over HTTPS to
the API server (verified with the control plane's CA) on one upstream connection per client
connection; answers are relayed as they come, so watches stream through.

What a test can do:

* ``delay`` — seconds every answer is held back before its first byte (a slow but correct API
  server; watch events after the first flow at once);
* ``fault`` — a function of the request that may answer it instead of the API server (for
  example 429 with ``Retry-After``); such answers are marked ``injected`` in the log;
* :attr:`HttpApiProxy.log` — every request with the monotonic times it was received and
  answered, its status, and whether the answer was injected, for counting a client's requests
  (writes after a moment, retries after a ``Retry-After``).
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import ipaddress
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
}

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Reply:
    """An answer given by the proxy itself."""

    status: int
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class Request:
    """One request as seen by the proxy (``path`` includes the query)."""

    method: str
    path: str
    received: float
    """Monotonic time its headers and body had arrived."""
    status: int = 0
    answered: float = 0.0
    """Monotonic time just before the answer's first byte was sent (0: never answered)."""
    injected: bool = False

    @property
    def write(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def lease(self) -> bool:
        return "/coordination.k8s.io/v1/" in self.path and "/leases" in self.path


Fault = Callable[[Request], Reply | None]


def _make_ca_and_cert(workdir: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca, cert, key) PEM paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "taskfsm test proxy CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = workdir / "ca.crt", workdir / "proxy.crt", workdir / "proxy.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_path, cert_path, key_path


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, proxy: HttpApiProxy, context: ssl.SSLContext) -> None:
        self.proxy = proxy
        self.context = context
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        # The handshake happens in the connection's own thread, on its first read.
        return self.context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        ), address


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _upstream: http.client.HTTPSConnection | None = None

    def log_message(self, *_args: Any) -> None:  # quiet: the proxy's log is the record
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (OSError, ssl.SSLError):
            pass
        finally:
            if self._upstream is not None:
                self._upstream.close()

    def _any(self) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        request = Request(self.command, self.path, time.monotonic())
        proxy._record(request)
        reply = proxy.fault(request) if proxy.fault is not None else None
        if reply is not None:
            request.injected = True
            self._wait(proxy.delay)
            self._send_reply(request, reply)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            upstream = self._connection()
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
        except (OSError, http.client.HTTPException):
            self._drop_upstream()
            self.close_connection = True
            return
        self._wait(proxy.delay)
        self._relay(request, response)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self.server.proxy._closing.wait(seconds)

    def _connection(self) -> http.client.HTTPSConnection:
        if self._upstream is None:
            proxy = self.server.proxy
            self._upstream = http.client.HTTPSConnection(
                proxy.target[0], proxy.target[1], context=proxy.upstream_context, timeout=600
            )
        return self._upstream

    def _drop_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def _send_reply(self, request: Request, reply: Reply) -> None:
        request.status, request.answered = reply.status, time.monotonic()
        self.send_response(reply.status)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)
        self.wfile.flush()

    def _relay(self, request: Request, response: http.client.HTTPResponse) -> None:
        request.status, request.answered = response.status, time.monotonic()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in HOP_BY_HOP:
                self.send_header(key, value)
        length = response.getheader("Content-Length")
        try:
            if length is not None:
                data = response.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            while True:  # a watch: relay each piece as it arrives
                data = response.read1(65536)
                if not data:
                    break
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (OSError, http.client.HTTPException):
            self._drop_upstream()  # mid-answer: neither side can be reused
            self.close_connection = True


class HttpApiProxy:
    """Serve ``https://127.0.0.1:<port>`` and forward to ``target`` (the API server's URL),
    trusting ``target_ca`` for it. Use as a context manager; see the module docstring."""

    def __init__(
        self,
        target: str,
        target_ca: str | Path,
        *,
        delay: float = 0.0,
        fault: Fault | None = None,
        workdir: str | Path | None = None,
    ) -> None:
        parsed = urlparse(target)
        self.target = (parsed.hostname or "127.0.0.1", parsed.port or 443)
        self.upstream_context = ssl.create_default_context(cafile=str(target_ca))
        self.delay = delay
        self.fault = fault
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="taskfsm-httpproxy-"))
        self.ca_file, cert, key = _make_ca_and_cert(self.workdir)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._server = _Server(self, context)
        self.port: int = self._server.server_address[1]
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self.log: list[Request] = []
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> HttpApiProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        with contextlib.suppress(OSError):
            self._server.server_close()

    def kubeconfig(self, token: str, *, namespace: str | None = None) -> dict[str, Any]:
        """A kubeconfig for the proxy: its CA, the bearer ``token``."""
        import base64

        context: dict[str, str] = {"cluster": "via-proxy", "user": "user"}
        if namespace:
            context["namespace"] = namespace
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "via-proxy",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(
                            self.ca_file.read_bytes()
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "via-proxy", "context": context}],
            "current-context": "via-proxy",
        }

    def _record(self, request: Request) -> None:
        with self._lock:
            self.log.append(request)

    def requests(self, predicate: Callable[[Request], bool] = lambda _r: True) -> list[Request]:
        """A snapshot of the log, filtered."""
        with self._lock:
            return [r for r in self.log if predicate(r)]
