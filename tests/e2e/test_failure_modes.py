"""docs/behaviour.md F4-F7 against the real control plane.

F4 and F5 run ``taskfsm run`` as a process whose Job watch goes through a TCP proxy: a remote
MediaProcessingEntity whose kubeconfig points at :class:`taskfsm_dev.proxies.ApiProxy` in front
of the main API server, so only the MPE connection (Job watch, Job and Secret writes) breaks while
the Task watch stays up. F6 and F7 run the controller in process to count its requests.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import JOBS, MERGE_PATCH, NAMESPACES, Rest
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe
from taskfsm_dev.proxies import ApiProxy
from taskfsm_dev.waiting import wait_for
from tests.support.cluster import job_audit

WATCH_TIMEOUT, READ_MARGIN = 4, 2
"""F5: a silent connection must be noticed within WATCH_TIMEOUT + READ_MARGIN seconds."""

FIRST_BACKOFF_MAX = 0.75
"""The longest wait before the first reconnect after one failure (0.5 s, jittered up to 1.5x)."""

RECONNECT_BOUND = 30 * 1.5
"""F4: after the API server is reachable again, the Job watch reconnects within the capped,
jittered backoff (``--watch-max-backoff`` default 30 s x 1.5)."""


@pytest.fixture
def proxy(control_plane):
    with ApiProxy(control_plane.server) as p:
        yield p


def proxied_mpe(cluster, control_plane, proxy, namespace: str) -> None:
    """MediaProcessingEntity ``via-proxy``: Jobs in ``namespace`` of the main cluster, reached
    through ``proxy``."""
    kubeconfig = control_plane.kubeconfig_dict(namespace=namespace)
    kubeconfig["clusters"][0]["cluster"]["server"] = proxy.url
    cluster.create(kubeconfig_secret("via-proxy-kubeconfig", kubeconfig))
    cluster.create(remote_mpe("via-proxy", "via-proxy-kubeconfig"))


def mpe_ready(cluster, name: str) -> bool:
    from taskfsm.kube.resources import MEDIA_PROCESSING_ENTITIES

    status = (
        cluster.rest.get(MEDIA_PROCESSING_ENTITIES, cluster.namespace, name).get("status") or {}
    )
    return any(
        x["type"] == "Ready" and x["status"] == "True" for x in status.get("conditions") or []
    )


def delete_job_for_good(cluster, name: str) -> None:
    """What an operator's ``kubectl delete`` plus a finalizer edit does: the Job is gone."""
    cluster.rest.patch(
        JOBS, cluster.namespace, name, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
    )
    cluster.rest.delete(JOBS, cluster.namespace, name, propagation="Background")

    def gone() -> bool:
        try:
            cluster.rest.get(JOBS, cluster.namespace, name)
        except NotFound:
            return True
        return False

    wait_for(gone, timeout=15, what=f"Job {name} gone")


def test_f4_job_deleted_while_the_watch_is_cut_is_noticed(
    cluster, kubelet, start_controller, control_plane, proxy, namespace
):
    """F4 with D18b: a Job deleted while the Job watch is cut is noticed soon after the restore,
    and its Task fails with reason JobLost; no second Job is ever made for it."""
    proc = start_controller()
    proxied_mpe(cluster, control_plane, proxy, namespace)
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(
        objects.task("t", workflow_name="wf", function_name="long", mpe_name="via-proxy")
    )
    wait_for(lambda: cluster.phase("t") == "Running", timeout=30, what="Running")
    lost = cluster.task("t")["status"]["jobRef"]

    proxy.cut()
    wait_for(
        lambda: not mpe_ready(cluster, "via-proxy"),
        timeout=30,
        what="the MPE reports its broken Job watch",
    )
    delete_job_for_good(cluster, lost["name"])
    time.sleep(2)  # the watch stays cut for a while: the deletion event is never streamed to it
    assert cluster.task("t")["status"]["jobRef"]["uid"] == lost["uid"]
    restored = time.monotonic()
    proxy.restore()

    wait_for(
        lambda: cluster.phase("t") == "Failed",
        timeout=RECONNECT_BOUND + 10,
        what="the lost Job noticed",
    )
    noticed = time.monotonic() - restored
    print(f"F4: lost Job noticed {noticed:.1f}s after the watch was restored")
    failed = next(x for x in cluster.task("t")["status"]["conditions"] if x["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "JobLost")
    assert lost["name"] in failed["message"]
    time.sleep(2)  # a second Job would appear within a reconcile or two
    assert [j["metadata"]["name"] for j in cluster.jobs()] == []
    wait_for(lambda: proc.probe("/readyz")[0] == 200, timeout=RECONNECT_BOUND, what="ready again")


def test_f5_stalled_watch_is_noticed_and_reopened(
    cluster, kubelet, start_controller, control_plane, proxy, namespace
):
    """F5: a silent Job watch is replaced within watch timeout + read margin; later Tasks still run."""
    start_controller(
        args=[f"--watch-timeout={WATCH_TIMEOUT}", f"--watch-read-margin={READ_MARGIN}"]
    )
    proxied_mpe(cluster, control_plane, proxy, namespace)
    wait_for(lambda: mpe_ready(cluster, "via-proxy"), timeout=30, what="MPE Ready")
    wait_for(lambda: proxy.connections() >= 1, timeout=10, what="the Job watch connected")
    time.sleep(1.0)

    stalled = time.monotonic()
    proxy.stall()  # open connections go silent; new ones are relayed
    wait_for(
        lambda: proxy.accepted_since(stalled) >= 1,
        timeout=WATCH_TIMEOUT + READ_MARGIN + 5,
        what="a new connection",
    )
    detected = min(t for t in proxy.accepted if t > stalled) - stalled
    print(f"F5: silent Job watch replaced {detected:.2f}s after the stall")
    assert detected <= WATCH_TIMEOUT + READ_MARGIN + FIRST_BACKOFF_MAX + 0.5

    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("fn", run_seconds=1))
    cluster.create(
        objects.task("after", workflow_name="wf", function_name="fn", mpe_name="via-proxy")
    )
    wait_for(
        lambda: cluster.phase("after") == "Succeeded",
        timeout=45,
        what="Task after the stall Succeeded",
    )
    assert job_audit([cluster.task("after")], cluster.jobs(), cluster.secrets()) == []


def etcd_compact(etcd_url: str) -> int:
    """Compact etcd at its current revision through the gRPC gateway; return that revision."""

    def post(path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{etcd_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    revision = int(
        post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"]
    )
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def test_f6_watch_from_a_compacted_resource_version_relists_once(
    cluster, kubelet, make_controller, control_plane, api_client
):
    """F6: resuming from a compacted resourceVersion lists once, keeps working and writes nothing."""
    ctl, requests = make_controller()
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("quick", run_seconds=0))
    cluster.create(objects.function("long", run_seconds=600))
    cluster.create(objects.local_mpe("local"))
    cluster.create(
        objects.task("done", workflow_name="wf", function_name="quick", mpe_name="local")
    )
    cluster.create(objects.task("busy", workflow_name="wf", function_name="long", mpe_name="local"))
    wait_for(
        lambda: cluster.phase("done") == "Succeeded" and cluster.phase("busy") == "Running",
        timeout=30,
        what="settled",
    )
    time.sleep(1.0)  # let the last status writes' events arrive

    stale = Rest(api_client).get(NAMESPACES, None, "default")["metadata"]["resourceVersion"]
    revision = etcd_compact(control_plane.etcd_url)
    assert int(stale) < revision
    tasks = ctl.caches.informers[c.KIND_TASK]
    lists, watches, writes = (
        requests.count("LIST", "tasks"),
        requests.count("WATCH", "tasks"),
        requests.writes(),
    )
    errors = ctl.metrics.reconcile_errors.labels("task")._value.get()

    tasks.reconnect(resume_from=stale)
    wait_for(lambda: tasks.relists == 1, timeout=10, what="one relist")
    time.sleep(3.0)  # room for a hot loop to show
    assert requests.count("LIST", "tasks") - lists == 1
    assert (
        requests.count("WATCH", "tasks", 200) - watches <= 3
    )  # the expired watch and its successor
    assert tasks.relists == 1
    assert tasks.healthy
    assert tasks.failures == 0
    assert requests.writes() == writes  # no Job, Secret, status or Event written again
    assert ctl.metrics.reconcile_errors.labels("task")._value.get() == errors

    cluster.create(
        objects.task("later", workflow_name="wf", function_name="quick", mpe_name="local")
    )
    wait_for(
        lambda: cluster.phase("later") == "Succeeded",
        timeout=30,
        what="a new Task still reconciled",
    )
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []


class RelabelingRest(Rest):
    """A Rest that, before each of the first ``budget`` Task metadata writes, relabels the Task
    through another client: the concurrent edit lands between the controller's read and write."""

    budget = 0
    relabels = 0
    other: Rest | None = None
    lock = threading.Lock()

    def patch(self, res, namespace, name, patch, *, subresource=None, content_type=MERGE_PATCH):  # type: ignore[override]  # a test double: only the calls under test matter
        is_metadata_write = (
            res == TASKS and subresource is None and isinstance(patch, dict) and "metadata" in patch
        )
        if is_metadata_write and self.other is not None:
            with RelabelingRest.lock:
                go = RelabelingRest.relabels < RelabelingRest.budget
                if go:
                    RelabelingRest.relabels += 1
                    n = RelabelingRest.relabels
            if go:
                self.other.patch(
                    TASKS,
                    namespace,
                    name,
                    {"metadata": {"labels": {"example.com/touched": str(n)}}},
                )
        return super().patch(
            res, namespace, name, patch, subresource=subresource, content_type=content_type
        )


def test_f7_concurrent_relabels_cause_counted_conflicts_not_storms(
    cluster, kubelet, make_controller, api_client
):
    """F7: relabels racing metadata writes give few, counted 409s; status and both writers' labels land."""
    RelabelingRest.budget, RelabelingRest.relabels, RelabelingRest.other = 6, 0, Rest(api_client)
    ctl, requests = make_controller(rest_class=RelabelingRest)
    cluster.create(objects.workflow("wf"))
    cluster.create(objects.function("fn", run_seconds=0.5))
    cluster.create(objects.local_mpe("local"))
    names = [f"t{i}" for i in range(3)]
    for name in names:
        cluster.create(objects.task(name, workflow_name="wf", function_name="fn", mpe_name="local"))

    wait_for(
        lambda: all(cluster.phase(n) == "Succeeded" for n in names),
        timeout=60,
        what="all Succeeded",
    )
    conflicts = requests.count(code=409)
    relabels = RelabelingRest.relabels
    print(f"F7: {relabels} concurrent relabels, {conflicts} conflicts")
    assert relabels >= 3
    assert conflicts >= 1
    metric = sum(
        s.value
        for fam in ctl.metrics.registry.collect()
        if fam.name == "rest_client_requests"
        for s in fam.samples
        if s.name == "rest_client_requests_total" and s.labels["code"] == "409"
    )
    assert metric == conflicts
    assert conflicts <= 3 * relabels  # a conflict is retried on fresh data, not repeated blindly
    for name in names:
        task = cluster.task(name)
        assert task["status"]["jobRef"]
        assert task["status"]["endTime"]
        assert c.FINALIZER_TASK_PROTECTION in task["metadata"]["finalizers"]
        assert task["metadata"]["labels"][c.LABEL_TASK_NAME] == name
    touched = [cluster.task(n)["metadata"]["labels"].get("example.com/touched") for n in names]
    assert sum(1 for t in touched if t) >= 1
    assert job_audit(cluster.tasks(), cluster.jobs(), cluster.secrets()) == []
