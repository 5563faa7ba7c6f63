"""Where a Task's Job runs: local and remote MediaProcessingEntities (§1.7, §3.7 step 1).

A remote MPE's kubeconfig (in a Secret) points at the test's API server, with the test's
namespace as context namespace: the Job lands there, through a separate client and Job watch.
``localMediaProcessingEntitiesOnly`` refuses a remote MPE; an MPE that is not ready says why in
the Task's message and the Task proceeds once the MPE becomes ready; a changed kubeconfig Secret
rebuilds the client at once (its watch).
"""

from __future__ import annotations

import contextlib
import uuid

from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.waiting import wait_for


def kubeconfig_in(api_client, control_plane, namespace: str, name: str = "kubeconfig") -> None:
    secret = objects.kubeconfig_secret(name, control_plane.kubeconfig_dict(namespace=namespace))
    client.CoreV1Api(api_client).create_namespaced_secret(namespace, secret)


def test_task_runs_on_a_remote_mpe(
    engine, controller, kubelet, probe, namespace, api_client, control_plane
):
    """A Task on a remote MPE gets its Job and Secret in the kubeconfig context's namespace and
    succeeds, observed through the remote client's Job watch."""
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(objects.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="remote"))
    done = probe.wait_phase("t", "Succeeded")
    name = job_name(done)
    assert done["status"]["jobRef"]["namespace"] == namespace
    assert probe.secret(name)["metadata"]["ownerReferences"][0]["name"] == name
    cluster = controller.registry.get(done["status"]["mediaProcessingEntityRef"])
    assert cluster is not None
    assert cluster.remote


def test_local_only_function_refuses_a_remote_mpe(
    engine, controller, probe, namespace, api_client, control_plane
):
    """A Function with localMediaProcessingEntitiesOnly on a remote MPE stays JobPending with
    the §3.14 message and creates nothing."""
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(objects.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f", local_only=True))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="remote"))
    task = probe.wait_message(
        "t",
        "localMediaProcessingEntitiesOnly is true, but selected MediaProcessingEntity is remote",
    )
    assert task["status"]["phase"] == "JobPending"
    assert probe.jobs() == []
    assert probe.secrets() == []


def test_mpe_not_ready_says_why_then_recovers(
    engine, controller, probe, namespace, api_client, control_plane
):
    """A Task whose MPE cannot be used yet (kubeconfig Secret missing) says so with the MPE's
    reason; once the Secret exists the MPE becomes Ready and the Task runs."""
    engine.create(objects.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="remote"))
    task = probe.wait_message("t", "MediaProcessingEntity does not exist or is not ready: ")
    assert 'secrets "kubeconfig" not found' in task["status"]["message"]
    assert task["status"]["phase"] == "JobPending"
    kubeconfig_in(api_client, control_plane, namespace)
    wait_for(
        lambda: (
            (engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, "remote").get("status") or {}).get(
                "message"
            )
            == ""
        ),
        timeout=90,
        what="MPE Ready",
    )
    running = probe.wait_phase("t", "Running", timeout=90)
    assert running["status"]["message"] == ""


def test_kubeconfig_secret_change_rebuilds_the_client_at_once(
    engine, controller, kubelet, probe, namespace, api_client, control_plane, remote_namespace
):
    """The kubeconfig Secret of remote MPEs is watched (one watch per Secret,
    shared by the MPEs naming it, caching only metadata): pointing it at another cluster
    rebuilds both MPEs' client and Job watch without any MPE event or resync, Tasks then run in
    the new cluster, and the watch stops with the last MPE naming the Secret."""
    controller.mpe_reconciler.resync_seconds = 3600  # only the Secret watch can see the change
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(objects.remote_mpe("a", secret_name="kubeconfig"))
    engine.create(objects.remote_mpe("b", secret_name="kubeconfig"))
    keys = {name: (c.KIND_MEDIA_PROCESSING_ENTITY, namespace, name) for name in ("a", "b")}
    refs = {name: {"kind": k, "namespace": ns, "name": n} for name, (k, ns, n) in keys.items()}
    registry = controller.registry
    wait_for(lambda: all(registry.get(r) for r in refs.values()), timeout=30, what="MPEs set up")
    secret = (namespace, "kubeconfig")
    assert registry.secret_watches() == {secret: set(keys.values())}
    cached = registry.secret_cache(secret)
    assert [sorted(obj) for obj in cached] == [["apiVersion", "kind", "metadata"]]
    assert sorted(cached[0]["metadata"]) == ["name", "namespace", "resourceVersion", "uid"]

    remote, remote_ns = remote_namespace
    rotated = objects.kubeconfig_secret("kubeconfig", remote.kubeconfig_dict(namespace=remote_ns))
    client.CoreV1Api(api_client).patch_namespaced_secret(
        "kubeconfig", namespace, {"data": rotated["data"]}
    )

    def rebuilt(name: str) -> bool:
        cluster = registry.get(refs[name])
        return cluster is not None and cluster.rest.api_client.configuration.host == remote.server

    wait_for(lambda: rebuilt("a") and rebuilt("b"), timeout=60, what="clients rebuilt")
    assert registry.get(refs["a"]).jobs is registry.get(refs["b"]).jobs  # one shared Job watch
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="b"))
    done = probe.wait_phase("t", "Succeeded", timeout=60)
    assert done["status"]["jobRef"]["namespace"] == remote_ns
    assert probe.jobs() == []  # nothing in the old cluster

    engine.api.delete_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, "mediaprocessingentities", "a"
    )
    wait_for(
        lambda: registry.secret_watches() == {secret: {keys["b"]}}, timeout=30, what="a released"
    )
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t")
    wait_for(lambda: probe.task("t") is None, timeout=60, what="Task gone")  # MPE b waits for it
    engine.api.delete_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, "mediaprocessingentities", "b"
    )
    wait_for(lambda: registry.secret_watches() == {}, timeout=60, what="Secret watch stopped")


def test_a_local_and_a_remote_mpe_watching_the_same_jobs_both_finish_their_tasks(
    engine, controller_factory, kubelet, probe, namespace, api_client, control_plane
):
    """Two MPEs reach the same namespace of the same cluster (one local, one remote with other
    credentials), so two Job watches see every Job. Each Task is woken by the watch its reconcile
    reads: the other watch delivering the outcome first must not silence it (regression: Tasks
    stayed Running after their Job completed until the periodic resync, here too far off to
    hide it)."""
    controller_factory(resync_seconds=3600)
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(objects.remote_mpe("remote", secret_name="kubeconfig"))
    engine.create(objects.local_mpe("local"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    names = [f"{mpe}-{i}" for mpe in ("local", "remote") for i in range(4)]
    for name in names:
        mpe = name.split("-")[0]
        engine.create(objects.task(name, workflow_name="wf", function_name="f", mpe_name=mpe))
    for name in names:
        done = probe.wait_phase(name, "Succeeded")
        assert done["status"]["mediaProcessingEntityRef"]["name"] == name.split("-")[0]
    assert len(probe.jobs()) == len(names)


def _repoint(engine, namespace: str, name: str, spec: dict, *, cluster: bool = False) -> None:
    """Replace the MPE's spec (a merge patch: ``None`` drops a key)."""
    if cluster:
        engine.api.patch_cluster_custom_object(
            c.GROUP, c.VERSION, "clustermediaprocessingentities", name, {"spec": spec}
        )
        return
    engine.api.patch_namespaced_custom_object(
        c.GROUP, c.VERSION, namespace, "mediaprocessingentities", name, {"spec": spec}
    )


def _moved_away_then_finished(
    engine, controller_factory, probe, namespace, api_client, spec, *, cluster_mpe: str = ""
):
    """Task ``t`` runs on MPE ``m`` (or the ClusterMediaProcessingEntity ``cluster_mpe``, whose
    Jobs start in ``namespace``); it is pointed elsewhere (``spec``); then ``t``'s Job finishes
    where it was made, and ``t`` must see it (no resync can help: it is an hour off) and, once
    deleted, take its Job and Secret with it; the earlier location is let go then."""
    # A cluster MPE moving to another namespace needs a controller of all namespaces (one of a
    # single namespace refuses any other, docs/security.md).
    scope = {"namespace": None} if cluster_mpe else {}
    controller = controller_factory(resync_seconds=3600, **scope)
    controller.mpe_reconciler.resync_seconds = 3600
    name = cluster_mpe or "m"
    if cluster_mpe:
        engine.create(objects.local_mpe(name, namespace=namespace, cluster=True))
        key = (c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY, "", name)
        mpe_ref = {"kind": c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY, "name": name}
    else:
        engine.create(objects.local_mpe(name))
        key = (c.KIND_MEDIA_PROCESSING_ENTITY, namespace, name)
        mpe_ref = {"kind": c.KIND_MEDIA_PROCESSING_ENTITY, "name": name}
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("f"))
    engine.create(
        objects.task("t", workflow_name="wf", function_name="f", mediaProcessingEntityRef=mpe_ref)
    )
    probe.wait_phase("t", "Running")
    [job] = probe.jobs()
    ref = {"kind": key[0], "namespace": key[1], "name": key[2]}
    registry = controller.registry
    first = registry.get(ref)
    _repoint(engine, namespace, name, spec, cluster=bool(cluster_mpe))
    wait_for(lambda: registry.get(ref) is not first, timeout=60, what="MPE client rebuilt")
    assert [cl.namespace for cl in registry.retired(key)] == [namespace]
    with SimulatedKubelet(api_client, namespace=namespace):
        done = probe.wait_phase("t", "Succeeded")
    assert done["status"]["jobRef"]["uid"] == job["metadata"]["uid"]
    assert [j["metadata"]["uid"] for j in probe.jobs()] == [job["metadata"]["uid"]]
    engine.api.delete_namespaced_custom_object(c.GROUP, c.VERSION, namespace, "tasks", "t")
    wait_for(lambda: probe.task("t") is None, timeout=60, what="Task gone")
    wait_for(lambda: probe.jobs() == [] and probe.secrets() == [], timeout=60, what="Job gone")
    wait_for(lambda: registry.retired(key) == [], timeout=60, what="old location let go")


def test_a_job_is_followed_where_it_was_made_after_its_mpe_moves_to_another_namespace(
    engine, controller_factory, probe, namespace, api_client
):
    """D19: A local ClusterMediaProcessingEntity's namespace changes under a running
    Task; new Jobs go to the new namespace, the Task's own Job is still watched in the old one.
    (A namespaced MPE cannot move: it runs Jobs in its own namespace only, docs/security.md.)"""
    other = f"moved-{uuid.uuid4().hex[:6]}"
    cluster_mpe = f"m-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": other}})
    try:
        _moved_away_then_finished(
            engine,
            controller_factory,
            probe,
            namespace,
            api_client,
            {"local": {"namespace": other}},
            cluster_mpe=cluster_mpe,
        )
    finally:
        client.CoreV1Api(api_client).delete_namespace(other)
        with contextlib.suppress(client.ApiException):
            client.CustomObjectsApi(api_client).delete_cluster_custom_object(
                c.GROUP, c.VERSION, "clustermediaprocessingentities", cluster_mpe
            )


def test_a_job_is_followed_where_it_was_made_after_its_mpe_moves_to_another_cluster(
    engine, controller_factory, probe, namespace, api_client, remote_namespace
):
    """D19: A local MPE becomes a remote one under a running Task: the Task's Job
    finishes in the first cluster and is seen there, not called lost (JobLost) nor left behind."""
    remote, remote_ns = remote_namespace
    secret = objects.kubeconfig_secret("kubeconfig", remote.kubeconfig_dict(namespace=remote_ns))
    client.CoreV1Api(api_client).create_namespaced_secret(namespace, secret)
    spec = {"local": None, "remote": {"kubeconfig": {"secretRef": {"name": "kubeconfig"}}}}
    _moved_away_then_finished(engine, controller_factory, probe, namespace, api_client, spec)


def test_an_mpe_whose_kubeconfig_secret_went_first_is_deleted_without_waiting(
    engine, controller_factory, probe, namespace, api_client, control_plane
):
    """Its kubeconfig Secret deleted first (as a namespace deletion may), an MPE that no Task
    uses drops its client (`Ready=False`, `KubeconfigSecretUnavailable`); deleted then, it goes
    at once with a Warning Event `OrphansNotChecked` saying no client can be built, instead of
    waiting out `--cleanup-timeout` for a cluster it cannot search however long it waits
    (regression: a namespace deletion took 65 s longer, its cleanup timeout)."""
    controller_factory(cleanup_timeout=600)
    kubeconfig_in(api_client, control_plane, namespace)
    engine.create(objects.remote_mpe("remote", secret_name="kubeconfig"))
    probe.wait_mpe_ready("remote")

    def ready_reason() -> str:
        status = engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, "remote").get("status") or {}
        ready = [cond for cond in status.get("conditions") or [] if cond["type"] == "Ready"]
        return ready[0]["reason"] if ready else ""

    client.CoreV1Api(api_client).delete_namespaced_secret("kubeconfig", namespace)
    wait_for(
        lambda: ready_reason() == "KubeconfigSecretUnavailable",
        timeout=60,
        what="the MPE says its kubeconfig Secret is gone",
    )
    engine.delete(c.KIND_MEDIA_PROCESSING_ENTITY, "remote")
    wait_for(
        lambda: not engine.names(c.KIND_MEDIA_PROCESSING_ENTITY),
        timeout=120,
        what="the MPE gone, well within its 600 s cleanup timeout",
    )
    probe.wait_event("remote", "OrphansNotChecked")
    notes = [e.get("note") or e.get("message") or "" for e in probe.events("remote")]
    assert any("no client of it can be built (KubeconfigSecretUnavailable)" in n for n in notes)
