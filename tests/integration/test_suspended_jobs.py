"""A Job created suspended (`spec.suspend: true` through `templatePatches`, as
batch queueing systems such as Kueue create them until they admit them) runs nothing; the Task
shows it (Running, `Ready=False` with reason JobSuspended, a Normal Event), and carries on to
Succeeded when the Job is resumed."""

from __future__ import annotations

from taskfsm.kube.rest import JOBS
from taskfsm.manifests import jobs
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.probes import conditions_of


def ready(task) -> dict:
    return next(
        (x for x in (task.get("status") or {}).get("conditions") or [] if x["type"] == "Ready"), {}
    )


def test_a_suspended_job_shows_on_the_task_and_it_carries_on_when_resumed(
    controller_factory, engine, kubelet, probe, namespace
):
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f", run_seconds=0.2))
    engine.create(objects.local_mpe("m"))
    controller_factory()
    engine.create(
        objects.task(
            "t",
            workflow_name="wf",
            function_name="f",
            mpe_name="m",
            templatePatches={"spec": {"suspend": True}},
        )
    )
    wait_for(
        lambda: ready(probe.task("t") or {}).get("reason") == "JobSuspended",
        timeout=60,
        what="Ready=False/JobSuspended",
    )
    task = probe.task("t")
    assert task["status"]["phase"] == "Running"
    assert ready(task)["status"] == "False"
    assert "suspended" in ready(task)["message"]
    wait_for(
        lambda: "JobSuspended" in probe.event_reasons("t"), timeout=10, what="a JobSuspended Event"
    )
    suspended = [e for e in probe.events("t") if e.get("reason") == "JobSuspended"]
    assert suspended[0]["type"] == "Normal"
    assert probe.pods(jobs.job_name(task)) == []  # nothing runs

    probe.rest.patch(JOBS, namespace, jobs.job_name(task), {"spec": {"suspend": False}})
    done = probe.wait_phase("t", "Succeeded", timeout=60)
    assert conditions_of(done).get("Complete") == "True"
    probe.wait_event("t", "JobResumed")
