"""Ordinary requests over libcurl (``pycurl``): the transport behind
:class:`taskfsm.kube.rest.Rest` where the client's configuration allows it (the controller's
default; ``--http-transport=urllib3`` keeps the client's pool, docs/operations.md, "Request
timeouts and retries").

Why: a request through urllib3 and ``http.client`` costs about 0.5 ms of CPU in Python (URL
parsing, pool keys, header dictionaries, the response wrapper); libcurl does the same work in C
in a fifth of the instructions (docs/performance.md, "The HTTP transport"). Requests were about
a fifth of the controller's CPU per Task. Watches stay on the client's urllib3 path: a watch
event's cost is decoding it, which no transport changes (measured x0.83-0.92), and the informer
ends a stream from another thread, which urllib3's response allows and a running libcurl
transfer does not.

What it keeps of the behaviour docs/operations.md ("Request timeouts and retries") describes:

* one handle per thread (libcurl's rule), each keeping its own keep-alive connection, with the
  TCP keepalive of :mod:`taskfsm.kube.client` (idle, interval, and the probe count set on the
  socket, which pycurl has no option for);
* the ``(connect, read)`` timeout: ``connect`` bounds connecting and the TLS handshake, ``read``
  the silence of the answer (libcurl's low-speed limit: fewer than one byte a second for that
  many seconds); a single number bounds the whole request (a deadline);
* a timeout closes this thread's connection and makes every other thread's handle connect
  afresh on its next request (:meth:`CurlTransport.drop_connections`), as urllib3's idle
  connections were closed;
* a connection that closed or reset before the answer raises
  :class:`~taskfsm.kube.errors.ConnectionDropped` (``Rest`` retries idempotent verbs once).
  libcurl itself sends a request again, once, when a reused connection turns out dead before
  any byte of the answer, whatever the verb: every write of the controller is safe to land twice
  (docs/architecture.md, "Every write may be sent twice"), and a write guard's permission
  (``within``) bounds when it may be sent: no connection is opened for it afterwards (a
  socket-option callback refuses it), so a replica whose Lease gate closed sends nothing more;
* an answer beyond ``limit`` bytes is cut off (:class:`~taskfsm.kube.errors.Unavailable`);
* TLS as the client's pool would do it: its CA file or data (else the system's), its client
  certificate and key files, or the PEM material a tenant's kubeconfig holds in memory (handed
  to libcurl as blobs, never written to disk);
* no proxy from the environment: a configured proxy (``proxy-url``, ``HTTPS_PROXY``), a TLS
  server name (``tls-server-name``) or a hostname to assert leave a client without
  :class:`~taskfsm.kube.curl_settings.CurlSettings`, and it keeps the urllib3 path, whose
  handling of them is the client library's.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pycurl

from taskfsm.kube.curl_settings import CurlSettings, breaks_a_header
from taskfsm.kube.errors import ConnectionDropped, Unavailable

#: libcurl errors meaning the connection closed or reset before the whole answer arrived.
DROPPED = frozenset(
    {pycurl.E_GOT_NOTHING, pycurl.E_RECV_ERROR, pycurl.E_SEND_ERROR, pycurl.E_PARTIAL_FILE}
)


class _Call:
    """One request's answer as libcurl hands it over: body chunks and header lines."""

    __slots__ = (
        "chunks",
        "connect_by",
        "header_set",
        "headers",
        "late",
        "limit",
        "size",
        "too_large",
    )

    def __init__(self) -> None:
        self.header_set: list[str] | None = None
        """The request headers the handle was last given (libcurl keeps them)."""
        self.reset(None, None)

    def reset(self, limit: int | None, connect_by: float | None) -> None:
        self.chunks: list[bytes] = []
        self.headers: list[bytes] = []
        self.limit, self.size, self.too_large = limit, 0, False
        self.connect_by = connect_by
        """The monotonic time after which no connection may be opened for this request."""
        self.late = False
        """A connection was refused for being past ``connect_by``."""

    def write(self, chunk: bytes) -> int | None:
        self.size += len(chunk)
        if self.limit is not None and self.size > self.limit:
            self.too_large = True
            return 0  # libcurl ends the transfer (E_WRITE_ERROR)
        self.chunks.append(chunk)
        return None

    def header(self, line: bytes) -> None:
        self.headers.append(line)


@dataclass
class Answer:
    """A complete answer: status, body, and the header lines as received (parsed only when an
    error needs them)."""

    status: int
    body: bytes
    header_lines: list[bytes]

    def head(self) -> tuple[str, dict[str, str]]:
        """The reason phrase and headers (names lower-case) of the last response head (a
        ``100 Continue`` comes first)."""
        reason, headers = "", dict[str, str]()
        for raw in self.header_lines:
            line = raw.decode("latin-1").rstrip("\r\n")
            if line.startswith("HTTP/"):
                reason, headers = (line.split(" ", 2)[2:] or [""])[0], {}
            elif ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return reason, headers


class CurlTransport:
    """libcurl handles, one per thread, for one API server (see the module doc)."""

    def __init__(self, settings: CurlSettings) -> None:
        self.settings = settings
        self._local = threading.local()
        self._generation = 0

    def drop_connections(self) -> None:
        """Every thread's handle connects afresh on its next request; this thread's at once."""
        self._generation += 1
        handle = getattr(self._local, "handle", None)
        if handle is not None:
            handle[0].close()
            self._local.handle = None

    def request(
        self,
        method: str,
        url: str,
        headers: Sequence[str],
        body: bytes | None,
        timeout: float | tuple[float, float],
        limit: int | None,
        *,
        within: float | None = None,
    ) -> Answer:
        """Send one request; the answer whatever its status. Raises ``ConnectionDropped`` or
        ``Unavailable`` when no whole answer arrived. ``within``: seconds after which the
        request may not be sent again (a write guard's permission): libcurl's own second
        sending, on a new connection, is refused past it; the answer may come later."""
        curl, call = self._handle()
        call.reset(limit, None if within is None else time.monotonic() + within)
        curl.setopt(pycurl.URL, url)
        if body is None:
            curl.setopt(pycurl.HTTPGET, 1)
        else:
            curl.setopt(pycurl.POSTFIELDS, body)
        curl.setopt(pycurl.CUSTOMREQUEST, method)
        if call.header_set != headers:  # a thread's requests mostly repeat the same few
            if any(map(breaks_a_header, headers)):
                # libcurl would send a line break as it is (a second header, or a second
                # request); http.client refuses such a value, and so does this transport.
                raise Unavailable("a request header holds a line break; not sent")
            curl.setopt(pycurl.HTTPHEADER, [*headers, "Expect:"])
            call.header_set = list(headers)
        if isinstance(timeout, tuple):
            connect, read = timeout
            curl.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(connect * 1000)))
            curl.setopt(pycurl.TIMEOUT_MS, 0)
            curl.setopt(pycurl.LOW_SPEED_LIMIT, 1)
            curl.setopt(pycurl.LOW_SPEED_TIME, max(1, math.ceil(read)))
        else:
            curl.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(timeout * 1000)))
            curl.setopt(pycurl.TIMEOUT_MS, max(1, int(timeout * 1000)))
            curl.setopt(pycurl.LOW_SPEED_TIME, 0)
        try:
            curl.perform()
        except pycurl.error as exc:
            code, message = exc.args[0], exc.args[1] if len(exc.args) > 1 else ""
            if call.late:
                raise Unavailable(
                    "not sent again: the write's permission ran out before libcurl could send "
                    f"it on a new connection ({message})"
                ) from None
            if call.too_large and limit is not None:
                raise Unavailable(f"an answer larger than {limit // (1024 * 1024)} MiB") from None
            if code == pycurl.E_OPERATION_TIMEDOUT:
                self.drop_connections()
                raise Unavailable(
                    f"API server unreachable: {_timed_out(timeout, message)}"
                ) from None
            if code in DROPPED:
                raise ConnectionDropped(f"connection dropped: {message}") from None
            raise Unavailable(f"API server unreachable: {message} (libcurl error {code})") from None
        return Answer(curl.getinfo(pycurl.RESPONSE_CODE), b"".join(call.chunks), call.headers)

    def _handle(self) -> tuple[pycurl.Curl, _Call]:
        handle: tuple[pycurl.Curl, _Call, int] | None = getattr(self._local, "handle", None)
        if handle is not None and handle[2] == self._generation:
            return handle[0], handle[1]
        if handle is not None:
            handle[0].close()
        call = _Call()
        curl = self._new_handle(call)
        curl.setopt(pycurl.WRITEFUNCTION, call.write)
        curl.setopt(pycurl.HEADERFUNCTION, call.header)
        self._local.handle = (curl, call, self._generation)
        return curl, call

    def _new_handle(self, call: _Call) -> pycurl.Curl:
        s = self.settings
        curl = pycurl.Curl()
        curl.setopt(pycurl.NOSIGNAL, 1)
        curl.setopt(pycurl.PROXY, "")  # never a proxy from the environment (module doc)
        curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        curl.setopt(pycurl.SSL_VERIFYPEER, 1 if s.verify else 0)
        curl.setopt(pycurl.SSL_VERIFYHOST, 2 if s.verify else 0)
        if s.ca_data is not None:
            curl.setopt(pycurl.CAINFO_BLOB, s.ca_data)
        elif s.ca_file:
            curl.setopt(pycurl.CAINFO, s.ca_file)
        if s.ca_path:
            curl.setopt(pycurl.CAPATH, s.ca_path)
        if s.cert_file:
            curl.setopt(pycurl.SSLCERT, s.cert_file)
            curl.setopt(pycurl.SSLKEY, s.key_file or s.cert_file)
        if s.cert_data is not None and s.key_data is not None:
            curl.setopt(pycurl.SSLCERT_BLOB, s.cert_data)
            curl.setopt(pycurl.SSLKEY_BLOB, s.key_data)
        count = None
        if s.keepalive is not None:
            idle, interval, count = s.keepalive
            curl.setopt(pycurl.TCP_KEEPALIVE, 1)
            curl.setopt(pycurl.TCP_KEEPIDLE, idle)
            curl.setopt(pycurl.TCP_KEEPINTVL, interval)
        curl.setopt(pycurl.SOCKOPTFUNCTION, _on_new_socket(call, count))
        return curl


def _on_new_socket(call: _Call, count: int | None) -> Any:
    """A socket-option callback (libcurl calls it for every connection it opens): refuses a
    connection past the request's ``connect_by`` (the second sending of a write whose
    permission ran out), and sets ``TCP_KEEPCNT`` (pycurl has no option for it)."""

    def opened(fd: int, purpose: int) -> int:
        if call.connect_by is not None and time.monotonic() > call.connect_by:
            call.late = True
            return int(pycurl.SOCKOPT_ERROR)
        if count is not None:
            with contextlib.suppress(OSError):
                sock = socket.socket(fileno=fd)
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count)
                finally:
                    sock.detach()  # the descriptor stays libcurl's
        return int(pycurl.SOCKOPT_OK)

    return opened


def _timed_out(timeout: float | tuple[float, float], message: str) -> str:
    """What timed out, in the words urllib3 uses (users and runbooks read one wording)."""
    if not isinstance(timeout, tuple):
        return f"Timed out. (timeout={timeout:g}) {message}"
    if message.startswith("Connection timed out") or "connect" in message.lower():
        return f"Connect timed out. (connect timeout={timeout[0]}) {message}"
    return f"Read timed out. (read timeout={timeout[1]}) {message}"
