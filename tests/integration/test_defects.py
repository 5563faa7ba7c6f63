"""Controller-level regression tests for the reference's defects (docs/behaviour.md §6).

One test (or more) per defect that concerns the Task controller and is not already covered by
a behaviour file: D1, D11-D14 live in test_selection.py, D2 and D15/D16 in test_helper_data.py,
D4/D5 in test_job_template.py, D9/D10 in test_workflow_flows.py, D7 also in
test_failure_modes_reconcile.py (F1). D17 (ConfigMap resolution) and D20 (Workflow controller)
do not apply to the Task controller. Machine-level versions of D3, D6, D9, D10, D18 and D22
are in tests/machines.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.resources import (
    CLUSTER_MEDIA_PROCESSING_ENTITIES,
    TASKS,
)
from taskfsm.kube.rest import JOBS
from taskfsm.manifests import jobs
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Fault, Faults, ReconcileTap, RequestLog, rest_factory
from tests.support.namespaces import delete_namespace
from tests.support.probes import conditions_of

HOLD = "example.com/hold"


@pytest.fixture
def other_namespace(api_client) -> Iterator[str]:
    name = f"jobs-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    delete_namespace(api_client, name)


def world(engine, *, function: dict[str, Any] | None = None) -> None:
    engine.create(objects.workflow("wf"))
    engine.create(function or objects.function("f"))
    engine.create(objects.local_mpe("m"))


def new_task(engine, name: str = "t", **spec: Any) -> dict[str, Any]:
    return engine.create(
        objects.task(name, workflow_name="wf", function_name="f", mpe_name="m", **spec)
    )


def mpe_ready(engine, name: str = "m") -> None:
    wait_for(
        lambda: (
            conditions_of(engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, name)).get("Ready") == "True"
        ),
        timeout=30,
        what=f"MPE {name} Ready",
    )


def replacement_job(engine, task: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A Job with the Task's deterministic name and labels, as if someone re-created it."""
    function = objects.never_starting(engine.get(c.KIND_FUNCTION, "f"))
    return jobs.build_job(task=task, function=function, task_template=None, namespace=namespace)


# -- D3 ------------------------------------------------------------------------------------------


def test_d3_job_pending_without_refs_goes_back_to_initializing(
    controller_factory, engine, probe, namespace
):
    """D3: a Task found in JobPending without its selections goes back to Initializing and then
    runs normally (it does not oscillate between JobPending and Running)."""
    world(engine, function=objects.never_starting(objects.function("f")))
    new_task(engine)
    probe.patch_task_status("t", {"phase": "JobPending"})
    controller_factory()
    running = probe.wait_phase("t", "Running")
    assert running["status"]["mediaProcessingEntityRef"]["name"] == "m"
    assert running["status"]["functionRef"]["name"] == "f"
    assert running["status"]["startTime"]
    assert [j["metadata"]["name"] for j in probe.jobs()] == [jobs.job_name(running)]


def test_d18b_a_job_that_vanishes_while_running_fails_the_task_and_is_never_recreated(
    engine, controller, probe
):
    """D18b: a Job that vanishes while Running fails the Task with reason
    JobLost (a Warning Event says what was found); no Job is made again, startTime keeps its
    value and endTime is set."""
    world(engine, function=objects.never_starting(objects.function("f")))
    new_task(engine)
    first = probe.wait_phase("t", "Running")
    name = jobs.job_name(first)
    probe.delete_job(name)
    failed = probe.wait_phase("t", "Failed")
    condition = next(x for x in failed["status"]["conditions"] if x["type"] == "Failed")
    assert condition["reason"] == "JobLost"
    assert name in condition["message"]
    assert failed["status"]["startTime"] == first["status"]["startTime"]
    assert failed["status"]["endTime"]
    wait_for(
        lambda: any(
            e.get("reason") == "Failed" and "JobLost" in (e.get("note") or "")
            for e in probe.events("t")
        ),
        timeout=10,
        what="Warning Event naming JobLost",
    )
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=30, what="jobRef cleared")
    assert probe.job(name) is None
    assert probe.jobs() == []


# -- D6 ------------------------------------------------------------------------------------------


def test_d6_replaced_job_is_adopted_while_running(controller_factory, engine, probe, namespace):
    """D6: a Running Task whose Job was replaced under the same name (new UID) adopts the new
    Job instead of crashing or making another."""
    world(engine, function=objects.never_starting(objects.function("f")))
    first = controller_factory()
    task = new_task(engine)
    running = probe.wait_phase("t", "Running")
    name = jobs.job_name(running)
    old_uid = running["status"]["jobRef"]["uid"]
    first.stop()
    probe.delete_job(name)
    wait_for(lambda: probe.job(name) is None, timeout=30)
    new = probe.rest.create(JOBS, namespace, replacement_job(engine, task, namespace))
    controller_factory()
    wait_for(
        lambda: probe.status("t").get("jobRef", {}).get("uid") == new["metadata"]["uid"],
        timeout=60,
        what="jobRef adopted",
    )
    after = probe.task("t")
    assert after["status"]["phase"] == "Running"
    assert old_uid != new["metadata"]["uid"]
    assert [j["metadata"]["uid"] for j in probe.jobs()] == [new["metadata"]["uid"]]


def test_d6_replaced_job_reference_is_cleared_when_finished(
    controller_factory, engine, kubelet, probe, namespace
):
    """D6: a Succeeded Task whose Job was replaced under the same name clears its jobRef and
    stays Succeeded."""
    world(engine)
    first = controller_factory()
    task = new_task(engine)
    done = probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(done)
    wait_for(lambda: not probe.job(name)["metadata"].get("finalizers"), timeout=30)
    first.stop()
    probe.delete_job(name)
    wait_for(lambda: probe.job(name) is None, timeout=30)
    probe.rest.create(JOBS, namespace, replacement_job(engine, task, namespace))
    controller_factory()
    wait_for(lambda: "jobRef" not in probe.status("t"), timeout=60, what="jobRef cleared")
    after = probe.task("t")["status"]
    assert after["phase"] == "Succeeded"
    assert after["endTime"] == done["status"]["endTime"]


# -- D7 ------------------------------------------------------------------------------------------


def test_d7_job_watch_lagging_behind_makes_no_duplicate_job(
    controller_factory, engine, kubelet, probe, namespace
):
    """D7: with a Job cache that never shows the Task's Job, the controller still never makes a
    second Job (deterministic name, fresh read when jobRef is set) and the Task succeeds."""
    world(engine, function=objects.function("f", run_seconds=1))
    ctl = controller_factory()
    mpe_ready(engine)
    for cluster in ctl.registry.clusters():
        cluster.jobs.get = lambda ns, name: None
    task = new_task(engine)
    probe.wait_phase("t", "Succeeded")
    assert [j["metadata"]["name"] for j in probe.jobs()] == [jobs.job_name(task)]


# -- D8 ------------------------------------------------------------------------------------------


def test_d8_metadata_and_status_of_one_pass_both_land(controller_factory, engine, probe):
    """D8: the reconcile that adds the finalizer, owner reference and labels also writes its
    status: one metadata patch and one status patch take a new Task to Running."""
    log = RequestLog()
    world(engine, function=objects.never_starting(objects.function("f")))
    controller_factory(rest_factory=rest_factory(log))
    mpe_ready(engine)
    log.clear()
    new_task(engine)
    running = probe.wait_phase("t", "Running")
    metadata_patches = log.select(verb="PATCH", resource="tasks")
    status_patches = log.select(verb="PATCH", resource="tasks/status")
    assert len(metadata_patches) == 1
    assert len(status_patches) == 1
    assert status_patches[0].body["status"]["phase"] == "Running"
    assert status_patches[0].body["status"]["queuedTime"] == running["status"]["queuedTime"]
    assert running["metadata"]["finalizers"] == [c.FINALIZER_TASK_PROTECTION]


# -- D18 -----------------------------------------------------------------------------------------


def test_d18_job_finalizer_released_only_after_the_outcome_is_persisted(
    controller_factory, engine, kubelet, probe
):
    """D18: the job-protection finalizer is released only after a status patch recording the
    terminal phase succeeded; when that patch fails the finalizer stays until it is retried."""
    log, faults = RequestLog(), Faults()
    fault = faults.add(
        Fault(
            "PATCH",
            "tasks/status",
            when=lambda body: (body or {}).get("status", {}).get("phase") == "Succeeded",
        )
    )
    controller_factory(rest_factory=rest_factory(log, faults))
    world(engine)
    task = new_task(engine)
    probe.wait_phase("t", "Succeeded")
    name = jobs.job_name(task)
    wait_for(
        lambda: not probe.job(name)["metadata"].get("finalizers"),
        timeout=30,
        what="finalizer released",
    )
    assert fault.fired == 1
    requests = log.all()
    recorded = next(
        i
        for i, r in enumerate(requests)
        if r.resource == "tasks/status"
        and r.code == 200
        and r.body["status"].get("phase") == "Succeeded"
    )
    released = [i for i, r in enumerate(requests) if r.verb == "PATCH" and r.resource == "jobs"]
    assert released
    assert all(i > recorded for i in released)


# -- D19 -----------------------------------------------------------------------------------------


def cluster_world(engine, cluster_scoped, namespace: str) -> dict[str, str]:
    """A Workflow, a never-starting Function and a ClusterMediaProcessingEntity whose Jobs go to
    ``namespace``: only a cluster MPE may be moved to another namespace (a namespaced one runs
    Jobs in its own namespace only, docs/security.md). Returns the ref Tasks name it by."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    name = f"m-{namespace}"
    cluster_scoped.create(objects.local_mpe(name, cluster=True, namespace=namespace))
    return objects.mpe_ref(name, cluster=True)


def move_cluster_mpe(probe, name: str, to: str) -> None:
    probe.rest.patch(
        CLUSTER_MEDIA_PROCESSING_ENTITIES, None, name, {"spec": {"local": {"namespace": to}}}
    )


def test_d19_mpe_spec_change_is_picked_up(
    controller_factory, engine, probe, namespace, other_namespace, cluster_scoped
):
    """D19: changing a ClusterMediaProcessingEntity's local namespace rebuilds its client: new
    Tasks' Jobs go to the new namespace, while a Task already Running keeps its Job where it was
    made. (The controller works in every namespace: one of a single namespace refuses others.)"""
    controller = controller_factory(namespace=None)
    ref = cluster_world(engine, cluster_scoped, namespace)
    engine.create(
        objects.task("before", workflow_name="wf", function_name="f", mediaProcessingEntityRef=ref)
    )
    before = probe.wait_phase("before", "Running")
    old_job = jobs.job_name(before)
    move_cluster_mpe(probe, ref["name"], other_namespace)
    status_ref = before["status"]["mediaProcessingEntityRef"]
    wait_for(
        lambda: (
            (cl := controller.registry.get(status_ref)) is not None
            and cl.namespace == other_namespace
        ),
        timeout=30,
        what="MPE client rebuilt",
    )
    after = engine.create(
        objects.task("after", workflow_name="wf", function_name="f", mediaProcessingEntityRef=ref)
    )
    probe.wait_phase("after", "Running")
    assert [j["metadata"]["name"] for j in probe.jobs(other_namespace)] == [jobs.job_name(after)]
    # The earlier Task still has its Job in the old namespace, and was not given a second one.
    controller.queue.add(f"{namespace}/before")
    assert [j["metadata"]["name"] for j in probe.jobs()] == [old_job]
    assert probe.status("before")["jobRef"]["namespace"] == namespace
    assert probe.phase("before") == "Running"


def test_d19_old_namespace_job_is_still_followed(
    controller_factory, engine, probe, namespace, other_namespace, cluster_scoped
):
    """D19: after the cluster MPE's namespace changed, a reconcile of a Running Task still finds
    its Job in the old namespace (no re-creation) and deleting the Task deletes that Job."""
    ref = cluster_world(engine, cluster_scoped, namespace)
    ctl = controller_factory(start=False, namespace=None)
    tap = ReconcileTap(ctl)
    ctl.start()
    engine.create(
        objects.task("t", workflow_name="wf", function_name="f", mediaProcessingEntityRef=ref)
    )
    running = probe.wait_phase("t", "Running")
    name = jobs.job_name(running)
    move_cluster_mpe(probe, ref["name"], other_namespace)
    status_ref = running["status"]["mediaProcessingEntityRef"]
    wait_for(
        lambda: (
            (cl := ctl.registry.get(status_ref)) is not None and cl.namespace == other_namespace
        ),
        timeout=30,
    )
    tap.settle(f"{namespace}/t")
    assert probe.jobs(other_namespace) == []
    assert probe.status("t")["jobRef"]["uid"] == running["status"]["jobRef"]["uid"]
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t")
    wait_for(
        lambda: probe.task_gone("t") and probe.job(name) is None,
        timeout=60,
        what="Task and Job gone",
    )


# -- D21 -----------------------------------------------------------------------------------------


def test_d21_namespaced_and_cluster_mpe_of_one_name_are_distinct(
    controller_factory, engine, probe, namespace, cluster_scoped, other_namespace
):
    """D21: an MPE and a ClusterMPE with the same name are two MPEs with their own Job namespace
    and Job watch: each Task's Job lands where its MPE says."""
    controller_factory(namespace=None)  # the ClusterMPE's Jobs go to another namespace
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    shared = f"edge-{namespace}"
    engine.create(objects.local_mpe(shared))
    cluster_scoped.create(objects.local_mpe(shared, cluster=True, namespace=other_namespace))
    engine.create(
        objects.task(
            "a",
            workflow_name="wf",
            function_name="f",
            mediaProcessingEntityRef=objects.mpe_ref(shared),
        )
    )
    engine.create(
        objects.task(
            "b",
            workflow_name="wf",
            function_name="f",
            mediaProcessingEntityRef=objects.mpe_ref(shared, cluster=True),
        )
    )
    a = probe.wait_phase("a", "Running")
    bb = probe.wait_phase("b", "Running")
    assert [j["metadata"]["name"] for j in probe.jobs()] == [jobs.job_name(a)]
    assert [j["metadata"]["name"] for j in probe.jobs(other_namespace)] == [jobs.job_name(bb)]
    assert bb["status"]["jobRef"]["namespace"] == other_namespace


# -- D22 -----------------------------------------------------------------------------------------


def test_d22_terminating_task_never_gets_the_finalizer_back(
    controller_factory, engine, probe, namespace
):
    """D22: a Task already being deleted (held by someone else's finalizer) is not given the
    task-protection finalizer and is not written to at all; it goes once released."""
    world(engine)
    task = objects.task("t", workflow_name="wf", function_name="f", mpe_name="m")
    task["metadata"]["finalizers"] = [HOLD]
    engine.create(task)
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t")
    log = RequestLog()
    ctl = controller_factory(rest_factory=rest_factory(log), start=False)
    tap = ReconcileTap(ctl)
    ctl.start()
    tap.settle(f"{namespace}/t")
    current = probe.task("t")
    assert current["metadata"]["finalizers"] == [HOLD]
    assert not (current.get("status") or {}).get("message")
    assert [r for r in log.all() if r.write and r.resource.startswith("tasks")] == []
    probe.rest.patch(TASKS, namespace, "t", {"metadata": {"finalizers": None}})
    wait_for(lambda: probe.task_gone("t"), timeout=30)


def test_d22_task_with_unusable_status_refs_can_be_deleted(
    controller_factory, engine, probe, namespace
):
    """D22: a terminating Task whose status names an MPE reference of a wrong kind is still
    deleted (nothing to clean up through it), without waiting for the MPE."""
    world(engine)
    task = objects.task("t", workflow_name="wf", function_name="f", mpe_name="m")
    task["metadata"]["finalizers"] = [c.FINALIZER_TASK_PROTECTION]
    engine.create(task)
    probe.patch_task_status(
        "t",
        {
            "phase": "Running",
            "mediaProcessingEntityRef": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "m",
                "namespace": namespace,
            },
            "functionRef": {"kind": "Function", "name": "f", "namespace": namespace},
            "jobRef": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "gone",
                "namespace": namespace,
                "uid": "0",
            },
        },
    )
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t")
    controller_factory()
    wait_for(lambda: probe.task_gone("t"), timeout=30, what="Task gone")


# -- D23 -----------------------------------------------------------------------------------------


def test_d23_one_tasks_exception_does_not_affect_another(engine, controller, kubelet, probe):
    """D23: a Task whose Job template makes the builder raise (labels given as a list) reports
    the error in its status, while another Task of the same controller runs to Succeeded."""
    world(engine)
    new_task(engine, "broken", templatePatches={"metadata": {"labels": ["not", "a", "map"]}})
    new_task(engine, "fine")
    probe.wait_phase("fine", "Succeeded")
    broken = wait_for(
        lambda: (t := probe.task("broken")) and (t.get("status") or {}).get("message") and t,
        timeout=30,
    )
    assert broken["status"]["phase"] == "JobPending"
    assert probe.jobs()
    assert all(j["metadata"]["labels"][c.LABEL_TASK_NAME] == "fine" for j in probe.jobs())
