"""API requests a Task costs on the happy path (creation → Succeeded), counted on the client.

The Controller's every ``Rest`` carries a counting observer (the same hook that feeds
``rest_client_requests_total``); a request log tells the Task's Events from the Workflow's.
Counted per Task: writes to Tasks, Jobs and Secrets (the
Workflow and MediaProcessingEntity controllers' own writes are not the Task's), single-object
GETs (reads not served by a cache), and Events separately. The goal: at most 6 writes, no
Event (the phase changes are Events only with ``--task-phase-events``) and 3 uncached reads per
Task. Write counts are deterministic and asserted; uncached reads depend on
how fast the Job watch delivers the new Job (a fresh GET covers a lagging cache), so they are
reported, with only their ceiling asserted.
"""

from __future__ import annotations

from taskfsm.api import constants as c
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import (
    WRITE_VERBS,
    Faults,
    FaultyRest,
    ReconcileTap,
    RequestCounter,
    RequestLog,
)
from tests.support.probes import conditions_of

TASKS = 3
TASK_RESOURCES = ("tasks", "tasks/status", "jobs", "secrets")


def test_happy_path_api_cost_per_task(controller_factory, engine, kubelet, probe, namespace):
    """Creation → Succeeded costs at most 6 writes per Task (metadata, Job, Secret, status
    Running, status Succeeded, Job finalizer release), no Event, and at most 3 uncached reads."""
    counter, log, faults = RequestCounter(), RequestLog(), Faults()
    ctl = controller_factory(
        rest_factory=lambda api: FaultyRest(api, log=log, faults=faults, observer=counter),
        start=False,
    )
    tap = ReconcileTap(ctl)
    ctl.start()
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    wait_for(
        lambda: (
            conditions_of(engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, "m")).get("Ready") == "True"
        ),
        timeout=30,
    )
    # The watches deliver objects in any order: the MPE's Ready says nothing about whether the
    # Function and Workflow are in the caches yet (a Task reconciled before them would retry,
    # which is right but not the happy path this test counts).
    wait_for(
        lambda: (
            ctl.caches.get(c.KIND_FUNCTION, namespace, "f") is not None
            and ctl.caches.get(c.KIND_WORKFLOW, namespace, "wf") is not None
        ),
        timeout=30,
    )
    counter.reset()
    log.clear()
    names = [f"t{i}" for i in range(TASKS)]
    for name in names:
        engine.create(objects.task(name, workflow_name="wf", function_name="f", mpe_name="m"))
    for name in names:
        done = probe.wait_phase(name, "Succeeded")
        job = job_name(done)
        wait_for(lambda job=job: not probe.job(job)["metadata"].get("finalizers"), timeout=30)
    for name in names:
        tap.settle(f"{namespace}/{name}")
    counts = counter.snapshot()
    task_writes = {
        (verb, res): n
        for (verb, res, _), n in counts.items()
        if verb in WRITE_VERBS and res in TASK_RESOURCES
    }
    writes = sum(task_writes.values())
    reads = RequestCounter.uncached_reads(counts)
    events = len([r for r in log.writes(events=True) if r.body["regarding"]["kind"] == c.KIND_TASK])
    print(
        f"\nAPI cost per Task (happy path, {TASKS} Tasks): writes {writes / TASKS:.2f}, "
        f"uncached reads {reads / TASKS:.2f}, events {events / TASKS:.2f}; writes by kind: "
        + ", ".join(
            f"{verb} {res}: {n / TASKS:.2f}" for (verb, res), n in sorted(task_writes.items())
        )
        + "; reads: "
        + ", ".join(f"{res}: {n}" for (verb, res, _), n in sorted(counts.items()) if verb == "GET")
    )
    assert writes <= 6 * TASKS
    assert events == 0  # a Normal phase change is an Event only with --task-phase-events
    assert reads <= 3 * TASKS
