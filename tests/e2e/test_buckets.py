"""Several active replicas sharing the Tasks by Lease-held buckets: ``taskfsm run
--leader-elect --buckets B`` replicas as separate processes on the real control plane, with
short Lease timings (:data:`taskfsm_dev.replicas.FAST_TIMINGS`).

Who reconciled what comes from each replica's JSON debug log (one ``reconcile`` line per pass,
with the key and its bucket, and a line per bucket acquired, released or lost):
:func:`taskfsm_dev.replicas.ownership_problems` checks that no two replicas held a bucket at
once and that every reconcile of a Task or Workflow was made by the holder of its bucket."""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from taskfsm.api import constants as c
from taskfsm.kube.buckets import JITTER, bucket_lease_name, bucket_of
from taskfsm.kube.errors import AlreadyExists
from taskfsm_dev import objects
from taskfsm_dev.process import ControllerProcess
from taskfsm_dev.proxies import ApiProxy, HttpApiProxy, Request
from taskfsm_dev.replicas import (
    FAST_TIMINGS,
    acquired_at,
    bucket_holders,
    held_by,
    ownership_problems,
    reconciles,
    start_replicas,
    wait_balanced,
)
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit, write_kubeconfig

LEASE, RENEW, RETRY = FAST_TIMINGS
TAKEOVER_BOUND = LEASE + 2 * RETRY * (1 + JITTER) + 1.0
"""A dead replica's buckets are taken within the lease duration after its last renewal (at
most a retry period before the kill), noticed on the next LIST (a retry period, jittered), plus
the GET and PUT of the take-over and a second of scheduling slack on a busy machine."""


def setup_objects(cluster, run_seconds: float = 0.2) -> None:
    cluster.create(objects.function("fn", run_seconds=run_seconds))
    cluster.create(objects.local_mpe("local"))


def create_tasks(cluster, names: Sequence[str], workflows: int = 10, prefix: str = "wf") -> None:
    """``names`` as Tasks spread over ``workflows`` Workflows ``<prefix>-<i>`` (created first
    when missing), 8 at a time. A Workflow with no active Task for 20 s finishes and ends
    Tasks created in it later, so a later burst takes another prefix."""
    for i in range(min(workflows, len(names))):
        with contextlib.suppress(AlreadyExists):
            cluster.create(objects.workflow(f"{prefix}-{i}"))

    def create(pair: tuple[int, str]) -> None:
        index, name = pair
        workflow = f"{prefix}-{index % workflows}"
        cluster.create(
            objects.task(name, workflow_name=workflow, function_name="fn", mpe_name="local")
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, enumerate(names)))


def phases(cluster) -> dict[str, str]:
    return {
        t["metadata"]["name"]: (t.get("status") or {}).get("phase") or "" for t in cluster.tasks()
    }


def wait_all_succeeded(cluster, names: Sequence[str], timeout: float) -> None:
    def done() -> bool:
        seen = phases(cluster)
        return all(seen.get(n) == "Succeeded" for n in names)

    wait_for(done, timeout=timeout, interval=1.0, what=f"{len(names)} Tasks Succeeded")


def holders_of(cluster, namespace: str, buckets: int, proc: ControllerProcess) -> list[int]:
    return [
        i for i, h in enumerate(bucket_holders(cluster.rest, namespace, buckets)) if h == proc.name
    ]


def assert_no_stuck_finalizers(cluster, names: Sequence[str]) -> None:
    """No Job of a finished Task still holds job-protection, and every Task, deleted, goes."""
    held = [
        j["metadata"]["name"]
        for j in cluster.jobs()
        if c.FINALIZER_JOB_PROTECTION in (j["metadata"].get("finalizers") or [])
    ]
    assert held == [], f"Jobs of finished Tasks still hold job-protection: {held[:10]}"
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(cluster.delete_task, names))
    wait_for(lambda: cluster.tasks() == [], timeout=60, interval=0.5, what="every Task gone")


def test_three_replicas_share_twelve_buckets_and_each_task_is_reconciled_by_its_holder(
    cluster, kubelet, start_controller, control_plane, namespace
):
    """3 replicas, B = 12: every bucket is held by exactly one replica, four each, within two
    lease durations of all being ready; 300 Tasks all succeed with exactly one Job each; every
    Task and Workflow reconcile was made by the holder of its key's bucket, every Task was
    reconciled by the replica holding its bucket, and no bucket was ever held by two."""
    setup_objects(cluster)
    procs = start_replicas(
        None,  # the installed controller (start_controller)
        3,
        buckets=12,
        lease_namespace=namespace,
        namespace=namespace,
        start=start_controller,
    )
    took = wait_balanced(cluster.rest, namespace, 12, procs, timeout=2 * LEASE)
    print(f"balanced {took:.1f}s after all 3 were ready (lease duration {LEASE:g}s)")
    holders = bucket_holders(cluster.rest, namespace, 12)
    names = [f"t{i:03d}" for i in range(300)]
    started = time.monotonic()
    create_tasks(cluster, names)
    wait_all_succeeded(cluster, names, timeout=240)
    print(f"300 Tasks Succeeded {time.monotonic() - started:.1f}s after the first was created")
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
    assert bucket_holders(cluster.rest, namespace, 12) == holders, "buckets moved without a cause"
    assert ownership_problems(procs) == []
    by_replica = {p.name: {r.key for r in reconciles(p) if r.controller == "task"} for p in procs}
    for name in names:
        key = f"{namespace}/{name}"
        holder = holders[bucket_of(key, 12)]
        assert key in by_replica[holder], f"{key} was never reconciled by its holder {holder}"
        assert all(key not in keys for p, keys in by_replica.items() if p != holder)
    counts = {p.name: len(by_replica[p.name]) for p in procs}
    print(f"Tasks reconciled per replica: {counts}")
    assert all(n > 0 for n in counts.values())


def test_a_replica_holding_no_bucket_is_ready_and_reconciles_nothing(
    cluster, kubelet, start_controller, control_plane, namespace
):
    """3 replicas, B = 2: one holds no bucket; its /readyz answers 200, and Tasks created meanwhile
    succeed without it reconciling any."""
    setup_objects(cluster)
    procs = start_replicas(
        None,  # the installed controller (start_controller)
        3,
        buckets=2,
        lease_namespace=namespace,
        namespace=namespace,
        start=start_controller,
    )
    wait_balanced(cluster.rest, namespace, 2, procs, timeout=2 * LEASE)
    idle = [p for p in procs if held_by(p) == 0]
    assert len(idle) == 1
    names = [f"t{i}" for i in range(10)]
    create_tasks(cluster, names, workflows=2)
    wait_all_succeeded(cluster, names, timeout=60)
    assert idle[0].probe("/readyz")[0] == 200
    assert held_by(idle[0]) == 0
    assert [r for r in reconciles(idle[0]) if r.controller != "mediaprocessingentity"] == []
    assert ownership_problems(procs) == []


def test_sigkill_moves_buckets_within_the_lease_and_sigterm_releases_them_at_once(
    cluster, kubelet, start_controller, control_plane, namespace
):
    """3 replicas, B = 12, a burst of 90 Tasks. SIGKILL one replica once Jobs are being made: its
    buckets are held by the two others within the lease duration + a retry period (and the
    LIST that notices it); every Task finishes with one Job. Then, during a second burst,
    SIGTERM another: it exits 0 and the last replica holds its buckets sooner than any Lease
    could expire (the lease duration). No Job keeps job-protection, every Task deleted goes."""
    setup_objects(cluster)
    procs = start_replicas(
        None,  # the installed controller (start_controller)
        3,
        buckets=12,
        lease_namespace=namespace,
        namespace=namespace,
        start=start_controller,
    )
    wait_balanced(cluster.rest, namespace, 12, procs, timeout=2 * LEASE)
    survivor, stopped, victim = procs
    names = [f"k{i:03d}" for i in range(90)]
    creator = threading.Thread(target=create_tasks, args=(cluster, names))
    creator.start()
    wait_for(lambda: len(cluster.jobs()) >= 20, timeout=60, interval=0.1, what="20 Jobs")
    moving = holders_of(cluster, namespace, 12, victim)
    assert len(moving) == 4
    victim.kill()
    killed = time.time()  # wall clock: compared with the Leases' acquireTime
    others = {survivor.name, stopped.name}
    wait_for(
        lambda: all(bucket_holders(cluster.rest, namespace, 12)[i] in others for i in moving),
        timeout=TAKEOVER_BOUND + 10,
        interval=0.05,
        what="the killed replica's buckets taken",
    )
    # When the holders took the buckets, as they wrote it: the test's polling adds nothing.
    kill_handover = acquired_at(cluster.rest, namespace, 12, moving) - killed
    print(f"SIGKILL handover: {kill_handover:.2f}s (lease {LEASE:g}s, retry {RETRY:g}s)")
    assert kill_handover <= TAKEOVER_BOUND
    creator.join()
    wait_all_succeeded(cluster, names, timeout=180)
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []

    more = [f"m{i:03d}" for i in range(30)]
    creator = threading.Thread(target=create_tasks, args=(cluster, more, 10, "wf2"))
    creator.start()
    wait_balanced(cluster.rest, namespace, 12, [survivor, stopped], timeout=3 * LEASE)
    moving = holders_of(cluster, namespace, 12, stopped)
    assert stopped.popen is not None
    stopped.popen.send_signal(signal.SIGTERM)
    terminated = time.monotonic()
    wait_for(
        lambda: all(
            bucket_holders(cluster.rest, namespace, 12)[i] == survivor.name for i in moving
        ),
        timeout=LEASE + 10,
        interval=0.05,
        what="the terminated replica's buckets taken",
    )
    term_handover = time.monotonic() - terminated
    print(f"SIGTERM handover: {term_handover:.2f}s (lease {LEASE:g}s, retry {RETRY:g}s)")
    assert term_handover < LEASE, "taken no sooner than an expiry: the buckets were not released"
    assert stopped.terminate(30) == 0
    creator.join()
    wait_all_succeeded(cluster, names + more, timeout=180)
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
    assert ownership_problems(procs) == []
    assert survivor.metric("taskfsm_buckets_held") == 12
    assert_no_stuck_finalizers(cluster, names + more)


def test_scaling_one_to_three_to_one_during_a_run_rebalances_and_loses_nothing(
    cluster, kubelet, start_controller, control_plane, namespace
):
    """One replica holds all 12 buckets while Tasks keep coming; two more start: the first
    releases its surplus and each ends with four; both are stopped again (SIGTERM): the first
    holds all 12 once more. Every Task succeeds with exactly one Job, and no bucket was held by
    two replicas or worked on by one not holding it."""
    setup_objects(cluster)
    [first] = start_replicas(
        None,  # the installed controller (start_controller)
        1,
        buckets=12,
        lease_namespace=namespace,
        namespace=namespace,
        start=start_controller,
    )
    wait_balanced(cluster.rest, namespace, 12, [first], timeout=2 * LEASE)
    names = [f"s{i:03d}" for i in range(80)]
    stop = threading.Event()

    def trickle() -> None:
        for start in range(0, len(names), 5):
            create_tasks(cluster, names[start : start + 5])
            if stop.wait(1.0):
                return

    creator = threading.Thread(target=trickle)
    creator.start()
    more = start_replicas(
        None,  # the installed controller (start_controller)
        2,
        buckets=12,
        lease_namespace=namespace,
        namespace=namespace,
        start=start_controller,
        first=1,
    )
    up = wait_balanced(cluster.rest, namespace, 12, [first, *more], timeout=4 * LEASE)
    print(f"1 -> 3: balanced {up:.1f}s after the new replicas were ready")
    for proc in more:
        assert proc.terminate(30) == 0
    down = wait_balanced(cluster.rest, namespace, 12, [first], timeout=2 * LEASE)
    print(f"3 -> 1: balanced {down:.1f}s after both had exited")
    creator.join()
    wait_all_succeeded(cluster, names, timeout=180)
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
    assert ownership_problems([first, *more]) == []
    assert first.metric("taskfsm_bucket_handovers_total", event="released") >= 8
    assert first.metric("taskfsm_bucket_handovers_total", event="lost") == 0
    for proc in more:
        assert {r.controller for r in reconciles(proc)} >= {"task"}, f"{proc.name} did no work"


def lease_puts(log: list[Request], bucket: int, buckets: int) -> list[Request]:
    name = bucket_lease_name(bucket, buckets)
    return [r for r in log if r.method == "PUT" and r.path.split("?")[0].endswith(f"/{name}")]


def task_of(request: Request) -> str | None:
    """The Task a request's path names (``.../tasks/<name>[/status]``), else None."""
    parts = request.path.split("?")[0].split("/")
    if "tasks" in parts and parts.index("tasks") + 1 < len(parts):
        return parts[parts.index("tasks") + 1]
    return None


def test_a_replica_cut_off_stops_writing_its_buckets_before_another_takes_them(
    cluster, kubelet, start_controller, control_plane, namespace, tmp_path, installed_token
):
    """Replica a reaches the API server through a request-logging proxy and a TCP proxy that is
    stalled (open connections and new ones go silent) while a burst of Tasks runs; b through a
    logging proxy of its own. For each of a's buckets: a sent its last write no later than a
    renew deadline after its last successful renewal (its write gate), and b took the Lease
    only after that; no Task was written by both replicas within one second; after the stall
    every Task succeeds with one Job."""
    setup_objects(cluster, run_seconds=1.0)
    buckets = 6
    with (
        ApiProxy(control_plane.server) as tcp,
        HttpApiProxy(tcp.url, control_plane.ca_file) as pa,
        HttpApiProxy(control_plane.server, control_plane.ca_file) as pb,
    ):
        paths = [
            write_kubeconfig(tmp_path / f"{n}.kubeconfig", p.kubeconfig(installed_token()))
            for n, p in (("a", pa), ("b", pb))
        ]
        [a] = start_replicas(
            paths[0],
            1,
            buckets=buckets,
            lease_namespace=namespace,
            namespace=namespace,
            start=start_controller,
            prefix="a",
        )
        [b] = start_replicas(
            paths[1],
            1,
            buckets=buckets,
            lease_namespace=namespace,
            namespace=namespace,
            start=start_controller,
            prefix="b",
        )
        wait_balanced(cluster.rest, namespace, buckets, [a, b], timeout=3 * LEASE)
        mine = holders_of(cluster, namespace, buckets, a)
        names = [f"c{i:02d}" for i in range(60)]
        create_tasks(cluster, names, workflows=4)
        wait_for(lambda: len(cluster.jobs()) >= 10, timeout=60, interval=0.05, what="10 Jobs")
        tcp.stall(new_connections="stall")
        stalled = time.monotonic()
        wait_for(
            lambda: all(
                bucket_holders(cluster.rest, namespace, buckets)[i] == b.name for i in mine
            ),
            timeout=TAKEOVER_BOUND + 10,
            interval=0.1,
            what="b holds a's buckets",
        )
        time.sleep(2.0)
        tcp.restore()
        restored = time.monotonic()
        print(f"a stalled for {restored - stalled:.1f}s; b took its buckets {mine}")
        wait_all_succeeded(cluster, names, timeout=180)
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
    a_log, b_log = pa.requests(), pb.requests()
    gate_closed: dict[int, float] = {}
    for i in mine:
        renewed = [
            r for r in lease_puts(a_log, i, buckets) if r.status == 200 and r.received < stalled
        ]
        gate_closed[i] = max(r.received for r in renewed) + RENEW
        taken = [
            r for r in lease_puts(b_log, i, buckets) if r.status == 200 and r.received > stalled
        ]
        assert taken, f"b never took bucket {i}"
        print(
            f"bucket {i}: a's gate closed {gate_closed[i] - stalled:.2f}s after the stall, "
            f"b took it {taken[0].received - stalled:.2f}s after"
        )
        assert gate_closed[i] < taken[0].received
    late = []
    for r in a_log:
        if not r.write or r.lease or not stalled <= r.received <= restored:
            continue
        task = task_of(r)
        bound = (
            gate_closed[bucket_of(f"{namespace}/{task}", buckets)]
            if task and bucket_of(f"{namespace}/{task}", buckets) in gate_closed
            else max(gate_closed.values())
        )
        if r.received > bound:
            late.append(f"{r.method} {r.path} {r.received - stalled:.2f}s after the stall")
    assert late == [], f"a wrote after its gate closed: {late[:10]}"
    landed: dict[str, list[tuple[float, str]]] = {}
    for who, log in (("a", a_log), ("b", b_log)):
        for r in log:
            task = task_of(r)
            if r.write and task and 200 <= r.status < 300 and r.received < restored:
                landed.setdefault(task, []).append((r.received, who))
    close = [
        (task, x, y)
        for task, writes in landed.items()
        for x, y in itertools.combinations(sorted(writes), 2)
        if x[1] != y[1] and abs(x[0] - y[0]) < 1.0
    ]
    assert close == [], f"a Task written by both replicas within a second: {close[:5]}"
    assert ownership_problems([a, b]) == []
