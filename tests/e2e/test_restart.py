"""A controller process stopped in the middle of a run of Tasks (SIGKILL: a crash; SIGTERM: a
rollout) and started again finishes every Task with exactly one Job and no leaked Secret."""

from __future__ import annotations

import pytest

from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit

pytestmark = pytest.mark.timeout(240)

TASKS = 20


@pytest.mark.parametrize("stop", ["kill", "terminate"])
def test_restart_mid_run_leaves_one_job_per_task(cluster, kubelet, start_controller, stop):
    """Stopped mid-run and restarted, the controller ends every Task right with exactly one Job each."""
    cluster.create(objects.workflow("wf"))  # every succeeding Task; each failing one has its own
    cluster.create(objects.function("ok", run_seconds=2))
    cluster.create(objects.function("bad", run_seconds=1, exit_code=1))
    cluster.create(objects.local_mpe("local"))
    expected = {f"t{i:02d}": "Failed" if i % 5 == 0 else "Succeeded" for i in range(TASKS)}
    first = start_controller(name="first")
    for name, phase in expected.items():
        if phase == "Failed":  # a failed Task fails its Workflow, which would end its siblings
            cluster.create(objects.workflow(f"wf-{name}"))
            cluster.create(
                objects.task(
                    name, workflow_name=f"wf-{name}", function_name="bad", mpe_name="local"
                )
            )
        else:
            cluster.create(
                objects.task(name, workflow_name="wf", function_name="ok", mpe_name="local")
            )

    wait_for(
        lambda: len(cluster.jobs()) >= TASKS // 4,
        timeout=30,
        interval=0.05,
        what="a quarter of the Jobs",
    )
    if stop == "kill":
        first.kill()
    else:
        assert first.terminate() == 0
    at_stop = {name: cluster.phase(name) for name in expected}
    jobs_at_stop = len(cluster.jobs())
    assert (
        sum(1 for p in at_stop.values() if p in ("Succeeded", "Failed")) < TASKS
    )  # really mid-run
    print(f"stopped ({stop}) with {jobs_at_stop} Jobs; phases {sorted(at_stop.values())}")

    start_controller(name="second")

    def wrong() -> dict[str, str]:
        return {
            name: phase for name in expected if (phase := cluster.phase(name)) != expected[name]
        }

    try:
        wait_for(lambda: not wrong(), timeout=90, what="every Task in its expected phase")
    except TimeoutError:
        bad = wrong()
        first_bad = cluster.task(next(iter(bad))) if bad else None
        pytest.fail(
            f"Tasks not in their expected phase: {bad}; first: {first_bad and first_bad.get('status')}"
        )
    tasks = cluster.tasks()
    assert job_audit(tasks, cluster.jobs(), cluster.secrets()) == []
    assert len(cluster.jobs()) == TASKS
    lost = [
        t["metadata"]["name"]
        for t in tasks
        if any(
            x.get("reason") == "JobLost" for x in (t.get("status") or {}).get("conditions") or []
        )
    ]
    assert lost == []
