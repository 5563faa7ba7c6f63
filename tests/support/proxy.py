"""A loopback TCP proxy in front of an API server, for network failure tests (F4, F5).

The controller under test is given a kubeconfig whose ``server`` is this proxy; bytes are relayed
unchanged (TLS passes through, the API server's certificate still names ``127.0.0.1``). The test
then breaks the path on purpose:

* :meth:`ApiProxy.cut` — every open connection is closed and new ones are closed as soon as they
  are accepted: the API server is unreachable (the client sees resets or end of stream at once);
* :meth:`ApiProxy.stall` — every open connection stays open but nothing more is relayed in either
  direction, like a peer that vanished without a FIN or RST (a NAT entry dropped, a node gone).
  New connections are relayed normally unless ``new_connections="stall"``;
* :meth:`ApiProxy.restore` — relay new connections again; stalled connections are closed (the
  path healed and the peer's RST finally arrives).

:attr:`ApiProxy.accepted` records the monotonic time of every accepted connection, so a test can
tell when a client reconnected after a failure.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from dataclasses import dataclass, field
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
