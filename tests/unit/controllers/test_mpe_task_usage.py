"""What an MPE's pass reads of the Tasks naming it (`TaskIndex.using`): every one counts, but
only those not finished or still naming a Job are read, and one at a time, so that 100,000
finished Tasks whose Jobs expired cost their MPE neither a decode each nor a list of them all
(docs/performance.md, "Memory and scaling")."""

from __future__ import annotations

from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.task.index import TaskIndex
from taskfsm.kube.informer import ADDED, MODIFIED, Informer
from taskfsm.kube.packing import finished_task
from taskfsm.kube.resources import TASKS

MPE = (c.KIND_MEDIA_PROCESSING_ENTITY, "ns", "local")


def task(name: str, phase: str, *, job: bool, rv: int = 1) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": phase,
        "mediaProcessingEntityRef": {
            "kind": c.KIND_MEDIA_PROCESSING_ENTITY,
            "namespace": "ns",
            "name": "local",
        },
    }
    if job:
        status["jobRef"] = {"name": f"{name}-job", "namespace": "ns", "uid": f"u-{name}"}
    return {
        "apiVersion": "engine.nagare.media/v1alpha1",
        "kind": "Task",
        "metadata": {"namespace": "ns", "name": name, "uid": name, "resourceVersion": str(rv)},
        "status": status,
    }


def tasks_index() -> tuple[Informer, TaskIndex]:
    informer = Informer(None, TASKS, pack_when=finished_task)  # type: ignore[arg-type]  # no request is made here
    return informer, TaskIndex(informer)


def test_finished_tasks_whose_jobs_expired_count_but_are_not_read():
    informer, index = tasks_index()
    for i in range(50):
        informer._handle({"type": ADDED, "object": task(f"done-{i}", "Succeeded", job=False)})
    informer._handle({"type": ADDED, "object": task("kept", "Failed", job=True)})
    informer._handle({"type": ADDED, "object": task("running", "Running", job=True)})
    informer._handle({"type": ADDED, "object": task("new", "", job=False)})
    reads = []
    informer._loaded = lambda stored, real=informer._loaded: reads.append(1) or real(stored)  # type: ignore[method-assign]
    count, needing = index.using(MPE)
    assert count == 53
    assert reads == []  # nothing read before the iteration
    names = sorted(t["metadata"]["name"] for t in needing)
    assert names == ["kept", "new", "running"]
    assert len(reads) == 3


def test_a_task_leaves_the_read_ones_when_its_job_reference_is_cleared():
    informer, index = tasks_index()
    informer._handle({"type": ADDED, "object": task("t", "Succeeded", job=True)})
    assert [t["metadata"]["name"] for t in index.using(MPE)[1]] == ["t"]
    informer._handle({"type": MODIFIED, "object": task("t", "Succeeded", job=False, rv=2)})
    count, needing = index.using(MPE)
    assert count == 1
    assert list(needing) == []
