"""Lease-held buckets (taskfsm/kube/buckets.py): the stable bucket of a key, the fair
share decision, the per-bucket write gate, and two electors sharing buckets through an in-memory
Lease API on the real clock with short timings."""

from __future__ import annotations

import copy
import itertools
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest

from taskfsm.kube.buckets import (
    MEMBER_LEASE_PREFIX,
    BucketElector,
    LeaseView,
    acting_in,
    bucket_lease_name,
    bucket_of,
    member_lease_name,
    plan,
    preference,
)
from taskfsm.kube.errors import AlreadyExists, Conflict, NotFound, NotLeader
from taskfsm.manager.ownership import Ownership

# -- the bucket of a key --------------------------------------------------------------------------


def test_bucket_of_is_fnv1a_and_the_same_in_every_process() -> None:
    """FNV-1a 32 of "a" is 0xe40c292c; a process with another hash seed computes the same
    buckets (Python's own hash() of a str would differ)."""
    assert bucket_of("a", 2**31) == 0xE40C292C % 2**31
    keys = [f"ns-{i}/task-{i}" for i in range(50)]
    here = [bucket_of(k, 12) for k in keys]
    code = f"from taskfsm.kube.buckets import bucket_of;print([bucket_of(k, 12) for k in {keys!r}])"
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == str(here)


def test_buckets_spread_task_names_evenly() -> None:
    counts = Counter(bucket_of(f"default/task-{i:04d}", 12) for i in range(1200))
    assert set(counts) == set(range(12))
    assert max(counts.values()) < 1.3 * 100
    assert min(counts.values()) > 0.7 * 100


# -- the fair share ---------------------------------------------------------------------------------

B = 12


def member(holder: str, first_seen: float = 0.0) -> tuple[str, LeaseView]:
    return member_lease_name(holder), LeaseView(holder, "1", first_seen, 15.0)


def bucket(
    index: int, holder: str, first_seen: float = 0.0, buckets: int = B
) -> tuple[str, LeaseView]:
    return bucket_lease_name(index, buckets), LeaseView(holder, "1", first_seen, 15.0)


def test_a_lone_replica_campaigns_for_every_bucket() -> None:
    decided = plan(
        identity="a", buckets=B, views=dict([member("a")]), held=set(), campaigning=set(), now=1
    )
    assert decided.share == B
    assert sorted(decided.acquire) == list(range(B))
    assert list(decided.acquire) == preference("a", B)


def test_three_live_replicas_share_four_each_and_surplus_is_released() -> None:
    views = dict([member("a"), member("b"), member("c")] + [bucket(i, "a") for i in range(B)])
    decided = plan(
        identity="a", buckets=B, views=views, held=set(range(B)), campaigning=set(), now=1
    )
    assert decided.live == {"a", "b", "c"}
    assert decided.share == 4
    assert decided.acquire == ()
    assert list(decided.release) == list(reversed(preference("a", B)))[:8]
    # b holds nothing and sees every bucket held (fresh) by a: it waits for the releases
    waiting = plan(identity="b", buckets=B, views=views, held=set(), campaigning=set(), now=1)
    assert waiting.acquire == ()
    assert waiting.share == 4


def test_a_dead_replicas_buckets_are_taken_and_it_no_longer_counts() -> None:
    """c stopped renewing at 0: after its lease duration its buckets are available and it is
    not live, though its membership Lease was seen changing later (first seen at 5)."""
    views = dict(
        [member("a", 10), member("b", 10), member("c", 5)]
        + [bucket(i, "a", 10) for i in range(4)]
        + [bucket(i, "b", 10) for i in range(4, 8)]
        + [bucket(i, "c", 0) for i in range(8, 12)]
    )
    early = plan(
        identity="a", buckets=B, views=views, held=set(range(4)), campaigning=set(), now=14
    )
    assert early.share == 4
    assert early.acquire == ()
    later = plan(
        identity="a", buckets=B, views=views, held=set(range(4)), campaigning=set(), now=15
    )
    assert later.live == {"a", "b"}
    assert later.share == 6
    assert len(later.acquire) == 2
    assert set(later.acquire) <= set(range(8, 12))


def test_campaigns_stop_when_taken_by_another_or_above_the_share() -> None:
    views = dict([member("a"), member("b"), bucket(3, "b", 0, buckets=4)])
    decided = plan(identity="a", buckets=4, views=views, held={0}, campaigning={1, 2, 3}, now=1)
    assert decided.share == 2
    assert 3 in decided.abandon  # b holds it, freshly
    assert len(set(decided.abandon) & {1, 2}) == 1  # one campaign fills the share
    assert decided.acquire == ()


def test_no_bucket_is_taken_while_leases_of_another_bucket_count_are_held() -> None:
    """A replica of B = 12 beside a live one of B = 6 (a rollout changing --buckets) takes
    nothing and stops campaigning, keeps what it holds; once the B = 6 Lease expires (or is
    released: no holder) it campaigns as usual."""
    other = bucket_lease_name(0, 6)
    views = dict([member("a"), member("old"), (other, LeaseView("old", "1", 0.0, 15.0))])
    waiting = plan(identity="a", buckets=B, views=views, held={1}, campaigning={2}, now=1)
    assert waiting.foreign == (other,)
    assert waiting.acquire == ()
    assert waiting.abandon == (2,)
    assert waiting.release == ()
    released = {**views, other: LeaseView("", "2", 0.0, 15.0)}
    going = plan(identity="a", buckets=B, views=released, held={1}, campaigning=set(), now=1)
    assert going.foreign == ()
    assert going.acquire != ()
    expired = plan(identity="a", buckets=B, views=views, held={1}, campaigning=set(), now=20)
    assert expired.foreign == ()
    assert expired.acquire != ()


def test_expired_membership_leases_of_others_are_stale() -> None:
    views = dict([member("a", 0), member("gone", 0)])
    decided = plan(identity="a", buckets=2, views=views, held=set(), campaigning=set(), now=20)
    assert decided.stale_members == (member_lease_name("gone"),)
    assert decided.live == {"a"}


# -- the write gate -------------------------------------------------------------------------------


def test_the_gate_refuses_writes_outside_a_bucket_and_for_buckets_not_held() -> None:
    elector = BucketElector(
        FakeLeases(),  # type: ignore[arg-type]  # the fake answers what the elector asks
        namespace="ns",
        buckets=4,
        identity="a",
        on_acquired=lambda _b: None,
        on_given_up=lambda _b, _e: None,
    )
    with pytest.raises(NotLeader, match="belongs to no bucket"):
        elector.write_guard("PATCH", "tasks/status")
    with acting_in(2), pytest.raises(NotLeader, match="does not hold bucket 2"):
        elector.write_guard("PATCH", "tasks/status")


def test_ownership_is_everything_unbucketed_and_nothing_before_the_election() -> None:
    assert Ownership(1).owns("ns/t")
    assert Ownership(1).bucket("ns/t") is None
    bucketed = Ownership(8)
    assert bucketed.bucket("ns/t") == bucket_of("ns/t", 8)
    assert not bucketed.owns("ns/t")


# -- two electors on an in-memory Lease API ---------------------------------------------------------


class FakeLeases:
    """Leases of one namespace behind ``Rest.request`` (GET, LIST, POST, PUT, DELETE with a
    resourceVersion precondition), thread-safe, answering at once."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self._versions = itertools.count(1)
        self._lock = threading.Lock()
        self.blocked: set[str] = set()
        """Holder identities whose requests fail (a replica cut off)."""

    def request(
        self,
        method: str,
        _res: Any,
        path: str,
        *,
        body: Any = None,
        deadline: float | None = None,
        verb: str | None = None,
    ) -> Any:
        from taskfsm.kube.errors import Unavailable

        identity = ((body or {}).get("spec") or {}).get("holderIdentity")
        if identity in self.blocked:
            raise Unavailable("cut off")
        name = path.rsplit("/", 1)[1]
        with self._lock:
            if verb == "LIST":
                return {"items": copy.deepcopy(list(self.leases.values()))}
            if method == "GET":
                if name not in self.leases:
                    raise NotFound("not found")
                return copy.deepcopy(self.leases[name])
            if method == "POST":
                name = body["metadata"]["name"]
                if name in self.leases:
                    raise AlreadyExists("exists", reason="AlreadyExists")
                return self._store(name, body)
            current = self.leases.get(name)
            if current is None:
                raise NotFound("not found")
            version = current["metadata"]["resourceVersion"]
            if method == "DELETE":
                wanted = ((body or {}).get("preconditions") or {}).get("resourceVersion")
                if wanted and wanted != version:
                    raise Conflict("changed")
                del self.leases[name]
                return {}
            if body["metadata"].get("resourceVersion") != version:
                raise Conflict("the object has been modified")
            return self._store(name, body)

    def _store(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        self.leases[name] = stored
        return copy.deepcopy(stored)

    def holders(self, buckets: int) -> list[str]:
        with self._lock:
            return [
                ((self.leases.get(bucket_lease_name(i, buckets)) or {}).get("spec") or {}).get(
                    "holderIdentity"
                )
                or ""
                for i in range(buckets)
            ]


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def elector(api: FakeLeases, identity: str, events: list[tuple[str, int, str]]) -> BucketElector:
    return BucketElector(
        api,  # type: ignore[arg-type]  # the fake answers what the elector asks
        namespace="ns",
        buckets=4,
        identity=identity,
        on_acquired=lambda b: events.append((identity, b, "acquired")),
        on_given_up=lambda b, e: events.append((identity, b, e)),
        lease_duration=1.5,
        renew_deadline=1.0,
        retry_period=0.2,
    )


def test_two_electors_split_the_buckets_then_one_takes_all_when_the_other_stops() -> None:
    api, events = FakeLeases(), []
    a = elector(api, "a", events).start()
    try:
        wait_until(lambda: a.held() == [0, 1, 2, 3], 5, "a holds every bucket")
        b = elector(api, "b", events).start()
        wait_until(lambda: len(a.held()) == 2 and len(b.held()) == 2, 5, "two each")
        assert sorted(api.holders(4)) == ["a", "a", "b", "b"]
        assert sum(e[2] == "released" for e in events if e[0] == "a") == 2
        b.release()  # graceful: at once, and its membership goes
        assert member_lease_name("b") not in api.leases
        wait_until(lambda: a.held() == [0, 1, 2, 3], 3, "a takes b's buckets back")
        assert [e for e in events if e[0] == "b" and e[2] == "lost"] == []
    finally:
        a.release()
    assert api.holders(4) == ["", "", "", ""]
    assert not any(name.startswith(MEMBER_LEASE_PREFIX) for name in api.leases)


def test_a_cut_off_elector_stops_holding_before_the_other_takes_over() -> None:
    """b's Lease writes fail: each of its buckets stops counting as held a renew deadline after
    its last renewal, and a takes it no sooner than a lease duration after it last changed."""
    api, events = FakeLeases(), []
    a = elector(api, "a", events).start()
    b = elector(api, "b", events).start()
    try:
        wait_until(lambda: len(a.held()) == 2 and len(b.held()) == 2, 8, "two each")
        taken_from_b = [i for i, h in enumerate(api.holders(4)) if h == "b"]
        api.blocked.add("b")
        cut = time.monotonic()
        released_by_b: dict[int, float] = {}
        acquired_by_a: dict[int, float] = {}
        while time.monotonic() - cut < 4 and len(acquired_by_a) < len(taken_from_b):
            now = time.monotonic()
            for i in taken_from_b:
                if i not in released_by_b and not b.holds(i):
                    released_by_b[i] = now
                if i not in acquired_by_a and api.holders(4)[i] == "a":
                    acquired_by_a[i] = now
            time.sleep(0.01)
        assert set(acquired_by_a) == set(taken_from_b)
        for i in taken_from_b:
            assert released_by_b[i] < acquired_by_a[i]
    finally:
        a.release()
        b.release()


# -- the flags ------------------------------------------------------------------------------------


def test_controllers_flag_accepts_the_three_names_and_refuses_others() -> None:
    from taskfsm.cli.run import parse_controllers
    from taskfsm.manager.settings import Settings, check

    assert parse_controllers("task, mpe") == {"task", "mpe"}
    assert parse_controllers("task,workflow,mpe") == {"task", "workflow", "mpe"}
    check(Settings(controllers=parse_controllers("task, mpe")))
    with pytest.raises(ValueError, match="unknown controller"):
        check(Settings(controllers=parse_controllers("task,jobs")))
    with pytest.raises(ValueError, match="none given"):
        check(Settings(controllers=parse_controllers(",")))
