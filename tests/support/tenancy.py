"""A tenant of the security tests (tests/security): a namespace, its tenant's identity, and
plain-dict helpers to act as the tenant and to check as the admin (docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import BY_KIND
from taskfsm.kube.rest import CORE_EVENTS, JOBS, SECRETS, Rest
from taskfsm_dev import objects
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.waiting import wait_for

PODS_REFUSED_TIMEOUT = 45
"""--job-pods-refused-timeout of the security tests' controller (seconds)."""


@dataclass
class Tenant:
    """A namespace and its tenant's identity: ``rest`` writes as the tenant, ``admin`` checks."""

    namespace: str
    rest: Rest
    admin: Rest
    kubeconfig: Path
    kubelet: SimulatedKubelet
    extra: list[Any] = field(default_factory=list)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = BY_KIND.get(obj["kind"]) or SECRETS
        return self.rest.create(res, self.namespace if res.namespaced else None, obj)

    def basics(self, *, function: dict[str, Any] | None = None) -> None:
        """A Workflow ``wf``, a Function ``fn`` and a default local MPE ``local``."""
        self.create(objects.workflow("wf"))
        self.create(function or objects.function("fn", run_seconds=0.2))
        self.create(objects.local_mpe("local", default=True))

    def task(self, name: str, **spec: Any) -> dict[str, Any]:
        return self.create(objects.task(name, workflow_name="wf", function_name="fn", **spec))

    def task_in_new_workflow(self, name: str) -> dict[str, Any]:
        """A Workflow ``name`` and its Task ``name`` (Function ``fn``): a Workflow with no
        running Task terminates after 20 s, so a later check needs one of its own."""
        self.create(objects.workflow(name))
        return self.create(objects.task(name, workflow_name=name, function_name="fn"))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        res = BY_KIND[kind]
        try:
            return self.admin.get(res, self.namespace if res.namespaced else None, name)
        except NotFound:
            return None

    def status(self, kind: str, name: str) -> dict[str, Any]:
        return (self.get(kind, name) or {}).get("status") or {}

    def phase(self, name: str) -> str:
        return str(self.status("Task", name).get("phase") or "")

    def condition(self, kind: str, name: str, type_: str) -> dict[str, Any]:
        for cond in self.status(kind, name).get("conditions") or []:
            if cond.get("type") == type_:
                return dict(cond)
        return {}

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        items = self.admin.list(CORE_EVENTS, self.namespace)["items"]
        return [
            e for e in items if name is None or (e.get("involvedObject") or {}).get("name") == name
        ]

    def event_reasons(self, name: str) -> set[str]:
        return {str(e.get("reason")) for e in self.events(name)}

    def wait_event(self, name: str, reason: str, *, timeout: float = 30) -> None:
        """Wait until an Event with ``reason`` is about ``name`` (Events follow the status write)."""
        wait_for(
            lambda: reason in self.event_reasons(name),
            timeout=timeout,
            what=lambda: f"Event {reason} about {name} (seen: {self.event_reasons(name)})",
        )

    def get_secret(self, name: str) -> dict[str, Any] | None:
        try:
            return self.admin.get(SECRETS, self.namespace, name)
        except NotFound:
            return None

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.admin.list(JOBS, namespace or self.namespace)["items"]

    def wait_phase(self, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        wait_for(lambda: self.phase(name) == phase, timeout=timeout, what=f"Task {name} {phase}")
        return self.get("Task", name) or {}


def no_task_children_outside(tenant: Tenant, namespaces: list[str]) -> None:
    """No Job or Secret labelled for the tenant's Tasks exists in ``namespaces``."""
    for namespace in namespaces:
        for res in (JOBS, SECRETS):
            found = tenant.admin.list(
                res,
                namespace,
                label_selector=f"engine.nagare.media/task-namespace={tenant.namespace}",
            )["items"]
            assert found == [], f"{res.kind}s of {tenant.namespace} in {namespace}: {found}"


class CredentialTrap:
    """An HTTPS server that answers every request 401 and records its Authorization header: the
    ``server`` of a tenant's kubeconfig, to see what the controller would send there."""

    def __init__(self, workdir: Path) -> None:
        import http.server
        import ssl
        import threading

        from taskfsm_dev.proxies import _make_ca_and_cert

        self.ca, cert, key = _make_ca_and_cert(workdir)
        self.seen: list[tuple[str, str]] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append((self.path, self.headers.get("Authorization") or ""))
                body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":401}'
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def kubeconfig(
    server: str, *, cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A kubeconfig document for ``server`` with extra ``cluster`` and ``user`` keys."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": dict(user or {})}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
