"""With the controller as its own process: whatever is deleted while it
is down or cut off, no task-labelled Job or Secret outlives its Task, and a Task UID never gets
a second Job (a Job that vanished before its outcome was recorded fails the Task, JobLost).

Every test watches the Jobs of its namespace from the start (:class:`ChildLedger`), so a second
Job that was created and deleted between two checks still counts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import EVENTS, JOBS, MERGE_PATCH, SECRETS
from taskfsm.manifests import jobs
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for
from tests.support.chaos import ChildLedger, kubeconfig_via
from tests.support.cluster import job_audit

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def ledger(api_client, namespace) -> Iterator[ChildLedger]:
    with ChildLedger(api_client, namespace) as led:
        yield led


def world(cluster, *, run_seconds: float = 600) -> None:
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=run_seconds))
    cluster.create(objects.local_mpe("local"))


def run_task(cluster, name: str, *, mpe: str = "local") -> dict[str, Any]:
    cluster.create(objects.task(name, workflow_name="wf", function_name="long", mpe_name=mpe))
    wait_for(lambda: cluster.phase(name) == "Running", timeout=60, what=f"{name} Running")
    task = cluster.task(name)
    assert task is not None
    return task


def remove_task_for_good(rest, namespace: str, name: str) -> None:
    """What an operator does to a stuck Task: delete it and strip its finalizers."""
    rest.delete(TASKS, namespace, name)
    try:
        rest.patch(
            TASKS, namespace, name, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
        )
    except NotFound:
        return


def children(rest, namespace: str, task_name: str) -> list[str]:
    """``Kind/name`` of every Job and Secret labelled for Task ``task_name``."""
    selector = f"{c.LABEL_TASK_NAME}={task_name}"
    out = [
        f"Job/{j['metadata']['name']}"
        for j in rest.list(JOBS, namespace, label_selector=selector)["items"]
    ]
    out += [
        f"Secret/{s['metadata']['name']}"
        for s in rest.list(SECRETS, namespace, label_selector=selector)["items"]
    ]
    return sorted(out)


def orphan_events(rest, namespace: str, task_name: str) -> list[str]:
    items = rest.list(EVENTS, namespace)["items"]
    return [
        e["note"]
        for e in items
        if e.get("reason") == "OrphanDeleted"
        and (e.get("regarding") or {}).get("name") == task_name
    ]


def test_task_removed_while_the_controller_is_down_leaves_no_job_or_secret(
    cluster, kubelet, start_controller, ledger, namespace
):
    """A Running Task deleted with its finalizers stripped while the controller is down:
    on start-up its Job (still holding job-protection) and its Secret are released and deleted,
    with a Warning Event ``OrphanDeleted``; the other Task keeps its Job."""
    world(cluster)
    first = start_controller(name="first")
    gone = run_task(cluster, "gone")
    run_task(cluster, "kept")
    assert first.terminate() == 0
    remove_task_for_good(cluster.rest, namespace, "gone")
    assert children(cluster.rest, namespace, "gone") == sorted(
        [f"Job/{jobs.job_name(gone)}", f"Secret/{jobs.job_name(gone)}"]
    )

    start_controller(name="second")
    wait_for(
        lambda: children(cluster.rest, namespace, "gone") == [], timeout=60, what="orphans deleted"
    )
    wait_for(
        lambda: orphan_events(cluster.rest, namespace, "gone"),
        timeout=10,
        what="OrphanDeleted Event",
    )
    assert job_audit([cluster.task("kept")], cluster.jobs(), cluster.secrets()) == []
    assert cluster.phase("kept") == "Running"
    assert len(ledger.jobs_of("kept")) == 1


def test_task_removed_during_a_cut_leaves_no_job_or_secret(
    cluster, kubelet, start_controller, ledger, namespace, control_plane, tmp_path, installed_token
):
    """The same removal while the controller's connections to the API server are cut;
    after the restore the relist finds the Task gone and its Job and Secret are deleted."""
    world(cluster)
    with ApiProxy(control_plane.server) as proxy:
        start_controller(
            kubeconfig=kubeconfig_via(
                control_plane, proxy.url, tmp_path / "via-proxy", token=installed_token()
            )
        )
        gone = run_task(cluster, "gone")
        proxy.cut()
        remove_task_for_good(cluster.rest, namespace, "gone")
        wait_for(lambda: cluster.task("gone") is None, timeout=15, what="Task gone")
        proxy.restore()
        wait_for(
            lambda: children(cluster.rest, namespace, "gone") == [],
            timeout=90,
            what="orphans deleted",
        )
    assert ledger.jobs_of("gone") == {gone["status"]["jobRef"]["uid"]}


def strip_then_delete(rest, namespace: str, name: str) -> None:
    """The finalizer strip first, the deletion right after: the Task is gone at once."""
    rest.patch(TASKS, namespace, name, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
    with contextlib.suppress(NotFound):
        rest.delete(TASKS, namespace, name)


def test_back_to_back_delete_and_strip_with_the_controller_connected(
    cluster, kubelet, start_controller, ledger, namespace
):
    """Deletion and finalizer strip come right after each other, in both orders, while
    the controller is connected (it may see the deletion, the strip, or only the Task gone): no
    Task leaves a child behind."""
    world(cluster)
    start_controller()
    names = [f"t{i}" for i in range(6)]
    for name in names:
        run_task(cluster, name)
    for i, name in enumerate(names):
        (strip_then_delete if i % 2 else remove_task_for_good)(cluster.rest, namespace, name)
    for name in names:
        wait_for(
            lambda name=name: children(cluster.rest, namespace, name) == [],
            timeout=120,  # a bound for a loaded machine; a quiet one takes seconds
            what=lambda name=name: (
                f"{name}'s children gone (left: {children(cluster.rest, namespace, name)}; "
                f"Task: {_described(cluster.task(name))})"
            ),
        )
    for name in names:
        assert len(ledger.jobs_of(name)) == 1


def _described(task: dict[str, Any] | None) -> str:
    """What a failed wait shows of a Task: gone, or its finalizers, deletion and phase."""
    if task is None:
        return "gone"
    meta = task["metadata"]
    return (
        f"finalizers {meta.get('finalizers')}, deleting since {meta.get('deletionTimestamp')}, "
        f"phase {(task.get('status') or {}).get('phase')}"
    )


def test_task_recreated_under_the_same_name_while_down(
    cluster, kubelet, start_controller, ledger, namespace
):
    """A Task removed for good and created again under the same name while the
    controller is down: the old incarnation's Job and Secret go, the new Task gets exactly one
    Job of its own and runs."""
    world(cluster)
    first = start_controller(name="first")
    old = run_task(cluster, "same")
    first.kill()
    remove_task_for_good(cluster.rest, namespace, "same")
    wait_for(lambda: cluster.task("same") is None, timeout=15, what="old Task gone")
    cluster.create(objects.task("same", workflow_name="wf", function_name="long", mpe_name="local"))
    start_controller(name="second")
    wait_for(lambda: cluster.phase("same") == "Running", timeout=60, what="new Task Running")
    new = cluster.task("same")
    assert new is not None
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    wait_for(
        lambda: (
            children(cluster.rest, namespace, "same")
            == sorted([f"Job/{jobs.job_name(new)}", f"Secret/{jobs.job_name(new)}"])
        ),
        timeout=60,
        what="only the new Task's Job and Secret",
    )
    assert job_audit([new], cluster.jobs(), cluster.secrets()) == []


def test_orphaned_secret_without_a_job_is_swept(cluster, kubelet, start_controller, namespace):
    """A task-labelled helper Secret whose Task and Job are both gone (here: made by
    hand) is found by the periodic sweep and deleted; one whose Task exists is kept."""
    world(cluster)
    start_controller(args=["--orphan-sweep-period=2"])
    run_task(cluster, "alive")
    labels = {
        c.LABEL_WORKFLOW_NAMESPACE: namespace,
        c.LABEL_WORKFLOW_NAME: "wf",
        c.LABEL_TASK_NAMESPACE: namespace,
        c.LABEL_TASK_NAME: "ghost",
    }
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ghost-0123456789", "labels": labels},
            "data": {"data.json": "e30="},
        }
    )
    wait_for(
        lambda: children(cluster.rest, namespace, "ghost") == [],
        timeout=30,
        what="orphaned Secret swept",
    )
    assert job_audit([cluster.task("alive")], cluster.jobs(), cluster.secrets()) == []


def test_task_removed_while_down_in_a_remote_cluster(
    cluster, kubelet, start_controller, namespace, control_plane, remote_namespace
):
    """Item 1 on a remote MediaProcessingEntity: the orphaned Job and Secret in the other
    cluster are released and deleted too."""
    remote, remote_ns = remote_namespace
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(
        kubeconfig_secret("remote-kubeconfig", remote.kubeconfig_dict(namespace=remote_ns))
    )
    cluster.create(remote_mpe("remote", "remote-kubeconfig"))
    first = start_controller(name="first")
    run_task(cluster, "gone", mpe="remote")
    with remote.api_client() as api:
        from taskfsm.kube.rest import Rest

        remote_rest = Rest(api)
        assert len(children(remote_rest, remote_ns, "gone")) == 2
        assert first.terminate() == 0
        remove_task_for_good(cluster.rest, namespace, "gone")
        start_controller(name="second")
        wait_for(
            lambda: children(remote_rest, remote_ns, "gone") == [],
            timeout=60,
            what="remote orphans deleted",
        )


def test_job_finished_and_removed_while_down_fails_the_task_with_job_lost(
    cluster, kubelet, start_controller, ledger, namespace
):
    """A Running Task whose Job completed and was then removed (job-protection
    stripped) while the controller was down: on restart the Task fails with reason JobLost;
    the finished work is never run again (no second Job)."""
    world(cluster, run_seconds=2)
    first = start_controller(name="first")
    task = run_task(cluster, "t")
    assert first.terminate() == 0
    name = jobs.job_name(task)

    def complete() -> bool:
        job = cluster.rest.get(JOBS, namespace, name)
        return any(
            x["type"] == "Complete" and x["status"] == "True"
            for x in (job.get("status") or {}).get("conditions") or []
        )

    wait_for(complete, timeout=60, what="Job Complete while the controller is down")
    cluster.rest.patch(
        JOBS, namespace, name, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
    )
    cluster.rest.delete(JOBS, namespace, name, propagation="Background")
    wait_for(lambda: not cluster.jobs(), timeout=30, what="Job gone")

    start_controller(name="second")
    wait_for(lambda: cluster.phase("t") == "Failed", timeout=60, what="Failed")
    condition = next(x for x in cluster.task("t")["status"]["conditions"] if x["type"] == "Failed")
    assert condition["reason"] == "JobLost"
    assert cluster.jobs() == []
    assert len(ledger.jobs_of("t")) == 1


def test_job_removed_during_a_cut_is_never_made_again(
    cluster, kubelet, start_controller, ledger, namespace, control_plane, tmp_path, installed_token
):
    """With the controller's connections cut, a Running Task's Job is deleted and its
    finalizer stripped; after the restore the Task fails (JobLost), and no second Job with the
    same name ever appears."""
    world(cluster)
    with ApiProxy(control_plane.server) as proxy:
        start_controller(
            kubeconfig=kubeconfig_via(
                control_plane, proxy.url, tmp_path / "via-proxy", token=installed_token()
            )
        )
        task = run_task(cluster, "t")
        proxy.cut()
        name = jobs.job_name(task)
        cluster.rest.patch(
            JOBS, namespace, name, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
        )
        cluster.rest.delete(JOBS, namespace, name, propagation="Background")
        wait_for(lambda: not cluster.jobs(), timeout=30, what="Job gone")
        proxy.restore()
        wait_for(
            lambda: cluster.phase("t") == "Failed", timeout=90, what="Failed after the restore"
        )
    condition = next(x for x in cluster.task("t")["status"]["conditions"] if x["type"] == "Failed")
    assert condition["reason"] == "JobLost"
    assert cluster.jobs() == []
    assert len(ledger.jobs_of("t")) == 1


def test_mpe_deleted_with_an_orphan_in_its_cluster_goes_without_leaving_it(
    cluster, kubelet, start_controller, namespace
):
    """A Task removed outright while the controller is down, and its
    MediaProcessingEntity deleted too: after the restart the orphaned Job and Secret are
    deleted before the MPE lets go (no client would reach them afterwards); a finished Task
    whose Job was released does not hold the MPE back."""
    from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES

    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(objects.function("quick", run_seconds=0))
    cluster.create(objects.local_mpe("local"))
    first = start_controller(name="first")
    run_task(cluster, "gone")
    cluster.create(
        objects.task("done", workflow_name="wf", function_name="quick", mpe_name="local")
    )
    wait_for(lambda: cluster.phase("done") == "Succeeded", timeout=60, what="done Succeeded")
    done_job = jobs.job_name(cluster.task("done"))
    wait_for(
        lambda: not cluster.rest.get(JOBS, namespace, done_job)["metadata"].get("finalizers"),
        timeout=30,
        what="the finished Task's Job released",
    )
    first.kill()
    remove_task_for_good(cluster.rest, namespace, "gone")
    cluster.rest.delete(MEDIA_PROCESSING_ENTITIES, namespace, "local")
    start_controller(name="second")

    def mpe_gone() -> bool:
        try:
            cluster.rest.get(MEDIA_PROCESSING_ENTITIES, namespace, "local")
        except NotFound:
            return True
        return False

    wait_for(mpe_gone, timeout=60, what="the MPE gone")
    assert children(cluster.rest, namespace, "gone") == []
