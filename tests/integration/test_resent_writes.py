"""Every write the controller makes may land twice: a transport that resends a request on a reused
connection that died (libcurl does) makes the API server process it twice, and the controller
sees only the second answer. Each write is safe against that (docs/architecture.md, "Every write
may be sent twice"): a create has a name chosen before it is sent (the second gets
``AlreadyExists``, which adopts), a patch or delete carries a precondition (the second gets 409
or 404, and a patch whose content already holds counts as landed). Here every mutating request
of the controller, to the main cluster and the Jobs' cluster, Events included, is sent twice.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, ClassVar

from taskfsm.api import constants as c
from taskfsm.kube.client import ApiClient
from taskfsm.kube.errors import KubeError
from taskfsm.kube.rest import Resource, Rest
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for

WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})


class ResendingRest(Rest):
    """Sends every write twice and answers with the second answer, as a transport replaying a
    request whose first send landed but whose answer was lost. Counts the writes it doubled."""

    doubled: ClassVar[Counter[str]] = Counter()

    def request(self, method: str, res: Resource, path: str, **kwargs: Any) -> Any:  # type: ignore[override]  # one signature for both overloads
        if method in WRITES:
            with contextlib.suppress(KubeError):
                super().request(method, res, path, **kwargs)
            ResendingRest.doubled[f"{method} {res.plural}"] += 1
        return super().request(method, res, path, **kwargs)


def resending(api: ApiClient) -> Rest:
    return ResendingRest(api)


def test_every_write_sent_twice_keeps_one_job_each_event_once_and_cleans_up(
    engine, controller_factory, kubelet, probe, namespace
):
    ResendingRest.doubled.clear()
    # With --task-phase-events, so that each phase change's Event is there to be doubled.
    controller = controller_factory(rest_factory=resending, task_phase_events=True)
    made = [
        engine.create(objects.workflow("wf")),
        engine.create(objects.function("ok")),
        engine.create(objects.function("bad", exit_code=1)),
        engine.create(objects.local_mpe("local")),
    ]
    for obj in made:  # a Task whose Function is not cached yet says so (a retried error)
        wait_for(
            lambda o=obj: controller.caches.get(o["kind"], namespace, o["metadata"]["name"]),
            timeout=30,
            what=f"{obj['kind']} {obj['metadata']['name']} in the controller's cache",
        )
    names = {"s1": "ok", "s2": "ok", "f1": "bad"}
    for name, function in names.items():
        engine.create(
            objects.task(name, workflow_name="wf", function_name=function, mpe_name="local")
        )
    for name, function in names.items():
        probe.wait_phase(name, "Succeeded" if function == "ok" else "Failed")
        probe.wait_event(name, "Succeeded" if function == "ok" else "Failed")
    tasks = {name: engine.task(name) for name in names}

    # One Job per Task, under its name, and one Event per phase change of each Task.
    assert sorted(j["metadata"]["name"] for j in probe.jobs()) == sorted(
        job_name(t) for t in tasks.values()
    )
    for name in names:
        reasons = Counter(probe.event_reasons(name))
        assert all(count == 1 for count in reasons.values()), (name, reasons)
        errors = [e.get("note") for e in probe.events(name) if e.get("reason") == "ReconcileError"]
        assert not errors, (name, errors)
    wait_for(
        lambda: (engine.get(c.KIND_WORKFLOW, "wf").get("status") or {}).get("phase") == "Failed",
        timeout=30,
        what="Workflow Failed",
    )

    # Deleting: every Task, Job and Secret goes.
    for name in names:
        engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", name)

    def left() -> list[str]:
        return [
            *(f"Task {n}" for n in engine.names(c.KIND_TASK)),
            *(f"Job {j['metadata']['name']}" for j in probe.jobs()),
            *(f"Secret {s['metadata']['name']}" for s in probe.secrets()),
        ]

    wait_for(lambda: not left(), timeout=90, what=lambda: f"nothing left (left: {left()})")
    # The writes were doubled: creates, patches (metadata, status, the Job's finalizer), deletes.
    kinds = {key.split()[0] for key in ResendingRest.doubled}
    assert {"POST", "PATCH", "DELETE"} <= kinds, ResendingRest.doubled
