"""A Task UID gets at most one Job, and the outcome a Job shows is the Task's (D18b), against
the real control plane with an in-process controller: a Task that says Running without a Job
fails with JobLost and gets none; an outcome the Job already shows wins over its Workflow's
termination.
"""

from __future__ import annotations

import threading
from typing import Any

from taskfsm.api import constants as c
from taskfsm.kube.rest import Resource
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.faults import Faults, FaultyRest, RequestLog
from tests.support.probes import failed_reason, mpe_ready, warnings, world


class HeldStatusRest(FaultyRest):
    """A FaultyRest whose status writes of chosen Tasks wait until ``release`` is set."""

    def __init__(self, *args: Any, held: set[str], release: threading.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held, self.release = held, release

    def request(self, method: str, res: Resource, path: str, **kwargs: Any) -> Any:
        if method == "PATCH" and path.endswith("/status") and path.split("/")[-2] in self.held:
            self.release.wait(60)
        return super().request(method, res, path, **kwargs)


def test_running_task_without_a_job_ref_fails_with_job_lost_and_gets_no_job(
    controller_factory, engine, probe, namespace
):
    """A Task whose status says Running with no jobRef (an old controller, a restore)
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


def test_an_outcome_the_job_shows_is_recorded_though_the_workflow_terminated(
    controller_factory, engine, kubelet, probe, namespace
):
    """One Workflow (FailWorkflow), Task ``a`` fails; Tasks ``b`` (succeeds) and ``c``
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
