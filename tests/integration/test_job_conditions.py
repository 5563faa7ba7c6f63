"""Kubernetes ≥ 1.31 Job conditions map to Task phases by type (docs/behaviour.md F8, §3.12).

The Function's Job template sets ``spec.managedBy`` to a name other than the built-in Job
controller, so kube-controller-manager leaves these Jobs alone (no pods, no conditions) and the
test writes their status through ``jobs/status``, as an external Job controller would. The API
server (1.35) still validates those writes: ``Complete`` needs ``SuccessCriteriaMet``,
``completionTime`` and ``startTime``; ``Failed`` needs ``FailureTarget``; so ``[Failed]`` alone
and ``[Complete]`` alone cannot exist and are not cases here.

On Kubernetes 1.30 (the run against the oldest supported version, docs/testing.md) neither holds:
``managedBy`` is an alpha field that the API server drops, so the built-in Job controller owns
these Jobs too (their pods never start: no kubelet runs them, and a ``failed`` count that no pod
raised is no new failure to it), and the API server refuses ``SuccessCriteriaMet`` on a Job
without a ``successPolicy``. There a Job's success is ``Complete`` alone, which is what taskfsm
then reads (docs/install.md, "Kubernetes versions"): :func:`as_on_server` writes each case's
``SuccessCriteriaMet`` as ``Complete``. ``FailureTarget`` (from 1.26, the pod failure policy's)
is written as it is.

Each case is a sequence of Job statuses; after each the Task must be in the given phase. A
terminal phase never goes back, so a sequence ending in the opposite terminal phase proves that
no earlier status was taken for an outcome. Before asserting "still Running" the test waits for
a reconcile that started after the controller's Job cache showed that status.
"""

from __future__ import annotations

from typing import Any

import pytest

from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import ReconcileTap
from tests.support.probes import conditions_of, now_rfc3339

START = now_rfc3339()


def cond(type_: str, status: str = "True", reason: str = "") -> dict[str, str]:
    now = now_rfc3339()
    out = {"type": type_, "status": status, "lastTransitionTime": now, "lastProbeTime": now}
    if reason:
        out["reason"] = reason
    return out


def complete(*extra: dict[str, str], failed: int = 0) -> dict[str, Any]:
    return {
        "startTime": START,
        "completionTime": START,
        "active": 0,
        "succeeded": 1,
        "failed": failed,
        "conditions": [*extra, cond("SuccessCriteriaMet"), cond("Complete")],
    }


CASES = {
    "SuccessCriteriaMet": [
        ({"startTime": START, "conditions": [cond("SuccessCriteriaMet")]}, "Succeeded")
    ],
    "SuccessCriteriaMet+Complete": [(complete(), "Succeeded")],
    "Complete listed before SuccessCriteriaMet": [
        (
            {
                "startTime": START,
                "completionTime": START,
                "succeeded": 1,
                "conditions": [cond("Complete"), cond("SuccessCriteriaMet")],
            },
            "Succeeded",
        )
    ],
    "FailureTarget held, then Failed": [
        (
            {"startTime": START, "conditions": [cond("FailureTarget", reason="PodFailurePolicy")]},
            "Failed",
        ),
        (
            {
                "startTime": START,
                "failed": 1,
                "conditions": [
                    cond("FailureTarget", reason="PodFailurePolicy"),
                    cond("Failed", reason="PodFailurePolicy"),
                ],
            },
            "Failed",
        ),
    ],
    "Failed reason=DeadlineExceeded": [
        (
            {
                "startTime": START,
                "conditions": [
                    cond("FailureTarget", reason="DeadlineExceeded"),
                    cond("Failed", reason="DeadlineExceeded"),
                ],
            },
            "Failed",
        )
    ],
    "failed>0 then Complete after retries": [
        ({"startTime": START, "active": 1, "failed": 1}, "Running"),
        ({"startTime": START, "active": 1, "failed": 2}, "Running"),
        (complete(failed=2), "Succeeded"),
    ],
    "False conditions are not outcomes (success)": [
        (
            {
                "startTime": START,
                "active": 1,
                "conditions": [cond("FailureTarget", "False"), cond("Failed", "False")],
            },
            "Running",
        ),
        ({"startTime": START, "conditions": [cond("SuccessCriteriaMet")]}, "Succeeded"),
    ],
    "False conditions are not outcomes (failure)": [
        (
            {"startTime": START, "active": 1, "conditions": [cond("SuccessCriteriaMet", "False")]},
            "Running",
        ),
        (
            {
                "startTime": START,
                "conditions": [cond("FailureTarget", reason="BackoffLimitExceeded")],
            },
            "Failed",
        ),
    ],
    "Suspended is not an outcome": [
        ({"conditions": [cond("Suspended", reason="JobSuspended")]}, "Running"),
        (
            {
                "startTime": START,
                "conditions": [cond("FailureTarget", reason="BackoffLimitExceeded")],
            },
            "Failed",
        ),
    ],
}


def as_on_server(status: dict[str, Any], server_minor: int) -> dict[str, Any]:
    """``status`` as a Job controller of that Kubernetes minor version can write it: before 1.31,
    ``SuccessCriteriaMet`` becomes ``Complete`` (one condition of a type)."""
    if server_minor >= 31:
        return status
    conditions: list[dict[str, str]] = []
    for condition in status.get("conditions", []):
        if condition["type"] == "SuccessCriteriaMet":
            condition = {**condition, "type": "Complete"}
        if all(c["type"] != condition["type"] for c in conditions):
            conditions.append(condition)
    return {**status, "conditions": conditions}


def job_seen(ctl, namespace: str, name: str, resource_version: str) -> bool:
    for cluster in ctl.registry.clusters():
        if cluster.namespace == namespace:
            job = cluster.jobs.get(namespace, name)
            if job and int(job["metadata"]["resourceVersion"]) >= int(resource_version):
                return True
    return False


@pytest.fixture
def tapped(controller_factory):
    ctl = controller_factory(start=False)
    tap = ReconcileTap(ctl)
    ctl.start()
    return ctl, tap


@pytest.mark.parametrize("steps", list(CASES.values()), ids=list(CASES))
def test_f8_job_conditions_map_to_task_phase(steps, tapped, engine, probe, namespace, server_minor):
    """F8: each Job condition combination, read by type, gives the expected Task phase (before
    1.31, with ``Complete`` for ``SuccessCriteriaMet``)."""
    ctl, tap = tapped
    engine.create(objects.workflow("wf"))
    engine.create(objects.externally_managed(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    task = probe.wait_phase("t", "Running")
    name = job_name(task)
    for status, phase in steps:
        written = probe.set_job_status(name, as_on_server(status, server_minor))
        if phase == "Running":
            wait_for(
                lambda rv=written["metadata"]["resourceVersion"]: job_seen(
                    ctl, namespace, name, rv
                ),
                timeout=30,
            )
            tap.settle(f"{namespace}/t")
            assert probe.phase("t") == "Running"
        else:
            probe.wait_phase("t", phase)
    final = probe.task("t")
    assert final["status"]["phase"] == steps[-1][1]
    expected = {"Succeeded": {"Complete": "True"}, "Failed": {"Failed": "True"}}[steps[-1][1]]
    assert expected.items() <= conditions_of(final).items()
    assert final["status"]["endTime"]


def test_f8_failure_target_job_is_kept_not_deleted(tapped, engine, probe, namespace):
    """A Job holding only FailureTarget is terminated, not active: the Failed Task keeps it
    (for inspection) and releases its job-protection finalizer (D18)."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.externally_managed(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    name = job_name(probe.wait_phase("t", "Running"))
    probe.set_job_status(
        name, {"startTime": START, "conditions": [cond("FailureTarget", reason="PodFailurePolicy")]}
    )
    probe.wait_phase("t", "Failed")
    wait_for(lambda: not (probe.job(name) or {}).get("metadata", {}).get("finalizers"), timeout=30)
    job = probe.job(name)
    assert job is not None
    assert not job["metadata"].get("deletionTimestamp")
    assert probe.status("t")["jobRef"]["uid"] == job["metadata"]["uid"]
