"""Crash points: the controller dies right after each API write of a Task's life, and a restart
finishes the work with nothing lost and nothing duplicated.

Each case runs ``taskfsm run`` with ``TASKFSM_CRASH_AFTER`` naming one write (``tests.support.crashpoints``
exits 137 right after it succeeded), drives a succeeding and a failing Task (each in its own
Workflow) through creation, their terminal phase and deletion, waits for the crash, restarts the
process without the variable and checks the invariants of :class:`tests.support.chaos.Fleet`:
exactly one Job per Task over its whole life, its Secret owned by it, the right terminal phase,
deletion completes, no finalizer left behind.

The writes of one life, in order (``test_crash_points_cover_every_write`` checks the list
against a recorded lifecycle): Task metadata (finalizer, Workflow owner and labels) → Job →
Secret → status Running → status terminal → Job finalizer released → (Task deleted) Job deleted →
Task finalizer removed; plus Events and the Workflow controller's writes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client

from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.waiting import wait_for
from tests.support import identity
from tests.support.chaos import (
    CRASH_ENV,
    CRASH_EXIT,
    FAST_WATCH_ARGS,
    ChildLedger,
    CrashableController,
    Fleet,
)
from tests.support.faults import RequestLog, rest_factory
from tests.support.namespaces import delete_namespace

#: ``<verb> <resource>[#n]``: n counts that kind of write in the crashing life (two Tasks).
CRASH_POINTS = (
    "patch tasks",  # first Task: finalizer, Workflow owner reference and labels
    "create jobs",
    "create secrets",
    "patch tasks/status",  # Running
    "patch tasks/status#2",
    "patch tasks/status#3",  # the first terminal phase
    "patch tasks/status#4",
    "patch jobs",  # Job finalizer released (the outcome is durable)
    "delete jobs",  # the Task is being deleted
    "patch tasks#3",  # Task finalizer removed (#1, #2 added the finalizers)
    "create events",
    "patch workflows",
    "patch workflows/status",
)

#: Write kinds of one Task's life as the RequestLog names them (verb, resource).
LIFECYCLE_WRITES = {
    ("PATCH", "tasks"),
    ("POST", "jobs"),
    ("POST", "secrets"),
    ("PATCH", "tasks/status"),
    ("PATCH", "jobs"),
    ("DELETE", "jobs"),
    ("POST", "events"),
    ("PATCH", "workflows"),
    ("PATCH", "workflows/status"),
}
VERBS = {"patch": "PATCH", "create": "POST", "delete": "DELETE", "update": "PUT"}


def run_lifecycle_with_crash(
    fleet: Fleet, ledger: ChildLedger, proc: CrashableController, crash: str
) -> list[str]:
    """One crash case; returns its problems (empty: every invariant held)."""
    proc.start(env={CRASH_ENV: crash}, timeout=90)
    fleet.add("good")
    fleet.add("bad", fail=True)

    def crashed_or(done) -> bool:
        return not proc.running or done()

    wait_for(
        lambda: crashed_or(fleet.settled),
        timeout=90,
        what=f"crash at {crash!r} or both Tasks terminal",
    )
    if proc.running:  # the crash point lies in the deletion
        fleet.delete_all()
        wait_for(
            lambda: crashed_or(fleet.settled),
            timeout=90,
            what=f"crash at {crash!r} or both Tasks gone",
        )
    code = proc.wait_exit(10)
    if code != CRASH_EXIT:
        return [f"the controller did not crash at {crash!r} (exit {code})"]
    if f"crash point reached after '{crash.split('#')[0]}'" not in proc.log_text():
        return [f"exit {code}, but not at the crash point {crash!r}"]

    proc.start(timeout=90)  # no crash point: finish the work
    if not all(e.deleted for e in fleet.expectations.values()):
        problems = fleet.wait_settled(90, ledger)
        if problems:
            return problems
        fleet.delete_all()
    problems = fleet.wait_settled(90, ledger)
    if not proc.running:
        problems.append(f"the restarted controller exited ({proc.returncode})")
    return problems


@dataclass
class CaseResult:
    problems: list[str]
    log: str
    seconds: float


@pytest.fixture(scope="module")
def crash_results(faults_plane, tmp_path_factory) -> Iterator[dict[str, CaseResult]]:
    """Run every crash case at once, each in its own namespace with its own controller process
    and simulated kubelet (they spend most of their time waiting: in parallel the whole set takes
    about as long as the slowest case)."""
    api_client = faults_plane.api_client()
    core = client.CoreV1Api(api_client)
    log_dir = tmp_path_factory.mktemp("crash-points")
    results: dict[str, CaseResult] = {}
    namespaces = []

    def run(index: int, crash: str) -> None:
        started = time.monotonic()
        namespace = f"crash-{index}-{uuid.uuid4().hex[:6]}"
        namespaces.append(namespace)
        core.create_namespace({"metadata": {"name": namespace}})
        # As installed: a token bound to exactly the generated RBAC (tests.support.identity).
        installed = identity.install_controller(api_client, faults_plane, namespace, log_dir)
        proc = CrashableController(
            installed,
            namespace=namespace,
            log_dir=log_dir,
            name=f"crash-{index}",
            args=list(FAST_WATCH_ARGS),
        )
        try:
            with (
                SimulatedKubelet(api_client, namespace=namespace),
                ChildLedger(api_client, namespace) as ledger,
            ):
                fleet = Fleet(api_client, namespace).setup()
                problems = run_lifecycle_with_crash(fleet, ledger, proc, crash)
        except Exception as exc:
            problems = [f"{type(exc).__name__}: {exc}"]
        finally:
            proc.ensure_stopped()
        results[crash] = CaseResult(problems, proc.tail(80), time.monotonic() - started)

    threads = [
        threading.Thread(target=run, args=(i, crash), daemon=True)
        for i, crash in enumerate(CRASH_POINTS)
    ]
    for thread in threads:
        thread.start()
        time.sleep(0.3)  # stagger the interpreter start-ups a little
    for thread in threads:
        thread.join(300)
    print("crash cases:", ", ".join(f"{k} {r.seconds:.0f}s" for k, r in results.items()))
    yield results
    for namespace in namespaces:
        identity.uninstall(api_client, namespace)
        delete_namespace(api_client, namespace)
    api_client.close()


@pytest.mark.parametrize("crash", CRASH_POINTS)
def test_restart_after_crash_point(crash_results, crash):
    """Crash right after ``crash``; a restarted controller finishes both Tasks and their
    deletion with every invariant intact."""
    result = crash_results.get(crash)
    assert result is not None, "the case did not finish"
    assert result.problems == [], result.log


def test_crash_points_cover_every_write(faults_api, faults_namespace, fleet, faults_kubelet):
    """Every kind of write an (in-process) controller makes over a succeeding and a failing
    Task's life, deletion included, has a crash point above."""
    from taskfsm.manager.manager import Manager, Settings

    log = RequestLog()
    settings = Settings(
        namespace=faults_namespace, metrics_address=None, health_address=None, shutdown_timeout=5
    )
    ctl = Manager(faults_api, settings, rest_factory=rest_factory(log)).start()
    try:
        fleet.add("good")
        fleet.add("bad", fail=True)
        wait_for(fleet.settled, timeout=60, what="both Tasks terminal")
        time.sleep(1)
        fleet.delete_all()
        wait_for(fleet.settled, timeout=60, what="both Tasks gone")
    finally:
        ctl.stop()
    seen = {
        (r.verb, r.resource)
        for r in log.writes(events=False) + log.writes(events=True)
        if r.code == 200
    }
    seen = {
        w for w in seen if w[1] not in ("mediaprocessingentities", "mediaprocessingentities/status")
    }
    covered = {(VERBS[p.split()[0]], p.split()[1].split("#")[0]) for p in CRASH_POINTS}
    assert seen <= LIFECYCLE_WRITES, (
        f"writes without a crash point: {sorted(seen - LIFECYCLE_WRITES)}"
    )
    assert seen <= covered, f"writes without a crash point: {sorted(seen - covered)}"
