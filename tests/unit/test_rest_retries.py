"""Request timeouts, retries and the write guard of :class:`taskfsm.kube.rest.Rest`, against a
scripted local HTTP server through the real client stack (``configured()`` ApiClient), over both
transports: libcurl (:mod:`taskfsm.kube.curl`, opt-in) and the client's urllib3 pool."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pycurl
import pytest
from kubernetes import client

from taskfsm.kube.client import KEEPALIVE_COUNT, KEEPALIVE_IDLE, configured
from taskfsm.kube.errors import ConnectionDropped, NotLeader, Unavailable
from taskfsm.kube.rest import LEASES, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, Rest

Step = Callable[[BaseHTTPRequestHandler], None]


def answer(status: int, headers: dict[str, str] | None = None, body: bytes = b"{}") -> Step:
    def step(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return step


def busy(retry_after: str, status: int = 429) -> Step:
    return answer(status, {"Retry-After": retry_after}, b'{"kind":"Status","message":"busy"}')


def drop(handler: BaseHTTPRequestHandler) -> None:
    """Close the connection without an answer (a keep-alive connection the server closed)."""
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


def hang(seconds: float) -> Step:
    def step(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        drop(handler)

    return step


OK = answer(200, body=b'{"kind":"Lease","metadata":{"name":"l"}}')


class Server:
    """Answers requests with the scripted steps in order (then 200), counting connections."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.requests: list[tuple[float, str]] = []
        self.connections = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with outer._lock:
                    outer.connections += 1

            def log_message(self, *_: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with outer._lock:
                    outer.requests.append((time.monotonic(), self.command))
                    step = outer.script.pop(0) if outer.script else OK
                step(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture
def api(server: Server) -> Iterator[client.ApiClient]:
    with configured(client.Configuration(host=server.url)) as api_client:
        yield api_client


class Recorder:
    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.observed: list[tuple[str, str, int]] = []


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture(params=["libcurl", "urllib3"], autouse=True)
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs over both transports (``make_rest`` picks the current one)."""
    global CURL
    CURL = request.param == "libcurl"
    yield request.param
    CURL = True


CURL = True


def make_rest(api: client.ApiClient, rec: Recorder, **kwargs: Any) -> Rest:
    kwargs.setdefault("curl", CURL)
    return Rest(
        api,
        observer=lambda *row: rec.observed.append(row),
        sleep=rec.sleeps.append,
        **kwargs,
    )


def test_retry_after_is_waited_for_then_retried(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """429 and 503 answers with Retry-After are retried after exactly the time the
    server asked for (never sooner), each attempt counted."""
    server.script = [busy("2"), busy("1", status=503)]
    assert make_rest(api, rec).get(LEASES, "ns", "l")["kind"] == "Lease"
    assert rec.sleeps == [2.0, 1.0]
    assert len(server.requests) == 3
    assert [code for _, _, code in rec.observed] == [429, 503, 200]


def test_every_attempt_is_timed(server: Server, api: client.ApiClient, rec: Recorder):
    """The timer (``rest_client_request_duration_seconds``) gets each attempt's HTTP method and
    its duration, the refused ones as well."""
    server.script = [busy("1")]
    timed: list[tuple[str, float]] = []
    make_rest(api, rec, timer=lambda *row: timed.append(row)).get(LEASES, "ns", "l")
    assert [method for method, _ in timed] == ["GET", "GET"]
    assert all(0 <= seconds < 10 for _, seconds in timed)


def test_a_retry_after_beyond_the_budget_is_left_to_the_caller(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """A Retry-After longer than the request's budget is not waited for: the error says
    how long the caller must wait."""
    server.script = [busy("30")]
    with pytest.raises(Unavailable) as info:
        make_rest(api, rec).get(LEASES, "ns", "l")
    assert (info.value.status, info.value.retry_after) == (429, 30.0)
    assert rec.sleeps == []
    assert len(server.requests) == 1


def test_errors_without_retry_after_are_not_retried(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """A 503 without Retry-After (and a Retry-After that is no integer) goes to the caller's
    backoff at once: one request each."""
    server.script = [answer(503), busy("Wed, 21 Oct 2026 07:28:00 GMT")]
    rest = make_rest(api, rec)
    for _ in range(2):
        with pytest.raises(Unavailable) as info:
            rest.get(LEASES, "ns", "l")
        assert info.value.retry_after is None
    assert len(server.requests) == 2


def test_a_deadline_bounds_retry_after_waits(server: Server, api: client.ApiClient, rec: Recorder):
    """With a deadline (the Lease elector's), a Retry-After that would end past it is not
    waited for."""
    server.script = [busy("1")]
    rest = make_rest(api, rec)
    with pytest.raises(Unavailable) as info:
        rest.request("GET", LEASES, LEASES.path("ns", "l"), deadline=time.monotonic() + 0.5)
    assert info.value.retry_after == 1.0
    assert rec.sleeps == []


def test_writes_retried_after_retry_after_pass_the_guard_each_time(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """A POST answered 429 with Retry-After is retried (the server did not process it),
    and the write guard is asked again before the retry is sent."""
    asked: list[str] = []

    def guard(method: str, resource: str) -> float:
        asked.append(f"{method} {resource}")
        return 5.0

    server.script = [busy("1")]
    make_rest(api, rec, write_guard=guard).create(LEASES, "ns", {"metadata": {"name": "l"}})
    assert asked == ["POST leases", "POST leases"]
    assert len(server.requests) == 2


def test_a_refusing_write_guard_sends_nothing(server: Server, api: client.ApiClient, rec: Recorder):
    """Every write verb is refused unsent when the guard says this replica is not the
    leader; reads are not guarded."""

    def guard(method: str, resource: str) -> float:
        raise NotLeader(f"not sending {method} {resource}")

    rest = make_rest(api, rec, write_guard=guard)
    calls: list[Callable[[], Any]] = [
        lambda: rest.create(LEASES, "ns", {"metadata": {"name": "l"}}),
        lambda: rest.replace(LEASES, "ns", "l", {"metadata": {"name": "l"}}),
        lambda: rest.patch(LEASES, "ns", "l", {"metadata": {"labels": {"a": "b"}}}),
        lambda: rest.delete(LEASES, "ns", "l"),
    ]
    for call in calls:
        with pytest.raises(NotLeader):
            call()
    assert server.requests == []
    assert rec.observed == []
    rest.get(LEASES, "ns", "l")
    assert [method for _, method in server.requests] == ["GET"]


def test_reviews_pass_a_refusing_write_guard(server: Server, api: client.ApiClient, rec: Recorder):
    """A TokenReview or SubjectAccessReview stores nothing: a stand-by replica, whose guard
    refuses writes, still sends them (regression: its secure ``/metrics`` answered 503 to
    every caller the Service routed to it)."""

    def guard(method: str, resource: str) -> float:
        raise NotLeader(f"not sending {method} {resource}")

    rest = make_rest(api, rec, write_guard=guard)
    for review in (TOKEN_REVIEWS, SUBJECT_ACCESS_REVIEWS):
        rest.request("POST", review, review.path(), body={"spec": {}})
    assert [method for _, method in server.requests] == ["POST", "POST"]


def test_connecting_for_a_write_may_not_outlast_the_guard(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """The connect (and TLS) timeout of a write is capped to the time the guard still
    allows, so a slow connection set-up cannot carry the write past it."""
    seen: list[Any] = []
    rest = make_rest(api, rec, write_guard=lambda _m, _r: 0.25)
    original = rest._send

    def spy(*args: Any) -> Any:
        seen.append(args[7])
        return original(*args)

    rest._send = spy  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    rest.create(LEASES, "ns", {"metadata": {"name": "l"}})
    rest.get(LEASES, "ns", "l")
    assert seen == [(0.25, rest.timeout[1]), rest.timeout]


def test_a_dropped_connection_is_retried_once_for_idempotent_verbs(
    server: Server, api: client.ApiClient, rec: Recorder, transport: str
):
    """A new connection closed before the answer is retried once for GET (on a new
    connection), never for PATCH (the controller retries from a fresh view) and never twice."""
    rest = make_rest(api, rec)
    server.script = [drop]
    rest.get(LEASES, "ns", "l")
    assert len(server.requests) == 2
    rest.drop_idle_connections()  # the next request's connection is new, not reused
    server.script = [drop]
    with pytest.raises(ConnectionDropped):
        rest.patch(LEASES, "ns", "l", {"metadata": {"labels": {"a": "b"}}})
    assert len(server.requests) == 3
    rest.drop_idle_connections()
    server.script = [drop, drop]
    with pytest.raises(ConnectionDropped):
        rest.get(LEASES, "ns", "l")
    assert len(server.requests) == 5


def test_libcurl_sends_a_request_again_once_when_its_reused_connection_died(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """A kept-alive connection that turns out closed before any byte of the answer: libcurl
    sends the request again on a new connection, once, whatever the verb (every write of the
    controller may land twice, docs/architecture.md); a second drop is the caller's, and a
    PATCH is then not retried."""
    rest = make_rest(api, rec, curl=True)  # libcurl's own behaviour, whichever the parameter
    rest.get(LEASES, "ns", "l")  # leaves a kept-alive connection
    server.script = [drop]
    rest.patch(LEASES, "ns", "l", {"metadata": {"labels": {"a": "b"}}})
    assert len(server.requests) == 3
    server.script = [drop, drop]
    with pytest.raises(ConnectionDropped):
        rest.patch(LEASES, "ns", "l", {"metadata": {"labels": {"a": "b"}}})
    assert len(server.requests) == 5


def test_a_guarded_write_is_never_sent_after_the_guards_permission_ran_out(
    server: Server, api: client.ApiClient, rec: Recorder, transport: str
):
    """A write whose kept-alive connection dies silently after the guard's permission ran out
    is not sent again: libcurl would resend it on a new connection by itself (as in the test
    above), so over libcurl no connection is opened for it past the permission (a replica cut
    off from its Lease must not write after its gate closed, docs/operations.md)."""
    allowed = 0.5
    rest = make_rest(api, rec, write_guard=lambda _m, _r: allowed)
    rest.get(LEASES, "ns", "l")  # leaves a kept-alive connection
    server.script = [hang(1.2)]  # the answer never comes; the connection closes after 1.2 s
    started = time.monotonic()
    with pytest.raises((Unavailable, ConnectionDropped)) as failed:
        rest.patch(LEASES, "ns", "l", {"metadata": {"labels": {"a": "b"}}})
    time.sleep(1.5)  # anything sent again would have arrived by now
    patches = [at - started for at, method in server.requests if method == "PATCH"]
    assert len(patches) == 1
    assert patches[0] < allowed
    if transport == "libcurl":
        assert "permission ran out" in str(failed.value)


def test_a_slow_answer_to_a_guarded_write_is_waited_for_beyond_the_permission(
    server: Server, api: client.ApiClient, rec: Recorder
):
    """The permission bounds sending, not the answer: a write sent within it is answered
    however long the API server takes (within the read timeout)."""
    rest = make_rest(api, rec, write_guard=lambda _m, _r: 0.3)
    rest.get(LEASES, "ns", "l")
    server.script = [hang_then_ok(1.0)]
    assert rest.patch(LEASES, "ns", "l", {"metadata": {"labels": {"a": "b"}}})["kind"] == "Lease"
    assert [method for _, method in server.requests] == ["GET", "PATCH"]


def test_a_read_timeout_is_not_retried_and_drops_idle_connections(
    server: Server, api: client.ApiClient, rec: Recorder, transport: str
):
    """A request whose answer does not come within the read timeout fails after one
    read timeout (the transport retries nothing), and the other kept-alive connections
    (probably on the same dead path) are closed, so their next request connects afresh
    instead of waiting on one."""
    rest = make_rest(api, rec, timeout=(2.0, 0.5))
    # A worker thread keeps a connection of its own alive (libcurl: a handle per thread; urllib3:
    # two requests in flight at once leave two connections idle in the pool).
    go, done = threading.Event(), threading.Event()

    def worker() -> None:
        rest.get(LEASES, "ns", "l")
        done.set()
        go.wait(10)
        rest.get(LEASES, "ns", "l")

    server.script = [hang_then_ok(0.3), hang_then_ok(0.3)]
    other = threading.Thread(target=worker)
    other.start()
    rest.get(LEASES, "ns", "l")
    done.wait(10)
    assert server.connections == 2
    server.script = [hang(1.5)]
    with pytest.raises(Unavailable, match="Read timed out"):
        rest.get(LEASES, "ns", "l")
    assert len(server.requests) == 3  # not retried
    go.set()
    other.join()
    assert server.connections == 3  # the other kept-alive connection was not used again
    rest.get(LEASES, "ns", "l")
    # Nor this thread's, which timed out: libcurl's handle connects afresh; urllib3's pool hands
    # this thread the connection the worker just opened.
    assert server.connections == (4 if transport == "libcurl" else 3)


def hang_then_ok(seconds: float) -> Step:
    def step(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        OK(handler)

    return step


def test_a_deadline_is_one_total_timeout(server: Server, api: client.ApiClient, rec: Recorder):
    """A request with a deadline times out when the deadline passes, however its
    (connect, read) defaults are set."""
    server.script = [hang(3.0)]
    rest = make_rest(api, rec, timeout=(30.0, 30.0))
    started = time.monotonic()
    with pytest.raises(Unavailable):
        rest.request("GET", LEASES, LEASES.path("ns", "l"), deadline=started + 0.5)
    assert len(server.requests) == 1


def test_clients_use_tcp_keepalive_and_no_http_client_retries(
    server: Server, api: client.ApiClient, rec: Recorder, transport: str
):
    """Every client's connections have TCP keepalive (idle 15 s, 3 probes) and urllib3
    retries nothing itself (Rest decides, passing the write guard each time)."""
    rest = make_rest(api, rec)
    rest.get(LEASES, "ns", "l")
    pool = api.rest_client.pool_manager.connection_from_url(server.url)
    if transport == "libcurl":
        assert rest.curl is not None
        handle, _ = rest.curl._handle()
        sock = socket.socket(fileno=handle.getinfo(pycurl.ACTIVESOCKET))
        try:
            assert_keepalive(sock)
        finally:
            sock.detach()
    else:
        conn = pool.pool.get(block=False)
        try:
            assert_keepalive(conn.sock)
        finally:
            pool.pool.put(conn)
    assert pool.retries.total is False
    assert api.configuration.client_go_retries is False


def assert_keepalive(sock: socket.socket) -> None:
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == KEEPALIVE_COUNT


def test_a_permission_refusal_is_noted_until_the_same_request_succeeds(server, api, rec):
    """An RBAC refusal (403 "... cannot list ...") is noted per verb and resource for
    ``/readyz``; a 403 that is no RBAC refusal is not; the next success clears the note."""
    from taskfsm.kube.errors import Forbidden

    rbac_body = (
        b'{"kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":'
        b'"leases.coordination.k8s.io is forbidden: User \\"x\\" cannot list resource \\"leases\\""}'
    )
    other_body = (
        b'{"kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":'
        b'"unable to create new content in namespace ns because it is being terminated"}'
    )
    server.script = [answer(403, body=rbac_body), answer(403, body=other_body)]
    rest = make_rest(api, rec)
    with pytest.raises(Forbidden):
        rest.list(LEASES, "ns")
    assert list(rest.denied()) == [("LIST", "leases")]
    with pytest.raises(Forbidden):
        rest.create(LEASES, "ns", {"metadata": {"name": "x"}})
    assert list(rest.denied()) == [("LIST", "leases")]
    rest.list(LEASES, "ns")
    assert rest.denied() == {}


def test_a_permission_refusal_not_repeated_within_the_hold_is_let_go(server, api, rec):
    """Regression: a kube-apiserver that has just restarted refuses requests while its RBAC
    caches load; a refused request the controller does not make again (an MPE status that
    needs no second write) kept /readyz at "permissions missing" for good. A refusal is listed
    for DENIAL_HOLD_SECONDS after it was last given; refused again, it stays that long again."""
    from taskfsm.kube.errors import Forbidden
    from taskfsm.kube.rest import DENIAL_HOLD_SECONDS

    rbac_body = (
        b'{"kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":'
        b'"leases.coordination.k8s.io is forbidden: User \\"x\\" cannot list resource \\"leases\\""}'
    )
    server.script = [answer(403, body=rbac_body), answer(403, body=rbac_body)]
    rest = make_rest(api, rec)
    clock = [1000.0]
    # The refusals' clock only: freezing time.monotonic for the process stalled the HTTP
    # client's own timeouts (the test took 4-13 s).
    rest.clock = lambda: clock[0]
    with pytest.raises(Forbidden):
        rest.list(LEASES, "ns")
    assert list(rest.denied(1000.0 + DENIAL_HOLD_SECONDS - 1)) == [("LIST", "leases")]
    clock[0] = 1000.0 + DENIAL_HOLD_SECONDS / 2
    with pytest.raises(Forbidden):
        rest.list(LEASES, "ns")
    assert list(rest.denied(1000.0 + DENIAL_HOLD_SECONDS + 1)) == [("LIST", "leases")]
    assert rest.denied(clock[0] + DENIAL_HOLD_SECONDS + 1) == {}


def test_a_header_value_with_a_line_break_is_not_sent(
    server: Server, api: client.ApiClient, rec: Recorder, transport: str
):
    """A bearer token holding a line break never reaches the wire as a second header or
    request: refused before sending, by either transport (tenants' kubeconfigs are refused
    before that, tests/unit/test_kubeconfig_policy.py)."""
    api.configuration.api_key = {"BearerToken": "t0ken\r\nX-Injected: yes"}
    api.configuration.api_key_prefix = {"BearerToken": "Bearer"}
    rest = make_rest(api, rec)
    with pytest.raises((Unavailable, ValueError), match=r"(?i)header"):
        rest.get(LEASES, "ns", "l")
    assert server.requests == []
