"""Leader election under a slow API server, under 429s on the Lease, and with a paused leader
: two ``taskfsm run --leader-elect`` replicas, the real control plane,
and an HTTP proxy (:class:`taskfsm_dev.proxies.HttpApiProxy`) that delays or answers
requests and logs every request a replica sends."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taskfsm.kube.informer import Informer
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import JOBS, LEASES, Rest
from taskfsm_dev import objects
from taskfsm_dev.process import ControllerProcess
from taskfsm_dev.proxies import HttpApiProxy, Reply, Request
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit, write_kubeconfig

LEASE = "taskfsm-task-controller"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15, 10, 2
TERMINAL = ("Succeeded", "Failed")


def holder(cluster) -> str | None:
    try:
        lease = cluster.rest.get(LEASES, cluster.namespace, LEASE)
    except Exception:
        return None
    return (lease.get("spec") or {}).get("holderIdentity")


def setup_objects(cluster, run_seconds: float = 0.5) -> None:
    cluster.create(objects.function("fn", run_seconds=run_seconds))
    cluster.create(objects.local_mpe("local"))


def create_task(cluster, name: str) -> None:
    """A Task in a Workflow of its own (a finished Workflow would end later Tasks in it)."""
    cluster.create(objects.workflow(f"wf-{name}"))
    cluster.create(
        objects.task(name, workflow_name=f"wf-{name}", function_name="fn", mpe_name="local")
    )


def leader_status(proc: ControllerProcess) -> float | None:
    """The replica's ``leader_election_master_status``; None when it does not answer."""
    if not proc.running:
        return None
    try:
        return proc.metric("leader_election_master_status")
    except (urllib.error.URLError, OSError):
        return None


@dataclass
class Sample:
    at: float
    holder: str | None
    leading: dict[str, float | None]


@dataclass
class Sampler:
    """Every half second: the Lease holder (read directly) and each replica's leader gauge."""

    cluster: Any
    replicas: dict[str, ControllerProcess]
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        threading.Thread(target=self._run, name="leader-sampler", daemon=True).start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            leading = {name: leader_status(proc) for name, proc in self.replicas.items()}
            self.samples.append(Sample(time.monotonic(), holder(self.cluster), leading))

    def stop(self) -> list[Sample]:
        self._stop.set()
        return self.samples


def assert_one_stable_leader(samples: list[Sample], identities: dict[str, str]) -> str:
    """From the first sample with a leader on: exactly one replica reports leading, it is the
    Lease holder, and the holder never changes. Returns the leader's name."""
    first = next(i for i, s in enumerate(samples) if any(v == 1 for v in s.leading.values()))
    leader = next(name for name, v in samples[first].leading.items() if v == 1)
    bad = [
        s
        for s in samples[first + 1 :]
        if s.leading.get(leader) != 1
        or any(v != 0 for name, v in s.leading.items() if name != leader)
        or s.holder != identities[leader]
    ]
    assert bad == [], f"leadership not stable: {bad[:5]}"
    return leader


def start_pair(
    start_controller, namespace, kubeconfigs: dict[str, Any], prefix: str
) -> dict[str, ControllerProcess]:
    procs = {
        name: start_controller(
            kubeconfig=path,
            leader_elect=True,
            lease_namespace=namespace,
            identity=f"{prefix}-{name}",
            name=name,
            wait_ready=False,
        )
        for name, path in kubeconfigs.items()
    }
    for proc in procs.values():
        proc.wait_ready(120)
    return procs


def test_slow_api_server_keeps_one_leader_and_every_task_gets_its_job(
    cluster, kubelet, start_controller, control_plane, namespace, tmp_path, installed_token
):
    """Behind a proxy that holds every answer back 5 s, one of two replicas acquires the
    Lease (each Lease request may take the lease duration), keeps it (renewals fit the renew
    deadline), the other never takes it, neither exits, and every Task gets its Job and succeeds."""
    setup_objects(cluster)
    with HttpApiProxy(control_plane.server, control_plane.ca_file, delay=5.0) as proxy:
        path = write_kubeconfig(tmp_path / "slow.kubeconfig", proxy.kubeconfig(installed_token()))
        procs = start_pair(start_controller, namespace, {"a": path, "b": path}, "slow")
        sampler = Sampler(cluster, procs).start()
        started = time.monotonic()
        wait_for(lambda: holder(cluster) is not None, timeout=60, what="a Lease holder")
        print(f"first leader {time.monotonic() - started:.1f}s after both were ready")
        names = [f"slow-{i}" for i in range(3)]
        for name in names:
            create_task(cluster, name)
        wait_for(
            lambda: all(cluster.phase(n) == "Succeeded" for n in names),
            timeout=200,
            what="every Task Succeeded",
        )
        print(f"all Tasks Succeeded {time.monotonic() - started:.1f}s after both were ready")
        wait_for(lambda: time.monotonic() - started > 45, timeout=60, what="45 s of observation")
        samples = sampler.stop()
        assert all(proc.running for proc in procs.values()), "a replica exited"
        leader = assert_one_stable_leader(samples, {n: f"slow-{n}" for n in procs})
        leases = proxy.requests(lambda r: r.lease)
        print(
            f"leader {leader}; {len(samples)} samples; {len(leases)} Lease requests; "
            f"{sum(r.method == 'PUT' for r in leases)} PUTs"
        )
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []


def every_fifth_lease_request_passes(retry_after: int) -> Callable[[Request], Reply | None]:
    """Answer 4 of every 5 Lease requests (80 %) with 429 and ``Retry-After``, deterministically,
    so a test of "never flaps" checks the elector and not the dice."""
    count = [0]
    lock = threading.Lock()
    body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":"too many requests, please try again later"}'

    def fault(request: Request) -> Reply | None:
        if not request.lease:
            return None
        with lock:
            count[0] += 1
            passes = count[0] % 5 == 0
        if passes:
            return None
        return Reply(
            429, {"Retry-After": str(retry_after), "Content-Type": "application/json"}, body
        )

    return fault


def test_lease_requests_answered_429_keep_one_leader_and_respect_retry_after(
    cluster, start_controller, control_plane, namespace, tmp_path, installed_token
):
    """With 80 % of every replica's Lease requests answered 429 ``Retry-After: 1``, a
    leader is elected and keeps the Lease for a minute (no exit, no change of holder), and no
    replica sends a Lease request sooner than 1 s after a 429 told it to wait."""
    with (
        HttpApiProxy(
            control_plane.server, control_plane.ca_file, fault=every_fifth_lease_request_passes(1)
        ) as pa,
        HttpApiProxy(
            control_plane.server, control_plane.ca_file, fault=every_fifth_lease_request_passes(1)
        ) as pb,
    ):
        paths = {
            name: write_kubeconfig(tmp_path / f"{name}.kubeconfig", p.kubeconfig(installed_token()))
            for name, p in (("a", pa), ("b", pb))
        }
        procs = start_pair(start_controller, namespace, paths, "busy")
        sampler = Sampler(cluster, procs).start()
        wait_for(lambda: holder(cluster) is not None, timeout=60, what="a Lease holder")
        elected = time.monotonic()
        wait_for(
            lambda: time.monotonic() - elected > 60, timeout=75, what="a minute of observation"
        )
        samples = sampler.stop()
        assert all(proc.running for proc in procs.values()), "a replica exited"
        assert_one_stable_leader(samples, {n: f"busy-{n}" for n in procs})
        for name, proxy in (("a", pa), ("b", pb)):
            leases = proxy.requests(lambda r: r.lease)
            injected = [r for r in leases if r.injected]
            assert len(injected) >= 0.7 * len(leases) > 0
            gaps = [
                later.received - earlier.answered
                for earlier, later in itertools.pairwise(leases)
                if earlier.injected
            ]
            print(
                f"{name}: {len(leases)} Lease requests, {len(injected)} answered 429, "
                f"shortest wait after a 429 {min(gaps):.3f}s"
            )
            assert min(gaps) >= 1.0, f"{name} retried sooner than Retry-After"


class PhaseHistory:
    """Every phase each Task was seen in, in order, from a watch opened before the Tasks."""

    def __init__(self, rest: Rest, namespace: str) -> None:
        self.phases: dict[str, list[str]] = {}
        self.job_deletions: list[str] = []
        self._lock = threading.Lock()
        self.tasks = Informer(rest, TASKS, namespace=namespace, watch_timeout=60, read_margin=10)
        self.tasks.add_handler(self._on_task)
        self.jobs = Informer(rest, JOBS, namespace=namespace, watch_timeout=60, read_margin=10)
        self.jobs.add_handler(self._on_job)

    def _on_task(self, _event: str, task: dict[str, Any]) -> None:
        phase = (task.get("status") or {}).get("phase") or ""
        with self._lock:
            seen = self.phases.setdefault(task["metadata"]["name"], [])
            if not seen or seen[-1] != phase:
                seen.append(phase)

    def _on_job(self, event: str, job: dict[str, Any]) -> None:
        if event == "DELETED":
            with self._lock:
                self.job_deletions.append(job["metadata"]["name"])

    def start(self) -> PhaseHistory:
        for informer in (self.tasks, self.jobs):
            informer.start()
            assert informer.wait_synced(30)
        return self

    def stop(self) -> None:
        self.tasks.stop()
        self.jobs.stop()

    def regressions(self) -> dict[str, list[str]]:
        """Tasks seen going from a terminal phase to any other."""
        with self._lock:
            return {
                name: seen
                for name, seen in self.phases.items()
                if any(a in TERMINAL and b != a for a, b in itertools.pairwise(seen))
            }


def test_a_paused_leader_writes_nothing_when_it_resumes(
    cluster,
    kubelet,
    start_controller,
    control_plane,
    api_client,
    namespace,
    tmp_path,
    installed_token,
):
    """The leader is SIGSTOPped for 25 s while it works through 20 Tasks; the follower
    takes the Lease and finishes them. On SIGCONT the old leader starts no write (its last
    renewal is 25 s old, so its write gate is shut; a write already past the gate when it was
    stopped is refused by its deterministic name or precondition), reports the lost Lease and
    exits 1; no Task
    ever goes back from Succeeded or Failed, no Job is deleted, every Task has its one Job."""
    setup_objects(cluster, run_seconds=2.0)
    history = PhaseHistory(Rest(api_client), namespace).start()
    try:
        with HttpApiProxy(control_plane.server, control_plane.ca_file) as proxy:
            path_a = write_kubeconfig(
                tmp_path / "a.kubeconfig", proxy.kubeconfig(installed_token())
            )
            a = start_controller(
                kubeconfig=path_a,
                leader_elect=True,
                lease_namespace=namespace,
                identity="paused-a",
                name="a",
            )
            wait_for(lambda: leader_status(a) == 1, timeout=20, what="a leads")
            b = start_controller(
                leader_elect=True, lease_namespace=namespace, identity="paused-b", name="b"
            )
            names = [f"t{i:02d}" for i in range(20)]
            for name in names:
                create_task(cluster, name)
            wait_for(lambda: len(cluster.jobs()) >= 3, timeout=30, interval=0.02, what="a few Jobs")
            os.kill(a.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            wait_for(
                lambda: leader_status(b) == 1,
                timeout=LEASE_DURATION + 3 * RETRY_PERIOD + 5,
                what="b leads",
            )
            print(f"b leads {time.monotonic() - stopped:.1f}s after a was stopped")
            time.sleep(max(0.0, 25.0 - (time.monotonic() - stopped)))
            resumed = time.monotonic()
            os.kill(a.pid, signal.SIGCONT)
            wait_for(lambda: not a.running, timeout=30, what="a exits after resuming")
            print(f"a exited {time.monotonic() - resumed:.2f}s after SIGCONT")
            assert a.returncode == 1
            assert "lost the Lease" in a.log_text()
            late = proxy.requests(lambda r: r.write and r.received > resumed)
            # An Event whose POST had passed the gate the moment the process was stopped may
            # still go out when it resumes (the one window the gate cannot close); Events change
            # no object. Every write that changes state is refused, or would need preconditions.
            # Likewise a write a worker had passed the gate with when the process was stopped
            # (one per worker at most) may go out: it must be refused by what protects it, the
            # deterministic name (AlreadyExists) or its precondition (409/422), never land.
            state_writes = [r for r in late if "/events" not in r.path]
            landed = [r for r in state_writes if r.status not in (409, 422)]
            assert landed == [], f"the resumed replica's writes landed: {landed[:10]}"
            # taskfsm run's default of 4 Task workers, plus the Workflow worker
            assert len(state_writes) <= 5, f"more than were in flight: {state_writes[:10]}"
            assert len(late) - len(state_writes) <= 1, f"more than one Event in flight: {late}"
            during = proxy.requests(lambda r: r.write and stopped + 1.0 < r.received <= resumed)
            assert during == []
            print(
                f"a sent {len(proxy.requests(lambda r: r.write))} writes in all, none after SIGCONT"
            )
        wait_for(
            lambda: all(cluster.phase(n) in TERMINAL for n in names),
            timeout=60,
            what="every Task finished",
        )
        assert {cluster.phase(n) for n in names} == {"Succeeded"}
        assert b.running
        assert leader_status(b) == 1
    finally:
        history.stop()
    assert history.regressions() == {}
    assert history.job_deletions == []
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
