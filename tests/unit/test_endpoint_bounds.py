"""The endpoints cannot be used to starve the controller, and --metrics-secure asks the API server.

docs/security.md, "Endpoints": at most MAX_CONNECTIONS connections are served at once, a silent
one is closed after IDLE_TIMEOUT, and with an authorizer /metrics answers only callers the API
server authenticates and allows (TokenReview + SubjectAccessReview, cached by token hash).
"""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from taskfsm.manager import server as server_module
from taskfsm.manager.metrics_auth import CACHE_SIZE, MetricsAuthorizer
from taskfsm.manager.server import EndpointServer
from taskfsm.manager.serving_cert import ServingCertificate
from tests.support.fakes import FakeRest


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("taskfsm_test_total", "a test counter", registry=reg).inc()
    return reg


def get(url: str, token: str | None = None, context: ssl.SSLContext | None = None):
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_connections_beyond_the_cap_are_closed_and_the_endpoint_still_answers(monkeypatch):
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(server_module, "MAX_PER_CLIENT", 4)
    srv = EndpointServer("127.0.0.1:0", registry=None, ready=lambda: "").start()
    idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(10)]
    try:
        deadline = time.monotonic() + 5
        while srv.refused < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.refused >= 6  # the 4 slots are taken by silent connections
    finally:
        for conn in idle:
            conn.close()
    deadline = time.monotonic() + 5
    status: int | None = None
    while time.monotonic() < deadline:  # slots come back as the idle connections close
        try:
            status, _ = get(f"http://127.0.0.1:{srv.port}/readyz")
        except OSError:  # refused while the server has not yet seen a slot close (a loaded machine)
            status = None
        if status == 200:
            break
        time.sleep(0.1)
    assert status == 200
    srv.stop()


def test_a_silent_connection_is_closed_after_the_idle_timeout(monkeypatch):
    monkeypatch.setattr(server_module, "IDLE_TIMEOUT", 0.5)
    srv = EndpointServer("127.0.0.1:0", registry=None, ready=lambda: "").start()
    conn = socket.create_connection(("127.0.0.1", srv.port))
    conn.settimeout(5)
    started = time.monotonic()
    assert conn.recv(1) == b""  # closed by the server, not by our 5 s timeout
    assert time.monotonic() - started < 4
    conn.close()
    srv.stop()


def reviews(users: dict[str, str], allowed: set[str]) -> Any:
    """Answers TokenReviews (``users``: token → user) and SubjectAccessReviews (``allowed``
    users may get /metrics) like an API server would."""

    def answer(kind: str, body: dict[str, Any]) -> dict[str, Any]:
        spec = body["spec"]
        if kind == "TokenReview":
            user = users.get(spec["token"])
            status = {"authenticated": True, "user": {"username": user}} if user else {}
            return {"status": status}
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in allowed}}

    return answer


def test_the_authorizer_answers_401_403_200_and_caches_by_token():
    rest = FakeRest(answer=reviews({"good": "prometheus", "other": "someone"}, {"prometheus"}))
    authorize = MetricsAuthorizer(rest)  # type: ignore[arg-type]  # the fake answers both reviews
    assert authorize("", "/metrics")[0] == 401
    assert authorize("unknown", "/metrics")[0] == 401
    assert authorize("other", "/metrics") == (403, "Forbidden: someone may not get /metrics")
    assert authorize("good", "/metrics") == (200, "OK")
    asked = len(rest.requests)
    assert authorize("good", "/metrics") == (200, "OK")
    assert len(rest.requests) == asked  # cached


def test_the_authorizer_cache_is_bounded():
    rest = FakeRest(answer=reviews({}, set()))
    authorize = MetricsAuthorizer(rest)  # type: ignore[arg-type]  # the fake answers both reviews
    for i in range(CACHE_SIZE + 50):
        authorize(f"made-up-{i}", "/metrics")
    assert len(authorize._answers) == CACHE_SIZE


def test_secure_metrics_over_https_with_a_self_signed_certificate():
    rest = FakeRest(answer=reviews({"good": "prometheus"}, {"prometheus"}))
    srv = EndpointServer(
        "127.0.0.1:0",
        registry=registry(),
        ready=None,
        tls=ServingCertificate(),
        authorize=MetricsAuthorizer(rest),  # type: ignore[arg-type]  # the fake answers both reviews
    ).start()
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    url = f"https://127.0.0.1:{srv.port}/metrics"
    assert get(url, None, insecure)[0] == 401
    status, body = get(url, "good", insecure)
    assert status == 200
    assert "taskfsm_test_total" in body
    with pytest.raises(ConnectionError):  # plain HTTP is not spoken: the handshake fails
        get(f"http://127.0.0.1:{srv.port}/metrics")
    srv.stop()


def test_one_client_address_cannot_take_every_slot(monkeypatch):
    """Eight silent connections from one address fill its share; the ninth is closed at once,
    while the server as a whole still has room."""
    monkeypatch.setattr(server_module, "MAX_PER_CLIENT", 8)
    srv = EndpointServer("127.0.0.1:0", registry=None, ready=lambda: "").start()
    idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(9)]
    try:
        deadline = time.monotonic() + 5
        while srv.refused < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.refused == 1
    finally:
        for conn in idle:
            conn.close()
    srv.stop()
