"""Deleting whole namespaces leaves nothing behind, in either cluster, whatever order Kubernetes
deletes their objects in (docs/operations.md, "Deleting a namespace").

Each round makes a namespace with a Workflow, a local and a remote MediaProcessingEntity, the
remote one's kubeconfig Secret and Tasks on both (Running, and finished), then deletes the
namespace -- at once, after the kubeconfig Secret was deleted first, while the controller is
killed and restarted, or before the Tasks have Jobs. Afterwards no task-labelled Job or Secret of
that namespace exists in either cluster, the controller has let go of every object of the
namespace (its Tasks, Workflows and MediaProcessingEntities are gone, finalizers released) within
:data:`NAMESPACE_GONE_WITHIN` seconds, and the namespace itself is gone after that within
:data:`NAMESPACE_CONTROLLER_BACKOFF` seconds. The controller runs as installed, for all namespaces.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kubernetes import client

from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES, TASKS, WORKFLOWS
from taskfsm.kube.rest import JOBS, NAMESPACES, SECRETS, Rest
from taskfsm_dev import objects
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import Cluster

NAMESPACE_GONE_WITHIN = 120
NAMESPACE_CONTROLLER_BACKOFF = 180
"""kube-controller-manager's namespace controller re-checks a namespace whose content is not gone
yet with an exponential backoff of up to 60 s per retry (a Kubernetes bound, not taskfsm's), and
on a loaded machine it works through every test's namespace deletion at once: the namespace
itself may follow the last object a minute or more later (a run at load average 20 took over
120 s in all)."""
"""Seconds from the namespace's deletion until it is gone (the stated bound)."""

pytestmark = pytest.mark.timeout(900)

ROUNDS = ("at-once", "secret-first", "controller-restarted", "before-jobs")


def children(rest: Rest, namespace: str | None, task_namespace: str) -> list[str]:
    """Task-labelled Jobs and Secrets of ``task_namespace``'s Tasks (``namespace`` None: all)."""
    found = []
    selector = f"engine.nagare.media/task-namespace={task_namespace}"
    for res in (JOBS, SECRETS):
        for obj in rest.list(res, namespace, label_selector=selector)["items"]:
            meta = obj["metadata"]
            found.append(f"{res.kind} {meta['namespace']}/{meta['name']}")
    return found


def held(rest: Rest, namespace: str) -> list[str]:
    """The namespace's objects the controller keeps a finalizer on, still there."""
    return [
        f"{res.kind} {obj['metadata']['name']}"
        for res in (TASKS, WORKFLOWS, MEDIA_PROCESSING_ENTITIES)
        for obj in rest.list(res, namespace)["items"]
    ]


def gone(rest: Rest, namespace: str) -> bool:
    try:
        rest.get(NAMESPACES, None, namespace)
    except NotFound:
        return True
    return False


def populate(api_client, remote, remote_ns: str, namespace: str, *, wait_jobs: bool) -> Cluster:
    cluster = Cluster(api_client, namespace)
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(objects.function("short", run_seconds=0.2))
    cluster.create(objects.local_mpe("local"))
    cluster.create(
        kubeconfig_secret("remote-kubeconfig", remote.kubeconfig_dict(namespace=remote_ns))
    )
    cluster.create(remote_mpe("remote", "remote-kubeconfig"))
    for mpe in ("local", "remote"):
        for fn, count in (("long", 2), ("short", 1)):
            for i in range(count):
                cluster.create(
                    objects.task(
                        f"{mpe}-{fn}-{i}", workflow_name="wf", function_name=fn, mpe_name=mpe
                    )
                )
    if wait_jobs:
        wait_for(
            lambda: (
                all(
                    cluster.phase(f"{m}-long-{i}") == "Running"
                    for m in ("local", "remote")
                    for i in range(2)
                )
                and all(cluster.phase(f"{m}-short-0") == "Succeeded" for m in ("local", "remote"))
            ),
            timeout=90,
            what=f"{namespace}: Tasks Running and finished",
        )
    return cluster


def delete_round(
    round_: str, api_client, rest: Rest, remote_rest: Rest, remote, remote_ns: str, restart
) -> float:
    """One round (:data:`ROUNDS`); the seconds until the controller let go of its objects."""
    namespace = f"nsdel-{round_}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": namespace}})
    with SimulatedKubelet(api_client, namespace=namespace):
        populate(api_client, remote, remote_ns, namespace, wait_jobs=round_ != "before-jobs")
        if round_ == "secret-first":
            rest.delete(SECRETS, namespace, "remote-kubeconfig")
            time.sleep(1)
        started = time.monotonic()
        core.delete_namespace(namespace, propagation_policy="Background")
        if round_ == "controller-restarted":
            time.sleep(1)
            restart()
        wait_for(
            lambda: gone(rest, namespace) or not held(rest, namespace),
            timeout=NAMESPACE_GONE_WITHIN,
            interval=0.5,
            what=lambda: (
                f"{round_}: the objects of namespace {namespace} gone; left: "
                f"{held(rest, namespace)} {children(rest, None, namespace)} "
                f"{children(remote_rest, remote_ns, namespace)}"
            ),
        )
        took = time.monotonic() - started
        wait_for(
            lambda: gone(rest, namespace),
            timeout=NAMESPACE_CONTROLLER_BACKOFF,
            interval=0.5,
            what=lambda: (
                f"{round_}: namespace {namespace} gone; left: {children(rest, None, namespace)} "
                f"{children(remote_rest, remote_ns, namespace)}"
            ),
        )
    assert children(rest, None, namespace) == [], round_
    wait_for(
        lambda: children(remote_rest, remote_ns, namespace) == [],
        timeout=90,  # a bound for a loaded machine; a quiet one takes seconds
        what=f"{round_}: the remote cluster's Jobs and Secrets of {namespace} gone",
    )
    return took


def test_deleting_whole_namespaces_leaves_no_job_or_secret_in_either_cluster(
    api_client, start_controller, remote_namespace, crds
):
    remote, remote_ns = remote_namespace
    rest = Rest(api_client)
    args = ["--cleanup-timeout=60"]
    procs = [start_controller(namespace=None, args=args)]

    def restart() -> None:
        procs[-1].kill()
        time.sleep(2)
        procs.append(start_controller(namespace=None, args=args, name=f"taskfsm-{len(procs)}"))

    with remote.api_client() as remote_api:
        remote_rest = Rest(remote_api)
        durations = [
            (r, delete_round(r, api_client, rest, remote_rest, remote, remote_ns, restart))
            for r in ROUNDS
        ]
    print(
        "objects of the namespace released after: "
        + ", ".join(f"{r} {d:.1f}s" for r, d in durations)
    )
