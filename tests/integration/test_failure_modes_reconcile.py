"""Failure modes of reconciling against a real API server (docs/behaviour.md F1-F3, F9, F10).

Faults are injected on the client side: the Controller builds every ``Rest`` through
``tests.support.faults.rest_factory``, which logs each request and can fail chosen ones
before they are sent or after the server committed them. Stale reads are injected by wrapping
the reconciler's Task read. The outcome asserted is always about the cluster: how many Jobs and
Secrets exist, and the Task's phase.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import Conflict, Unavailable
from taskfsm.kube.rest import JOBS, SECRETS
from taskfsm.manifests import helper_payload, jobs
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Fault, Faults, ReconcileTap, RequestLog, rest_factory


def create_world(engine, *, function: dict[str, Any] | None = None) -> None:
    engine.create(objects.workflow("wf"))
    engine.create(function or objects.function("f"))
    engine.create(objects.local_mpe("m"))


def new_task(engine) -> dict[str, Any]:
    return engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))


def one_job_and_secret(probe, task: dict[str, Any]) -> dict[str, Any]:
    """Exactly one Job and one Secret exist for the Task, the Secret owned by the Job."""
    found = probe.jobs()
    assert [j["metadata"]["name"] for j in found] == [jobs.job_name(task)]
    secrets = probe.secrets()
    assert [s["metadata"]["name"] for s in secrets] == [jobs.job_name(task)]
    assert secrets[0]["metadata"]["ownerReferences"][0]["uid"] == found[0]["metadata"]["uid"]
    return found[0]


# -- F1: stale reads after the Job was created ---------------------------------------------------


@pytest.mark.parametrize(
    "job_cache_stale", [False, True], ids=["task-stale", "task-and-job-cache-stale"]
)
def test_f1_stale_task_read_after_job_creation_makes_no_second_job(
    job_cache_stale, controller_factory, engine, probe, namespace
):
    """F1: a reconcile that reads the Task as it was before status.jobRef was written (and, in
    the second case, does not find the Job in its cache either) adopts the existing Job."""
    create_world(engine, function=objects.never_starting(objects.function("f")))
    ctl = controller_factory(start=False)
    tap = ReconcileTap(ctl)
    stale: dict[str, Any] = {"task": None}
    read_task = ctl.reconciler.read_task

    def stale_read(ns: str, name: str) -> dict[str, Any] | None:
        snapshot, stale["task"] = stale["task"], None
        return (
            copy.deepcopy(snapshot) if snapshot is not None and name == "t" else read_task(ns, name)
        )

    ctl.reconciler.read_task = stale_read
    ctl.start()
    new_task(engine)
    running = probe.wait_phase("t", "Running")
    job = one_job_and_secret(probe, running)
    # The Task as the API server had it just before the status write of the creating pass.
    before = copy.deepcopy(running)
    kept = ("queuedTime", "mediaProcessingEntityRef", "functionRef", "conditions")
    before["status"] = {k: v for k, v in running["status"].items() if k in kept} | {
        "phase": "JobPending"
    }
    if job_cache_stale:
        cluster = ctl.registry.clusters()[0]
        real_get = cluster.jobs.get
        cluster.jobs.get = lambda ns, name: None  # the Job watch lags behind
        ctl.caches.written._objects.clear()
    stale["task"] = before
    try:
        tap.settle(f"{namespace}/t")
    finally:
        if job_cache_stale:
            cluster.jobs.get = real_get
    assert stale["task"] is None, "the stale read was not used"
    assert one_job_and_secret(probe, running)["metadata"]["uid"] == job["metadata"]["uid"]
    status = probe.wait_phase("t", "Running")["status"]
    assert status["jobRef"]["uid"] == job["metadata"]["uid"]


# -- F2: the Job POST times out after the server committed it ------------------------------------


def test_f2_job_create_timeout_after_commit_adopts_the_job(
    controller_factory, engine, kubelet, probe
):
    """F2: the Job POST reaches the server but the client sees a timeout; the retry adopts the
    Job that exists (AlreadyExists or cache) and the Task succeeds with one Job and one Secret."""
    log, faults = RequestLog(), Faults()
    fault = faults.add(Fault("POST", "jobs", after_send=True))
    controller_factory(rest_factory=rest_factory(log, faults))
    create_world(engine)
    task = new_task(engine)
    probe.wait_phase("t", "Succeeded")
    assert fault.fired == 1
    one_job_and_secret(probe, task)
    posts = log.select(verb="POST", resource="jobs")
    assert posts[0].fault == "after_send"


# -- F3: the status write fails right after the Job was created ----------------------------------


@pytest.mark.parametrize(
    "error",
    [
        lambda: Conflict("the object has been modified"),
        lambda: Unavailable("injected: read timed out"),
    ],
    ids=["409", "timeout"],
)
def test_f3_lost_status_write_after_job_creation_makes_no_second_job(
    error, controller_factory, engine, kubelet, probe
):
    """F3: the /status patch carrying the new jobRef fails once; the next pass finds the Job by
    its deterministic name: one Job, one Secret, and the Task still succeeds."""
    log, faults = RequestLog(), Faults()
    fault = faults.add(
        Fault(
            "PATCH",
            "tasks/status",
            when=lambda body: bool((body or {}).get("status", {}).get("jobRef")),
            error=error,
        )
    )
    controller_factory(rest_factory=rest_factory(log, faults))
    create_world(engine)
    task = new_task(engine)
    probe.wait_phase("t", "Succeeded")
    assert fault.fired == 1
    one_job_and_secret(probe, task)
    assert len(log.select(verb="POST", resource="jobs")) == 1


# -- F9: finished Tasks stay finished; a Job never waits for a Secret that is not coming ----------


def test_f9a_deleting_the_job_of_a_succeeded_task_keeps_it_succeeded(
    engine, controller, kubelet, probe
):
    """F9a: when the Job of a Succeeded Task is deleted, the Task stays Succeeded (same
    endTime), its jobRef is cleared and no new Job is made."""
    create_world(engine)
    new_task(engine)
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    probe.delete_job(name, strip_finalizers=False)
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=60, what="jobRef cleared")
    after = probe.task("t")["status"]
    assert after["phase"] == "Succeeded"
    assert after["endTime"] == done["status"]["endTime"]
    assert probe.job(name) is None
    assert probe.jobs() == []


def test_f9a_job_removed_by_ttl_keeps_task_succeeded(engine, controller, kubelet, probe):
    """F9a/D18: the TTL controller removing a finished Job (its finalizer already released)
    does not make the Task run again."""
    create_world(engine)
    new_task(engine)
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    wait_for(
        lambda: not probe.job(name)["metadata"].get("finalizers"),
        timeout=30,
        what="finalizer released",
    )
    probe.rest.patch(JOBS, probe.namespace, name, {"spec": {"ttlSecondsAfterFinished": 1}})
    wait_for(lambda: probe.job(name) is None, timeout=60, what="Job removed by its TTL")
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=60, what="jobRef cleared")
    assert probe.phase("t") == "Succeeded"
    assert probe.jobs() == []


def test_f9b_pod_waits_for_a_secret_the_controller_then_creates(
    controller_factory, engine, kubelet, probe
):
    """F9b: if the Secret POST fails after the Job exists, the pod waits for the Secret (as a
    kubelet does) and the controller's retry creates it: the Task succeeds."""
    log, faults = RequestLog(), Faults()
    fault = faults.add(Fault("POST", "secrets", times=2))
    controller_factory(rest_factory=rest_factory(log, faults))
    create_world(engine)
    task = new_task(engine)
    probe.wait_phase("t", "Succeeded")
    assert fault.fired == 2
    one_job_and_secret(probe, task)
    assert kubelet.waiting_for_secrets == {}


def test_f9b_secret_exists_before_the_pod_starts(engine, controller, kubelet, probe):
    """F9b: the Job's pod starts only after the Secret it mounts exists."""
    create_world(engine)
    new_task(engine)
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    secret = probe.secret(name)
    pods = probe.pods(name)
    assert pods, "the Job's pod is kept until the Job goes"
    assert pods[0]["status"]["startTime"] >= secret["metadata"]["creationTimestamp"]
    assert kubelet.waiting_for_secrets == {}


def test_f9b_no_job_when_its_secret_cannot_be_built(engine, controller, kubelet, probe):
    """F9b: a Task whose helper data cannot be built (credential Secret missing) creates no
    Job at all, so no pod waits for a Secret that is not coming."""
    engine.create(objects.workflow("wf", media_locations=[objects.location_entry("s", "store")]))
    engine.create(objects.s3_location("store", secret_name="absent"))
    engine.create(objects.function("f"))
    engine.create(objects.local_mpe("m"))
    new_task(engine)
    probe.wait_message("t", 'secrets "absent" not found')
    assert probe.jobs() == []
    assert probe.secrets() == []
    assert kubelet.waiting_for_secrets == {}


# -- F10: the Job finished before the controller ever saw it active -------------------------------


def test_f10_job_finished_before_controller_saw_it(
    controller_factory, engine, kubelet, probe, namespace
):
    """F10: the Task's Job (deterministic name) already completed before any controller ran;
    the controller adopts it and the Task ends Succeeded without ever seeing it active."""
    create_world(engine)
    task = new_task(engine)
    function = engine.get(c.KIND_FUNCTION, "f")
    workflow = engine.get(c.KIND_WORKFLOW, "wf")
    body = jobs.build_job(task=task, function=function, task_template=None, namespace=namespace)
    job = probe.rest.create(JOBS, namespace, body)
    payload = helper_payload.build_payload(
        task=task,
        workflow=workflow,
        function=function,
        task_template=None,
        catalog=None,
        read_secret=None,
        nats=None,
    )
    probe.rest.create(SECRETS, namespace, jobs.build_secret(task=task, job=job, payload=payload))
    wait_for(
        lambda: any(
            cond["type"] == "Complete" and cond["status"] == "True"
            for cond in (probe.job(job["metadata"]["name"]).get("status") or {}).get("conditions")
            or []
        ),
        timeout=60,
        what="Job Complete before the controller starts",
    )
    ctl = controller_factory(start=False)
    tap = ReconcileTap(ctl)
    ctl.start()
    done = probe.wait_phase("t", "Succeeded")
    assert done["status"]["jobRef"]["uid"] == job["metadata"]["uid"]
    assert done["status"]["startTime"]
    assert done["status"]["endTime"]
    assert len(probe.jobs()) == 1
    assert tap.count(f"{namespace}/t") >= 1


def test_job_deleted_while_running_fails_the_task_and_is_let_go(
    engine, controller, probe, namespace
):
    """D18b: a user deleting a Running Task's Job (a plain delete, finalizer
    left to the controller) fails the Task with reason JobLost; the controller then releases the
    Job's finalizer so it goes, and makes no other Job."""
    create_world(engine, function=objects.never_starting(objects.function("f")))
    new_task(engine)
    running = probe.wait_phase("t", "Running")
    name = jobs.job_name(running)
    probe.rest.delete(JOBS, namespace, name, propagation="Background")
    failed = probe.wait_phase("t", "Failed")
    condition = next(x for x in failed["status"]["conditions"] if x["type"] == "Failed")
    assert condition["reason"] == "JobLost"
    assert "deleted before it finished" in condition["message"]
    wait_for(lambda: probe.job(name) is None, timeout=30, what="the deleted Job released and gone")
    assert probe.jobs() == []
