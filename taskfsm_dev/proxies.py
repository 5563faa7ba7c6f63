"""Proxies in front of an API server, for failure tests: one relays bytes, one answers requests.

* :class:`ApiProxy`, a loopback **TCP** proxy (network failures, F4, F5). The client under test
  is given a kubeconfig whose ``server`` is this proxy; bytes are relayed unchanged (TLS passes
  through, the API server's certificate still names ``127.0.0.1``). The test then breaks the
  path on purpose: :meth:`ApiProxy.cut` closes every open connection and closes new ones as soon
  as they are accepted (the API server is unreachable); :meth:`ApiProxy.stall` keeps every open
  connection open but relays nothing more in either direction, like a peer that vanished
  without a FIN or RST (new connections are relayed normally unless
  ``new_connections="stall"``); :meth:`ApiProxy.restore` relays new connections again and
  closes the stalled ones. :attr:`ApiProxy.accepted` records when connections were accepted,
  so a test can tell when a client reconnected after a failure.
* :class:`HttpApiProxy`, a **TLS-terminating HTTP** proxy, for tests that must see, delay or
  answer single requests. It serves HTTPS on loopback with a certificate from its own throw-away
  CA (made with ``cryptography``), so the client under test gets a kubeconfig
  (:meth:`HttpApiProxy.kubeconfig`) naming the proxy, that CA and the API server's token. Every
  request is forwarded over HTTPS to the API server (verified with the control plane's CA) on
  one upstream connection per client connection; answers are relayed as they come, so watches
  stream through. ``delay`` holds every answer back before its first byte (a slow but correct
  API server); ``fault`` is a function of the request that may answer it instead of the API
  server (for example 429 with ``Retry-After``), marked ``injected`` in the log;
  :attr:`HttpApiProxy.log` has every request with the times it was received and answered, its
  status, and whether the answer was injected.
"""

from __future__ import annotations

import contextlib
import datetime
import http.client
import ipaddress
import select
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

FORWARD, CUT, STALL = "forward", "cut", "stall"


@dataclass(eq=False)
class _Link:
    client: socket.socket
    upstream: socket.socket
    stalled: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class ApiProxy:
    """Relay ``127.0.0.1:<port>`` to ``target`` (an ``https://host:port`` URL or ``(host, port)``).

    Use as a context manager. :attr:`url` is the proxy's ``https://`` URL for a kubeconfig.
    """

    def __init__(self, target: str | tuple[str, int]) -> None:
        if isinstance(target, str):
            parsed = urlparse(target)
            target = (parsed.hostname or "127.0.0.1", parsed.port or 443)
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.mode = FORWARD
        self._new_mode = FORWARD
        self._links: set[_Link] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="api-proxy", daemon=True)
        self.accepted: list[float] = []
        """Monotonic times at which connections were accepted (refused ones included)."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> ApiProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> ApiProxy:
        self._thread.start()
        return self

    # -- failure switches ------------------------------------------------------------------------

    def cut(self) -> None:
        """Close every connection and close new ones at once."""
        with self._lock:
            self.mode = self._new_mode = CUT
            links, self._links = list(self._links), set()
        for link in links:
            link.close()

    def stall(self, *, new_connections: str = FORWARD) -> None:
        """Stop relaying on every open connection (they stay open, silent); new connections are
        relayed (``"forward"``) or stalled too (``"stall"``)."""
        with self._lock:
            self.mode = STALL
            self._new_mode = new_connections
            for link in self._links:
                link.stalled.set()

    def restore(self) -> None:
        """Relay new connections again; close the stalled ones."""
        with self._lock:
            self.mode = self._new_mode = FORWARD
            stalled = [link for link in self._links if link.stalled.is_set()]
            self._links.difference_update(stalled)
        for link in stalled:
            link.close()

    def connections(self) -> int:
        """Connections currently open through the proxy."""
        with self._lock:
            return len(self._links)

    def accepted_since(self, since: float) -> int:
        """How many connections were accepted after the monotonic time ``since``."""
        return sum(1 for t in list(self.accepted) if t > since)

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            links, self._links = list(self._links), set()
        for link in links:
            link.close()
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    # -- relaying --------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(time.monotonic())
            with self._lock:
                mode = self._new_mode
            if mode == CUT:
                with contextlib.suppress(OSError):
                    client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            link = _Link(client, upstream)
            with self._lock:
                mode = self._new_mode  # a cut() or stall() while connecting upstream wins
                if mode == STALL:
                    link.stalled.set()
                if mode != CUT:
                    self._links.add(link)
            if mode == CUT:
                link.close()
                continue
            threading.Thread(
                target=self._relay, args=(link,), name="api-proxy-relay", daemon=True
            ).start()

    def _relay(self, link: _Link) -> None:
        peer = {link.client: link.upstream, link.upstream: link.client}
        try:
            while not link.closed.is_set() and not self._closing.is_set():
                if link.stalled.is_set():
                    link.closed.wait(0.1)  # hold the connection open, relay nothing
                    continue
                readable, _, _ = select.select(list(peer), [], [], 0.1)
                for sock in readable:
                    if link.stalled.is_set():
                        break
                    data = sock.recv(65536)
                    if not data:
                        return
                    peer[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            link.close()
            with self._lock:
                self._links.discard(link)


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
