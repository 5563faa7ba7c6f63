"""The chart's two controller Pods on a real node: ``--metrics-secure`` serves ``/metrics``
through the Service to a caller whose ServiceAccount may get it and to nobody else, and when the
leader Pod is deleted in the middle of a burst, the other replica and the Deployment's new Pod
finish every Task, one Job per Task."""

from __future__ import annotations

import functools
import itertools
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from taskfsm.api import constants as c
from taskfsm.kube.client import ApiClient
from taskfsm.kube.rest import JOBS, LEASES, PODS, Rest
from taskfsm_dev import objects
from taskfsm_dev.node import WORKLOAD_IMAGE
from taskfsm_dev.waiting import wait_for
from tests.support import installs, kubetools
from tests.support.cluster import Cluster
from tests.support.probes import Probe

CONTROLLER_VALUES = {"replicaCount": 2, "metrics": {"secure": True}}
LEASE = "taskfsm-task-controller"
"""The chart's default ``leaderElection.id``."""
BURST = 16
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def _scrape(
    rest: Rest, kubeconfig: Path, namespace: str, name: str, url: str, *, account: str | None
) -> str:
    """A Pod that GETs ``url`` as ServiceAccount ``account`` (None: with no token at all);
    what it printed."""
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": objects.RESTRICTED_POD_SECURITY,
            "containers": [
                {
                    "name": "scrape",
                    "image": WORKLOAD_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": ["get", url, *([TOKEN] if account else [])],
                    "securityContext": objects.RESTRICTED_CONTAINER_SECURITY,
                }
            ],
        },
    }
    if account:
        pod["spec"]["serviceAccountName"] = account
    else:
        pod["spec"]["automountServiceAccountToken"] = False
    rest.create(PODS, namespace, pod)

    def done() -> bool:
        phase = (rest.get(PODS, namespace, name).get("status") or {}).get("phase")
        return phase in ("Succeeded", "Failed")

    wait_for(done, timeout=90, what=f"scraper pod {name} done")
    return _kubectl(kubeconfig, "logs", "-n", namespace, name)


def _kubectl(kubeconfig: Path, *args: str) -> str:
    return kubetools.run(kubetools.quote("kubectl", *args), kubeconfig, with_helm=False).stdout


def test_secure_metrics_answer_only_callers_allowed_to_read_them(
    installed_controller: installs.Installed,
    node_admin: ApiClient,
    node_kubeconfig: Path,
    tenant_namespace: str,
) -> None:
    """Through the metrics Service: a Pod whose ServiceAccount is bound to the chart's
    metrics-reader ClusterRole gets 200, one whose ServiceAccount has no such binding 403, and
    one without a token 401."""
    rest = Rest(node_admin)
    service = json.loads(
        installed_controller.kubectl("get", "service", "taskfsm-controller-metrics", "-o", "json")
    )
    port = service["spec"]["ports"][0]["port"]
    url = f"https://{service['spec']['clusterIP']}:{port}/metrics"
    binding = f"scrape-{tenant_namespace}"
    for account in ("prometheus", "nobody"):
        _kubectl(node_kubeconfig, "create", "serviceaccount", account, "-n", tenant_namespace)
    _kubectl(
        node_kubeconfig, "create", "clusterrolebinding", binding,
        "--clusterrole=taskfsm-controller-metrics-reader",
        f"--serviceaccount={tenant_namespace}:prometheus",
    )  # fmt: skip
    try:
        scrape = functools.partial(_scrape, rest, node_kubeconfig, tenant_namespace, url=url)
        # The Service routes to the pods once kube-proxy has seen their endpoints ready, a
        # moment after the Deployment is available: until then a connection is refused (a
        # clean-clone run's scrape was). Only that is tried again; every answer is asserted.
        deadline = time.monotonic() + 90
        for attempt in itertools.count():
            allowed = scrape(f"allowed-{attempt}", account="prometheus")
            if "connection refused" not in allowed or time.monotonic() > deadline:
                break
            time.sleep(2)
        refused = scrape("refused", account="nobody")
        anonymous = scrape("anonymous", account=None)
    finally:
        _kubectl(node_kubeconfig, "delete", "clusterrolebinding", binding)
    logs = installed_controller.kubectl(
        "logs", "-l", "app.kubernetes.io/name=taskfsm", "--tail=20", "--prefix", check=False
    )
    assert allowed.strip() == "status 200", f"{allowed}\n{logs}"
    assert refused.strip() == "status 403", f"{refused}\n{logs}"
    assert anonymous.strip() == "status 401", f"{anonymous}\n{logs}"


def _leader(rest: Rest, namespace: str) -> str:
    holder = (rest.get(LEASES, namespace, LEASE).get("spec") or {}).get("holderIdentity") or ""
    return holder.split("_", 1)[0]


def test_deleting_the_leader_pod_mid_burst_loses_and_doubles_no_task(
    installed_controller: installs.Installed, node_admin: ApiClient, tenant_namespace: str
) -> None:
    """A burst of Tasks whose Jobs run real containers; once some run, the leader Pod is
    deleted (SIGTERM, as a rollout or a drain does): the stand-by takes the Lease, the
    Deployment replaces the Pod, every Task succeeds, and every Task has exactly one Job."""
    rest = Rest(node_admin)
    namespace = installed_controller.namespace
    leader = wait_for(lambda: _leader(rest, namespace), timeout=60, what="a leader")
    cluster = Cluster(node_admin, tenant_namespace)
    for obj in (
        objects.workflow("wf"),
        objects.local_mpe("m"),
        objects.container_function("work", "sleep", "2", image=WORKLOAD_IMAGE),
    ):
        cluster.create(obj)
    probe = Probe(node_admin, tenant_namespace)
    probe.wait_mpe_ready("m")
    for i in range(BURST):
        cluster.create(
            objects.task(f"t{i}", workflow_name="wf", function_name="work", mpe_name="m")
        )
    wait_for(lambda: len(probe.jobs()) >= 3, timeout=60, what="the first Jobs")
    installed_controller.kubectl("delete", "pod", leader, "--wait=false")

    def all_succeeded() -> bool:
        return all(probe.phase(f"t{i}") == "Succeeded" for i in range(BURST))

    wait_for(all_succeeded, timeout=240, what=lambda: str(
        Counter(probe.phase(f"t{i}") for i in range(BURST))))  # fmt: skip
    new_leader = _leader(rest, namespace)
    assert new_leader != leader
    installed_controller.wait_available()
    tasks = {t["metadata"]["uid"]: t for t in cluster.tasks()}
    jobs = rest.list(JOBS, tenant_namespace).get("items") or []
    per_task = Counter(j["metadata"]["labels"][c.LABEL_TASK_NAME] for j in jobs)
    assert set(per_task) == {t["metadata"]["name"] for t in tasks.values()}
    assert set(per_task.values()) == {1}
    for task in tasks.values():
        assert task["status"]["jobRef"]["uid"] in {j["metadata"]["uid"] for j in jobs}
