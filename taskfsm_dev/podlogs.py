"""Container logs for the simulated kubelet: a Node and the kubelet's log endpoint.

``kubectl logs`` (and ``taskfsm logs``) ask the API server for ``pods/NAME/log``; the API server
looks up the pod's Node and forwards the request to that Node's kubelet
(``https://<address>:<port>/containerLogs/<namespace>/<pod>/<container>``, the address and port
from the Node's status, the kubelet's serving certificate unverified unless the API server was
given a CA for it). The local control plane has no kubelet, so :class:`LogServer` plays one:

* it creates a Node (``taskfsm-sim-<random>``) whose status points at an HTTPS server on
  127.0.0.1 (a self-signed certificate made here), and the simulated kubelet binds the pods it
  starts to that Node (``pods/binding``, as the scheduler would);
* a container's log is the text of its pod's ``kubelet.taskfsm.dev/log`` annotation (one line per
  line), written evenly over the pod's run time from the moment it starts, so a log read while
  the pod runs shows the lines written so far and ``follow=true`` streams the rest and ends when
  the container ends; ``tailLines`` is honoured. Without the annotation a container writes one
  line when it ends: ``<container> exited with code <N>``.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from taskfsm.kube.errors import KubeError
from taskfsm.kube.pem import self_signed_context
from taskfsm.kube.rest import PODS, Resource, Rest

NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
ANNOTATION_LOG = "kubelet.taskfsm.dev/log"


@dataclass
class _Container:
    lines: list[str]
    started: float
    run_seconds: float
    exit_code: int
    ended: threading.Event = field(default_factory=threading.Event)

    def written(self) -> list[str]:
        """The lines written so far."""
        if self.ended.is_set():
            return self.lines
        if not self.lines:
            return []
        elapsed = time.monotonic() - self.started
        step = self.run_seconds / len(self.lines) if self.run_seconds > 0 else 0.0
        count = len(self.lines) if step == 0 else min(len(self.lines), int(elapsed / step) + 1)
        return self.lines[:count]


class LogServer:
    """The Node and log endpoint of a simulated kubelet (module docstring)."""

    def __init__(self, rest: Rest) -> None:
        self.rest = rest
        self.node = f"taskfsm-sim-{uuid.uuid4().hex[:8]}"
        self._containers: dict[tuple[str, str, str], _Container] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        tls = self_signed_context(self.node, days=1)
        self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sim-kubelet-logs", daemon=True
        )

    def start(self) -> LogServer:
        self._thread.start()
        self.rest.create(NODES, None, {"metadata": {"name": self.node}})
        self.rest.patch(
            NODES,
            None,
            self.node,
            {
                "status": {
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}},
                }
            },
            subresource="status",
        )
        return self

    def stop(self) -> None:
        self._stopped.set()
        for container in list(self._containers.values()):
            container.ended.set()
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(KubeError):  # gone already, or the control plane stopped first
            self.rest.delete(NODES, None, self.node)

    # -- the kubelet's side ----------------------------------------------------------------------

    def bind(self, pod: dict[str, Any]) -> None:
        """Assign ``pod`` to this Node, as the scheduler would."""
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }
        self.rest.request(
            "POST", PODS, PODS.path(meta["namespace"], meta["name"], "binding"), body=body
        )

    def started(self, pod: dict[str, Any], run_seconds: float, exit_code: int) -> None:
        meta = pod["metadata"]
        text = ((meta.get("annotations") or {}).get(ANNOTATION_LOG)) or ""
        with self._lock:
            for container in pod["spec"]["containers"]:
                self._containers[(meta["namespace"], meta["name"], container["name"])] = _Container(
                    text.splitlines(), time.monotonic(), run_seconds, exit_code
                )

    def ended(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        with self._lock:
            for (namespace, name, container_name), container in self._containers.items():
                if (namespace, name) == (meta["namespace"], meta["name"]):
                    if not container.lines:
                        container.lines = [
                            f"{container_name} exited with code {container.exit_code}"
                        ]
                    container.ended.set()

    # -- HTTP ------------------------------------------------------------------------------------

    def _lookup(self, path: str) -> _Container | None:
        parts = path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "containerLogs":
            return None
        with self._lock:
            return self._containers.get((parts[1], parts[2], parts[3]))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                container = server._lookup(url.path)
                if container is None:
                    self.send_error(400, "container is waiting to start: ContainerCreating")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                lines = container.written()
                tail = query.get("tailLines")
                if tail:
                    lines = lines[-int(tail[0]) :] if int(tail[0]) > 0 else []
                for line in lines:
                    self.wfile.write(line.encode() + b"\n")
                if query.get("follow") != ["true"]:
                    return
                sent = len(container.written())
                while not server._stopped.is_set():
                    now = container.written()
                    for line in now[sent:]:
                        self.wfile.write(line.encode() + b"\n")
                    sent = len(now)
                    if container.ended.is_set() and sent == len(container.lines):
                        return
                    time.sleep(0.05)

        return Handler
