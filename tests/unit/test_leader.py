"""The Lease elector (taskfsm/kube/leader.py) against a fake Lease API on a fake monotonic clock: what
it sends when, how long it keeps leading, and when its write gate opens.

The fake API keeps one Lease with resourceVersions and answers each request ``latency`` seconds
later on the fake clock, or times out at the request's deadline when the latency is longer, as
:class:`taskfsm.kube.rest.Rest` with a deadline does.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from taskfsm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound, NotLeader, Unavailable
from taskfsm.kube.leader import LeaderElector

ME, OTHER = "me", "other"
LD, RD, RP = 15.0, 10.0, 2.0


class Clock:
    """Monotonic seconds that move only when someone waits (or a request takes time)."""

    def __init__(self, end: float) -> None:
        self.now = 0.0
        self.end = end
        self.hooks: list[tuple[float, Callable[[], None]]] = []
        """(time, action): run once when the clock passes ``time`` (inside a wait or request)."""
        self.on_end: Callable[[], None] = lambda: None
        """Called at every tick past ``end`` (stops the elector when it never waits)."""

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        """Run the hooks that are due."""
        for entry in sorted(self.hooks, key=lambda e: e[0]):
            if self.now >= entry[0] and entry in self.hooks:
                self.hooks.remove(entry)
                entry[1]()
        if self.now >= self.end:
            self.on_end()

    def wait(self, seconds: float) -> bool:
        """The elector's wait: advance, fire due hooks; True (stop) once past ``end``."""
        self.now += max(0.0, seconds)
        self.tick()
        return self.now >= self.end


@dataclass
class Call:
    at: float
    method: str
    deadline: float | None
    outcome: str = ""


@dataclass
class FakeLeaseApi:
    """One Lease behind ``request(method, res, path, body=, deadline=)`` (what the elector uses)."""

    clock: Clock
    latency: float = 0.01
    lease: dict[str, Any] | None = None
    version: int = 0
    calls: list[Call] = field(default_factory=list)
    script: list[KubeError | None] = field(default_factory=list)
    """Errors to answer the next requests with (None: answer normally), consumed in order."""
    fail: Callable[[str], KubeError | None] | None = None
    """Asked for every request after ``script`` is used up: an error to answer with, or None."""

    def request(
        self, method: str, _res: Any, _path: str, *, body: Any = None, deadline: float | None = None
    ) -> Any:
        call = Call(self.clock.now, method, deadline)
        self.calls.append(call)
        if deadline is not None and self.clock.now + self.latency >= deadline:
            self.clock.now = deadline
            self.clock.tick()
            call.outcome = "timeout"
            raise Unavailable("read timed out")
        self.clock.now += self.latency
        self.clock.tick()  # what happens while the answer travels
        error = self.script.pop(0) if self.script else (self.fail(method) if self.fail else None)
        if error is not None:
            call.outcome = type(error).__name__
            raise error
        try:
            answer = self._answer(method, body)
        except KubeError as exc:
            call.outcome = type(exc).__name__
            raise
        call.outcome = "ok"
        return answer

    def _answer(self, method: str, body: Any) -> Any:
        if method == "GET":
            if self.lease is None:
                raise NotFound("leases not found")
            return copy.deepcopy(self.lease)
        if method == "POST":
            if self.lease is not None:
                raise AlreadyExists("exists", reason="AlreadyExists")
            return self._store(body)
        assert method == "PUT"
        if self.lease is None:
            raise NotFound("leases not found")
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    def hold(self, holder: str) -> None:
        """Someone else writes the Lease (takes or renews it)."""
        spec = {"holderIdentity": holder, "leaseDurationSeconds": int(LD), "renewTime": "x"}
        self._store({"metadata": {"name": "l", "namespace": "ns"}, "spec": spec})

    def holder(self) -> str | None:
        return ((self.lease or {}).get("spec") or {}).get("holderIdentity")

    def at(self, method: str, outcome: str = "ok") -> list[float]:
        return [c.at for c in self.calls if c.method == method and c.outcome == outcome]


@dataclass
class Run:
    elector: LeaderElector
    api: FakeLeaseApi
    clock: Clock
    started: threading.Event
    stopped: list[float]


def make(end: float = 120.0, *, latency: float = 0.01, **api: Any) -> Run:
    clock = Clock(end)
    fake = FakeLeaseApi(clock, latency=latency, **api)
    started, stopped = threading.Event(), []
    elector = LeaderElector(
        fake,  # type: ignore[arg-type]  # duck-typed: only request() is used
        namespace="ns",
        name="l",
        identity=ME,
        on_started=started.set,
        on_stopped=lambda: stopped.append(clock.now),
        lease_duration=LD,
        renew_deadline=RD,
        retry_period=RP,
        clock=clock,
        wall_clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        wait=clock.wait,
    )
    clock.on_end = elector._stopping.set  # as release() does
    return Run(elector, fake, clock, started, stopped)


def test_renewal_is_one_put_per_retry_period_without_a_get():
    """After creating the Lease, each renewal is a single PUT of the last written Lease,
    one retry period after the previous one; the Lease stays ours and the gate stays open."""
    run = make(60.0)
    run.elector.run()
    methods = [c.method for c in run.api.calls]
    assert methods[:2] == ["GET", "POST"]
    assert set(methods[2:]) == {"PUT"}
    puts = run.api.at("PUT")
    assert len(puts) >= 25
    assert all(b - a >= RP - 1e-9 for a, b in itertools.pairwise(puts))
    assert run.api.holder() == ME
    assert run.stopped == []
    assert run.started.wait(5)


def gate_open_fraction(api: FakeLeaseApi, start: float, end: float) -> float:
    """Share of [start, end) during which the gate was open: the last renewal answered by then
    was sent less than the renew deadline before."""
    done = [
        (c.at, c.at + api.latency)
        for c in api.calls
        if c.method in ("POST", "PUT") and c.outcome == "ok"
    ]
    steps, open_steps = 0, 0
    t = start
    while t < end:
        sent = max((s for s, answered in done if answered <= t), default=None)
        open_steps += sent is not None and t - sent < RD
        steps += 1
        t += 0.01
    return open_steps / steps


@pytest.mark.parametrize("latency", [1.0, 4.9, 5.0, 5.5, 8.0])
def test_slow_answers_acquire_and_keep_the_lease(latency: float):
    """Every answer ``latency`` seconds late (the fault tester's proxy: 5 s). Acquiring
    (GET + POST) and each renewal fit their budgets and the Lease is never lost. A renewal goes
    out as soon as the previous one is answered, so the last one sent is between one and two
    latencies old: up to half the renew deadline (5 s) the write gate is always open, beyond it
    for (renew deadline - latency) / latency of the time."""
    samples: list[bool] = []
    run = make(200.0, latency=latency)
    for t in range(30, 200, 1):
        run.clock.hooks.append((float(t), lambda: samples.append(run.elector.holds_lease())))
    run.elector.run()
    assert run.stopped == []
    assert run.api.holder() == ME
    assert len(run.api.at("PUT")) >= 170 / max(latency, RP) - 2
    expected = min(1.0, (RD - latency) / latency)
    assert gate_open_fraction(run.api, 30.0, 190.0) == pytest.approx(expected, abs=0.03)
    if 2 * latency < RD:  # sampled when each answer arrives, the worst moment
        assert all(samples)


def test_twelve_second_latency_still_acquires_but_cannot_renew():
    """At a latency above the renew deadline acquisition still succeeds (its budget is
    the lease duration), renewal cannot, so the Lease is lost; the gate never opened."""
    opened: list[bool] = []
    run = make(100.0, latency=12.0)
    run.clock.hooks.append((25.0, lambda: opened.append(run.elector.holds_lease())))
    run.elector.run()
    assert run.api.at("POST") == [12.0]  # taken: the GET and the POST each took 12 s
    assert opened == [False]  # sent 12 s before it was answered: never provably ours
    assert len(run.stopped) == 1


def test_retry_after_is_never_undercut_and_respects_the_deadline():
    """A renewal answered 429 with Retry-After 3 is tried again 3 s later, not after
    the 2 s retry period; one whose Retry-After does not fit the renew deadline is not retried:
    the Lease is lost without another request."""
    run = make(40.0)
    busy = Unavailable("too many requests", status=429, retry_after=3.0)
    hopeless = Unavailable("too many requests", status=429, retry_after=30.0)
    run.clock.hooks.append((10.0, lambda: run.api.script.extend([busy, busy])))
    run.clock.hooks.append((25.0, lambda: run.api.script.append(hopeless)))
    run.elector.run()
    failed = [c for c in run.api.calls if c.outcome == "Unavailable"]
    assert len(failed) == 3
    for call in failed[:2]:
        after = next(c for c in run.api.calls if c.at > call.at)
        assert after.at - call.at >= 3.0
    assert run.api.calls[-1] is failed[2]  # nothing sent after the hopeless Retry-After
    assert len(run.stopped) == 1


def test_a_renewal_failing_past_the_renew_deadline_loses_and_closes_the_gate():
    """Items 6, 7: renewals failing (no answer) are retried each retry period until the renew
    deadline; then on_stopped runs once and every write is refused."""
    run = make(100.0)

    def outage() -> None:
        run.api.fail = lambda _method: Unavailable("connection reset")

    run.clock.hooks.append((20.0, outage))
    run.elector.run()
    assert len(run.stopped) == 1
    assert 20.0 + RD - 2 * RP <= run.stopped[0] <= 20.0 + RD + RP
    with pytest.raises(NotLeader):
        run.elector.write_guard("PATCH", "tasks/status")
    assert not run.elector.holds_lease()


def test_a_paused_process_closes_the_gate_at_once_and_sends_nothing_on_resume():
    """SIGSTOP for 25 s while leading. On resume the write gate refuses at once (the
    last renewal was sent 25 s ago, beyond the renew deadline), the elector gives up without
    sending a Lease request, and the loss is reported."""
    run = make(100.0)
    seen: dict[str, Any] = {}

    def pause() -> None:
        seen["calls"] = len(run.api.calls)
        run.clock.now += 25.0  # stopped: the monotonic clock runs on
        try:
            run.elector.write_guard("DELETE", "jobs")
        except NotLeader as exc:
            seen["refused"] = str(exc)

    run.clock.hooks.append((30.0, pause))
    run.elector.run()
    assert "refused" in seen
    assert "does not hold the Lease" in seen["refused"]
    assert len(run.api.calls) == seen["calls"]  # not even a Lease request after resuming
    assert len(run.stopped) == 1


def test_an_answer_arriving_after_the_deadline_does_not_count():
    """A renewal whose answer arrives after the renew deadline (the process was paused
    mid-request) does not make this replica a leader again."""
    run = make(100.0)
    original = run.api.request
    paused: list[float] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if run.clock.now > 30.0 and not paused:
            paused.append(run.clock.now)
            run.clock.now += 25.0
        return result

    run.api.request = slow  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    run.elector.run()
    assert len(run.stopped) == 1
    assert not run.elector.holds_lease()


def test_a_follower_takes_a_lease_only_after_it_stood_still_for_the_lease_duration():
    """A Lease held by another replica is taken only once the follower has seen the same
    resourceVersion for leaseDurationSeconds; while the holder renews it is never taken."""
    run = make(200.0)
    run.api.hold(OTHER)
    renewals: list[float] = []

    def renew_other() -> None:
        if run.clock.now < 60.0:
            run.api.hold(OTHER)
            renewals.append(run.clock.now)
            run.clock.hooks.append((run.clock.now + RP, renew_other))

    run.clock.hooks.append((RP, renew_other))
    run.elector.run()
    taken = run.api.at("PUT")[0]
    assert taken >= renewals[-1] + LD
    assert taken <= renewals[-1] + LD + 2 * RP * 1.2 + 1
    assert run.api.holder() == ME


def test_a_conflict_on_renewal_loses_unless_the_lease_is_still_ours():
    """A renewal answered 409 reads the Lease once: held by another replica → lost at once; still
    ours (our previous write landed, its answer did not) → renewed from the fresh copy."""
    run = make(60.0)

    def our_write_landed() -> None:
        run.api._store(copy.deepcopy(run.api.lease))  # same holder, new resourceVersion

    run.clock.hooks.append((10.0, our_write_landed))
    run.clock.hooks.append((30.0, lambda: run.api.hold(OTHER)))
    run.elector.run()
    conflicts = [c.at for c in run.api.calls if c.outcome == "Conflict"]
    assert len(conflicts) == 2
    assert len(run.stopped) == 1
    assert 30.0 <= run.stopped[0] <= 30.0 + RP + 1


def test_release_clears_the_holder():
    """A graceful stop gives the Lease up (holderIdentity cleared) and closes the gate."""
    run = make(20.0)
    run.elector.run()
    run.elector.leading.set()  # run() ended by the fake clock's end, as on stop
    run.elector.release()
    assert run.api.holder() is None
    assert not run.elector.holds_lease()
    assert run.stopped == []


def test_timings_are_checked():
    """lease duration > renew deadline > retry period > 0, like client-go's checks."""
    with pytest.raises(ValueError, match="lease duration > renew deadline"):
        LeaderElector(
            object(),  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
            namespace="ns",
            name="l",
            identity=ME,
            on_started=lambda: None,
            on_stopped=lambda: None,
            lease_duration=10,
            renew_deadline=10,
        )
