"""Regression tests for issue 12 (found by independent fault testing), one per item, each the
failing input made deterministic against the real control plane with an in-process controller
(none involves a restart or a network cut; those are in tests/e2e/test_nothing_lost.py).
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from taskfsm.api import constants as c
from taskfsm.build import jobs
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import Resource, Rest
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Faults, FaultyRest, ReconcileTap, RequestLog
from tests.support.probes import conditions_of


def world(engine, *functions: dict[str, Any]) -> None:
    engine.create(objects.workflow("wf"))
    for function in functions or (objects.function("f"),):
        engine.create(function)
    engine.create(objects.local_mpe("m"))


def mpe_ready(engine, name: str = "m") -> None:
    wait_for(
        lambda: (
            conditions_of(engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, name)).get("Ready") == "True"
        ),
        timeout=30,
        what=f"MPE {name} Ready",
    )


def failed_reason(task: dict[str, Any]) -> str:
    return next(
        x.get("reason") or "" for x in task["status"]["conditions"] if x["type"] == "Failed"
    )


def warnings(probe, name: str) -> list[str]:
    return [
        f"{e.get('reason')}: {e.get('note')}"
        for e in probe.events(name)
        if e.get("type") == "Warning"
    ]


class HeldStatusRest(FaultyRest):
    """A FaultyRest whose status writes of chosen Tasks wait until ``release`` is set."""

    def __init__(self, *args: Any, held: set[str], release: threading.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held, self.release = held, release

    def request(self, method: str, res: Resource, path: str, **kwargs: Any) -> Any:
        if method == "PATCH" and path.endswith("/status") and path.split("/")[-2] in self.held:
            self.release.wait(60)
        return super().request(method, res, path, **kwargs)


# -- item 2c ---------------------------------------------------------------------------------------


def test_running_task_without_a_job_ref_fails_with_job_lost_and_gets_no_job(
    controller_factory, engine, probe, namespace
):
    """Item 2c: a Task whose status says Running with no jobRef (an old controller, a restore)
    and whose Job does not exist fails with reason JobLost and a Warning Event saying what was
    found; no Job is created for it (before: a JobRecreated Warning and a new Job)."""
    world(engine, objects.never_starting(objects.function("f")))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    probe.patch_task_status(
        "t",
        {
            "phase": "Running",
            "mediaProcessingEntityRef": {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND_MEDIA_PROCESSING_ENTITY,
                "name": "m",
                "namespace": namespace,
            },
            "functionRef": {
                "apiVersion": c.API_VERSION,
                "kind": c.KIND_FUNCTION,
                "name": "f",
                "namespace": namespace,
            },
        },
    )
    log = RequestLog()
    controller_factory(rest_factory=lambda api: FaultyRest(api, log=log, faults=Faults()))
    failed = probe.wait_phase("t", "Failed")
    assert failed_reason(failed) == "JobLost"
    wait_for(
        lambda: any("JobLost" in w and "jobRef was never set" in w for w in warnings(probe, "t")),
        timeout=10,
        what="a Warning Event saying what was found",
    )
    assert not any("JobRecreated" in w for w in warnings(probe, "t"))
    assert log.select(verb="POST", resource="jobs") == []
    assert probe.jobs() == []


# -- item 3 ----------------------------------------------------------------------------------------


def test_an_outcome_the_job_shows_is_recorded_though_the_workflow_terminated(
    controller_factory, engine, kubelet, probe, namespace
):
    """Item 3: one Workflow (FailWorkflow), Task ``a`` fails; Tasks ``b`` (succeeds) and ``c``
    (fails) have their status writes held until their Jobs finished and the Workflow failed.
    Each records the outcome its Job shows (Succeeded; Failed with reason JobFailed), not
    WorkflowTerminated."""
    world(engine, objects.function("ok", run_seconds=0.2), objects.function("bad", exit_code=1))
    release = threading.Event()
    ctl = controller_factory(
        rest_factory=lambda api: HeldStatusRest(
            api, log=RequestLog(), faults=Faults(), held={"b", "c"}, release=release
        ),
        workers=6,
    )
    mpe_ready(engine)
    wait_for(lambda: ctl.caches.get(c.KIND_FUNCTION, namespace, "bad") is not None, timeout=30)
    for name, function in (("b", "ok"), ("c", "bad")):
        engine.create(objects.task(name, workflow_name="wf", function_name=function, mpe_name="m"))

    def finished(name: str) -> bool:
        found = probe.jobs()
        job = next(
            (j for j in found if j["metadata"]["labels"].get(c.LABEL_TASK_NAME) == name), None
        )
        conditions = ((job or {}).get("status") or {}).get("conditions") or []
        return any(
            x["type"] in ("Complete", "Failed") and x["status"] == "True" for x in conditions
        )

    try:
        wait_for(
            lambda: finished("b") and finished("c"), timeout=60, what="b's and c's Jobs finished"
        )
        engine.create(objects.task("a", workflow_name="wf", function_name="bad", mpe_name="m"))
        wait_for(
            lambda: (
                (engine.get(c.KIND_WORKFLOW, "wf").get("status") or {}).get("phase") == "Failed"
            ),
            timeout=60,
            what="the Workflow Failed",
        )
    finally:
        release.set()
    assert probe.wait_phase("b", "Succeeded")
    failed = probe.wait_phase("c", "Failed")
    assert failed_reason(failed) == "JobFailed"
    assert failed_reason(probe.wait_phase("a", "Failed")) == "JobFailed"


# -- item 7 (the precondition half; the leadership half is in tests/e2e) ---------------------------


def test_a_status_computed_from_a_stale_view_does_not_land(
    controller_factory, engine, kubelet, probe, namespace
):
    """Item 7: a pass that starts from an old version of a Succeeded Task (Running, as a paused
    replica or a lagging cache would have it) and finds the Job gone would write Failed/JobLost;
    the status write carries the resourceVersion it was computed from, gets 409 and does not
    land: the Task stays Succeeded, and the conflict raises no Warning Event."""
    world(engine, objects.function("f"))
    log = RequestLog()
    ctl = controller_factory(
        rest_factory=lambda api: FaultyRest(api, log=log, faults=Faults()), start=False
    )
    tap = ReconcileTap(ctl)
    ctl.start()
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    running = probe.wait_phase("t", "Running")
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    wait_for(
        lambda: not (probe.job(name) or {"metadata": {}})["metadata"].get("finalizers"), timeout=30
    )
    probe.delete_job(name)
    wait_for(lambda: probe.job(name) is None, timeout=30, what="Job gone")
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=30, what="jobRef cleared")

    stale = copy.deepcopy(running)  # the Running version, with its old resourceVersion
    real_read = ctl.reconciler.read_task
    used = threading.Event()

    def stale_read(ns: str, task_name: str) -> dict[str, Any] | None:
        if task_name == "t" and not used.is_set():
            used.set()
            return copy.deepcopy(stale)
        return real_read(ns, task_name)

    ctl.reconciler.read_task = stale_read
    log.clear()
    tap.settle(f"{namespace}/t")
    assert used.is_set()
    conflicts = [r for r in log.select(verb="PATCH", resource="tasks/status") if r.code == 409]
    assert conflicts, "the stale pass's status write was not refused"
    assert (
        conflicts[0].body["metadata"]["resourceVersion"] == running["metadata"]["resourceVersion"]
    )
    after = probe.task("t")
    assert after["status"]["phase"] == "Succeeded"
    assert "Failed" not in conditions_of(after)
    time.sleep(0.5)
    assert [w for w in warnings(probe, "t") if "conflict" in w.lower()] == []


# -- item 8 ----------------------------------------------------------------------------------------


def test_foreground_deletions_racing_the_finalizer_removal_are_quiet(
    controller_factory, engine, probe, namespace, api_client
):
    """Item 8: Running Tasks deleted with ``--cascade=foreground`` twice 0.2 s apart and once
    more in the background (the garbage collector edits the finalizer list meanwhile): every
    Task and Job goes, the finalizer edit never fails on another controller's finalizer, and no
    Warning ReconcileError Event is recorded."""
    world(engine, objects.never_starting(objects.function("f")))
    log = RequestLog()
    controller_factory(rest_factory=lambda api: FaultyRest(api, log=log, faults=Faults()))
    names = [f"t{i}" for i in range(5)]
    for name in names:
        engine.create(objects.task(name, workflow_name="wf", function_name="f", mpe_name="m"))
    for name in names:
        probe.wait_phase(name, "Running")
    rest = Rest(api_client)
    for name in names:
        rest.delete(TASKS, namespace, name, propagation="Foreground")
        time.sleep(0.2)
        for propagation in ("Foreground", "Background"):
            try:  # the controller may have finished the deletion already
                rest.delete(TASKS, namespace, name, propagation=propagation)
            except NotFound:
                break
    for name in names:
        wait_for(lambda name=name: probe.task(name) is None, timeout=60, what=f"{name} deleted")
    wait_for(lambda: probe.jobs() == [], timeout=60, what="Jobs deleted")
    for name in names:
        assert [w for w in warnings(probe, name) if w.startswith("ReconcileError")] == []
    refused = [r for r in log.select(verb="PATCH", resource="tasks") if r.code == 422]
    assert refused == [], "the finalizer edit tested more than its own entry"


# -- item 9 ----------------------------------------------------------------------------------------


def test_deleting_a_finished_task_whose_job_is_gone_reads_the_job_at_most_once(
    controller_factory, engine, kubelet, probe, namespace
):
    """Item 9: deleting a Succeeded Task whose Job is already gone makes at most one GET for
    that Job (before: two, the second after the Task was gone)."""
    world(engine, objects.function("f"))
    log = RequestLog()
    controller_factory(rest_factory=lambda api: FaultyRest(api, log=log, faults=Faults()))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    wait_for(
        lambda: not (probe.job(name) or {"metadata": {}})["metadata"].get("finalizers"), timeout=30
    )
    probe.delete_job(name)
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=30, what="jobRef cleared")
    time.sleep(0.5)
    log.clear()
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t")
    wait_for(lambda: probe.task("t") is None, timeout=30, what="Task deleted")
    time.sleep(1.0)  # the reconciles the deletion events trigger
    gets = [r for r in log.select(verb="GET", resource="jobs") if r.path.endswith(f"/{name}")]
    assert len(gets) <= 1, gets


# -- item 10 ---------------------------------------------------------------------------------------


def test_a_task_waiting_for_its_mpe_client_is_woken_when_it_is_ready(
    controller_factory, engine, probe, namespace
):
    """Item 10: Task workers do not wait for MediaProcessingEntity clients. A Task created right
    after its MPE is reconciled while the MPE's client is still being set up, quietly (no error,
    no Event, no timer), and again as soon as the MPE reconcile has set it up (before: Task
    workers waited up to 10 s for the first MPE reconciles, then polled every second)."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    ctl = controller_factory(start=False)
    gate = threading.Event()
    results: list[tuple[str, Any]] = []
    mpe_reconcile = ctl.mpe_reconciler.reconcile

    def held_mpe(key: str) -> Any:
        gate.wait(60)
        return mpe_reconcile(key)

    ctl.mpe_reconciler.reconcile = held_mpe  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    task_reconcile = ctl.reconciler.reconcile

    def recorded(key: str) -> Any:
        result = task_reconcile(key)
        results.append((key, result))
        return result

    ctl.reconciler.reconcile = recorded  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    ctl.start()
    engine.create(objects.local_mpe("m"))
    wait_for(
        lambda: all(
            ctl.caches.get(kind, namespace, name) is not None
            for kind, name in (
                (c.KIND_MEDIA_PROCESSING_ENTITY, "m"),
                (c.KIND_FUNCTION, "f"),
                (c.KIND_WORKFLOW, "wf"),
            )
        ),
        timeout=30,
        what="the objects in the controller's caches",
    )
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    try:
        probe.wait_message("t", "waiting for its client to be set up", timeout=30)
        key = f"{namespace}/t"
        waiting = [r for k, r in results if k == key]
        # No error, no backoff, and no timer but the resync every Task with a Job pending has.
        resync = ctl.settings.resync_seconds
        assert waiting
        assert all(r.error is None and r.requeue_after in (None, resync) for r in waiting)
        assert probe.phase("t") == "JobPending"
        assert [w for w in warnings(probe, "t")] == []
    finally:
        gate.set()
    probe.wait_phase("t", "Running", timeout=30)


# -- item 11 ---------------------------------------------------------------------------------------


DENY_STATUS_POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [c.GROUP],
                    "apiVersions": [c.VERSION],
                    "operations": ["UPDATE"],
                    "resources": ["tasks/status"],
                }
            ]
        },
        "validations": [
            {"expression": "false", "message": "status writes are denied for this test"}
        ],
    },
}


def test_api_refusals_back_off_with_a_short_cap(
    controller_factory, engine, probe, namespace, api_client
):
    """Item 11: while an admission policy denies every Task status write, the Task's retries
    back off no longer than the API-error cap (set to 1 s here; default 30 s) instead of the
    ~16 min cap of errors about the object itself; once writes are allowed again, the Task
    goes on."""
    from kubernetes import client as k8s

    admission = k8s.AdmissionregistrationV1Api(api_client)
    name = f"deny-status-{namespace}"[:60]
    admission.create_validating_admission_policy({**DENY_STATUS_POLICY, "metadata": {"name": name}})
    admission.create_validating_admission_policy_binding(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        }
    )
    try:
        # The API server applies a new policy a moment later: wait until it refuses a write.
        engine.create(objects.task("canary", workflow_name="wf", function_name="f", mpe_name="m"))

        def refused() -> bool:
            try:
                probe.patch_task_status("canary", {"message": f"probe {time.monotonic()}"})
            except Exception:
                return True
            return False

        wait_for(refused, timeout=30, what="the admission policy in force")
        world(engine, objects.never_starting(objects.function("f")))
        ctl = controller_factory(start=False, api_error_max_backoff=1.0)
        delays: list[float] = []
        add = ctl.queue.add_rate_limited

        def recorded(
            key: str, max_delay: float | None = None, min_delay: float | None = None
        ) -> float:
            delay = add(key, max_delay=max_delay, min_delay=min_delay)
            if key.endswith("/t"):
                delays.append(delay)
            return delay

        ctl.queue.add_rate_limited = recorded  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
        ctl.start()
        mpe_ready(engine)
        engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
        # 5 ms doubling passes 1 s at the 9th failure; wait well past it.
        wait_for(lambda: len(delays) >= 12, timeout=60, what="a dozen refused status writes")
    finally:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)
    assert max(delays) <= 1.0 * 1.1  # the cap, plus the queue's 10 % jitter
    probe.wait_phase("t", "Running", timeout=60)
