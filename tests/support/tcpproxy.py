"""A loopback TCP proxy that can be cut, to make a cluster unreachable on purpose.

Tests point a remote MediaProcessingEntity's kubeconfig at the proxy instead of the API server;
:meth:`TcpProxy.cut` then closes every open connection and refuses new ones (the cluster is
"gone"), :meth:`TcpProxy.restore` accepts connections again. Bytes are forwarded unchanged (TLS
passes through), so the API server's certificate still matches ``127.0.0.1``.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``target_host:target_port``.

    Use as a context manager; :attr:`port` is the listening port, :attr:`url` an ``https://`` URL.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cut(self) -> None:
        """Drop every connection and refuse new ones (they are accepted and closed at once)."""
        self._open.clear()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()

    def restore(self) -> None:
        """Forward new connections again."""
        self._open.set()

    def close(self) -> None:
        self._stop.set()
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client_sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._open.is_set():
                client_sock.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client_sock.close()
                continue
            with self._lock:
                self._conns.update((client_sock, upstream))
            threading.Thread(target=self._pump, args=(client_sock, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        pair = {a: b, b: a}
        try:
            while not self._stop.is_set() and self._open.is_set():
                readable, _, _ = select.select(list(pair), [], [], 0.2)
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pair[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for sock in (a, b):
                with contextlib.suppress(OSError):
                    sock.close()
            with self._lock:
                self._conns.discard(a)
                self._conns.discard(b)
