"""What the controller writes to a Task's status: observedGeneration, conditions, message.

Status goes through merge patches on ``/status`` without resourceVersion (the controller owns
it); ``observedGeneration`` tells which spec the status describes, so a spec edit alone is
acknowledged with a status write.
"""

from __future__ import annotations

from taskfsm.kube.resources import TASKS
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.probes import conditions_of


def test_status_records_observed_generation_and_conditions(engine, controller, probe):
    """A Running Task's status names the generation it saw, has Initialized and Ready True and
    an empty message."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    created = engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    running = probe.wait_phase("t", "Running")
    status = running["status"]
    assert status["observedGeneration"] == created["metadata"]["generation"] == 1
    assert conditions_of(running) == {"Initialized": "True", "Ready": "True"}
    assert status["message"] == ""


def test_spec_edit_is_acknowledged_through_observed_generation(
    engine, controller, probe, namespace
):
    """Editing the spec of a Running Task bumps its generation; the controller acknowledges it
    in status.observedGeneration without changing anything else."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    engine.create(objects.local_mpe("m"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    before = probe.wait_phase("t", "Running")
    edited = probe.rest.patch(
        TASKS, namespace, "t", {"spec": {"humanReadable": {"name": "renamed"}}}
    )
    assert edited["metadata"]["generation"] == 2
    wait_for(
        lambda: probe.status("t").get("observedGeneration") == 2,
        timeout=30,
        what="observedGeneration 2",
    )
    after = probe.task("t")["status"]
    assert {k: v for k, v in after.items() if k != "observedGeneration"} == {
        k: v for k, v in before["status"].items() if k != "observedGeneration"
    }
