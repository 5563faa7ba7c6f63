"""docs/install.md and the README's install section, run: every shell command they show is
executed as written (the project's kubectl, helm and .venv/bin first on PATH) against a real API
server, one control plane per way of installing, with the checks the pages promise between them.

There are no Pods here (no scheduler or kubelet for the Deployment), so where the page expects
the Deployment's controller, a stand-in runs `taskfsm run` as a process with what a Pod would
get: the installed ServiceAccount's token, the installed ConfigMap, leader election in
taskfsm-system. The Task Pods are played by the simulated kubelet.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.tools import deploygen
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.demo import EXPECTED, SAMPLES
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.process import ControllerProcess
from taskfsm_dev.waiting import wait_for
from tests.support import kubetools

REPO = Path(__file__).resolve().parents[2]
VERSION = deploygen.project_version()
IMAGE = f"registry.example.com/taskfsm:{VERSION}"
NS = "taskfsm-system"

# The commands of the pages, in the order the tests run them.
APPLY = "kubectl apply -f deploy/"
SET_IMAGE = f"kubectl -n taskfsm-system set image deployment/taskfsm-controller controller={IMAGE}"
APPLY_K = "kubectl apply -k deploy/"
HELM_INSTALL = "helm install taskfsm ./deploy/chart -n taskfsm-system --create-namespace"
CHECK = [
    "kubectl -n taskfsm-system get deployment taskfsm-controller",
    "kubectl -n taskfsm-system get pods",
    "kubectl -n taskfsm-system get lease taskfsm-task-controller -o jsonpath='{.spec.holderIdentity}'",
]
USE = [
    "kubectl create namespace demo",
    "kubectl apply -n demo -f taskfsm_dev/demo_samples.yaml",
    "kubectl get tasks -n demo",
    "kubectl describe task sleep -n demo",
    "kubectl taskfsm explain sleep -n demo",
    "kubectl taskfsm render-job taskfsm_dev/demo_samples.yaml --task patched",
]
HELM_UPGRADE = [
    "kubectl apply -f deploy/chart/crds/",
    "helm upgrade taskfsm ./deploy/chart -n taskfsm-system",
]
DELETE_OBJECTS = (
    "kubectl delete workflows,tasks,mediaprocessingentities,clustermediaprocessingentities --all -A"
)
DELETE_ALL = "kubectl delete -f deploy/"
HELM_REMOVE = [
    "helm uninstall taskfsm -n taskfsm-system",
    "kubectl delete -f deploy/chart/crds/",
    "kubectl delete namespace taskfsm-system",
]
NOT_RUN = {
    f"docker build -t {IMAGE} .": "no docker daemon here: tests/e2e/test_image.py runs the "
    "Dockerfile's steps in a Debian root filesystem instead",
    f"docker push {IMAGE}": "no registry here",
    "make image": "tests/e2e/test_image.py writes the same archive and SBOM (oci_image.write) "
    "and checks them",
    f"podman load -i dist/taskfsm-{VERSION}.oci.tar": "tests/e2e/test_image.py runs it on the "
    "archive it writes, into a private store",
    f"docker load -i dist/taskfsm-{VERSION}.oci.tar": "no docker daemon here: "
    "tests/e2e/test_image.py reads the archive as a docker archive with skopeo",
    f"skopeo copy oci-archive:dist/taskfsm-{VERSION}.oci.tar:{VERSION} "
    f"docker://{IMAGE}": "no registry here: tests/e2e/test_image.py copies the archive with "
    "skopeo to a directory instead",
    "make release TAG=vX.Y.Z": "tests/e2e/test_image.py builds a release (release.build, the "
    "tag and clean-tree checks aside, which tests/unit/test_release.py covers) and checks every file",
    "skopeo login ghcr.io": "no registry here (publishing is the one step not run)",
    "skopeo copy oci-archive:dist/taskfsm-X.Y.Z.oci.tar:X.Y.Z "
    "docker://ghcr.io/nagare-media/taskfsm:X.Y.Z": "no registry here",
    "helm push dist/taskfsm-X.Y.Z.tgz oci://ghcr.io/nagare-media/charts": "no registry here",
    "uv publish dist/taskfsm-X.Y.Z-py3-none-any.whl dist/taskfsm-X.Y.Z.tar.gz": "no package "
    "index here",
}
RUN = {
    APPLY,
    SET_IMAGE,
    APPLY_K,
    HELM_INSTALL,
    *CHECK,
    *USE,
    *HELM_UPGRADE,
    DELETE_OBJECTS,
    DELETE_ALL,
    *HELM_REMOVE,
}


def shell_commands(markdown: str) -> list[str]:
    """The command lines of the ```sh blocks of ``markdown``, without trailing comments."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", markdown, re.M | re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+# .*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def documented_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    install = readme.split("## Install into a cluster", 1)[1].split("\n## ", 1)[0]
    return shell_commands((REPO / "docs" / "install.md").read_text()) + shell_commands(install)


def test_every_documented_install_command_is_run_here():
    """Every command docs/install.md and the README's install section show is one these tests
    run, but the docker commands, which cannot run here (and the reason is stated); and every
    command the tests run as documented is still on the pages."""
    documented = documented_commands()
    assert documented, "no ```sh blocks found"
    assert set(documented) - RUN - set(NOT_RUN) == set()
    assert (RUN | set(NOT_RUN)) - set(documented) == set()


def sh(cluster: ControlPlane, command: str) -> str:
    """Run a documented command; return stdout and stderr together (kubectl writes "No
    resources found" to stderr)."""
    proc = kubetools.run(command, cluster.kubeconfig)
    return proc.stdout + proc.stderr


@contextlib.contextmanager
def stand_in_controller(cluster: ControlPlane, tmp_path: Path) -> Iterator[ControllerProcess]:
    """`taskfsm run` as one of the Deployment's Pods would run it: as the installed
    ServiceAccount `taskfsm` (a bound token), with the installed ConfigMap's configuration and
    leader election in taskfsm-system."""
    token = sh(cluster, "kubectl -n taskfsm-system create token taskfsm").strip()
    kubeconfig = cluster.kubeconfig_dict(namespace=NS)
    kubeconfig["users"] = [{"name": "admin", "user": {"token": token}}]
    (tmp_path / "sa-kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    config = sh(
        cluster,
        r"kubectl -n taskfsm-system get configmap taskfsm-config -o jsonpath='{.data.config\.yaml}'",
    )
    (tmp_path / "config.yaml").write_text(config)
    proc = ControllerProcess(
        tmp_path / "sa-kubeconfig",
        leader_elect=True,
        lease_namespace=NS,
        identity="taskfsm-controller-stand-in",
        log_dir=tmp_path,
        args=[
            f"--config={tmp_path / 'config.yaml'}",
            "--watch-timeout=20",
            "--watch-read-margin=5",
            "--shutdown-timeout=10",
        ],
    )
    with proc:
        wait_for(
            lambda: proc.metric("leader_election_master_status") == 1,
            timeout=30,
            what="the stand-in leads",
        )
        yield proc


def check(cluster: ControlPlane, identity: str) -> None:
    """The page's "Checking" commands: the Deployment exists, pods list, the Lease names the
    leader."""
    assert "taskfsm-controller" in sh(cluster, CHECK[0])
    sh(cluster, CHECK[1])  # no Pods without a kubelet; the command works
    assert sh(cluster, CHECK[2]) == identity


def custom_objects(cluster: ControlPlane, plural: str, namespace: str) -> list[dict]:
    with cluster.api_client() as api:
        return client.CustomObjectsApi(api).list_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, plural
        )["items"]


def engine_crds(cluster: ControlPlane) -> list[str]:
    out = sh(cluster, "kubectl get crd -o name")
    return [line for line in out.split() if line.endswith(f".{c.GROUP}")]


def task_phases(cluster: ControlPlane, namespace: str = "demo") -> dict[str, str]:
    tasks = custom_objects(cluster, "tasks", namespace)
    return {t["metadata"]["name"]: (t.get("status") or {}).get("phase") or "" for t in tasks}


def use(cluster: ControlPlane) -> dict[str, str]:
    """The page's "Using it" commands on the demo samples (their Pods played by the simulated
    kubelet); returns the phases the Tasks reached."""
    sh(cluster, USE[0])
    sh(cluster, USE[1])
    samples = [d for d in yaml.safe_load_all(SAMPLES.read_text()) if d]
    expected = {
        d["metadata"]["name"]: d["metadata"]["annotations"][EXPECTED]
        for d in samples
        if d["kind"] == c.KIND_TASK
    }
    with cluster.api_client() as api, SimulatedKubelet(api, namespace="demo"):
        wait_for(
            lambda: task_phases(cluster) == expected, timeout=90, what=f"demo phases {expected}"
        )
    table = sh(cluster, USE[2]).splitlines()
    assert table[0].split()[:2] == ["NAME", "MPE"]
    rows = {line.split()[0]: line for line in table[1:]}
    assert set(rows) == set(expected)
    for name, phase in expected.items():
        assert f" {phase} " in rows[name], rows[name]
    assert re.search(r"^\s+Phase:\s+Succeeded$", sh(cluster, USE[3]), re.M)
    explained = sh(cluster, USE[4])
    assert "Task demo/sleep" in explained
    assert "Succeeded" in explained
    rendered = kubetools.documents(sh(cluster, USE[5]))
    assert [d["kind"] for d in rendered] == ["Job", "Secret"]
    return expected


def remove_objects(cluster: ControlPlane) -> None:
    """The first removal step, while the controller runs: every finalizer-carrying object is
    deleted (kubectl waits for them), and their Jobs with them."""
    out = sh(cluster, DELETE_OBJECTS)
    # (a Task may be gone before kubectl lists Tasks: deleting its Workflow deletes it)
    assert 'workflow.engine.nagare.media "demo" deleted' in out, out
    assert 'mediaprocessingentity.engine.nagare.media "local" deleted' in out, out
    assert task_phases(cluster) == {}
    assert custom_objects(cluster, "mediaprocessingentities", "demo") == []
    assert custom_objects(cluster, "workflows", "demo") == []
    wait_for(
        lambda: sh(cluster, "kubectl -n demo get jobs -o name").split() == [],
        timeout=60,
        what="the Tasks' Jobs deleted",
    )


def by_key(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.fixture
def cluster() -> Iterator[ControlPlane]:
    """A control plane of the test's own: installing and removing CRDs would disturb others."""
    with ControlPlane(name="install-docs") as cp:
        yield cp


def test_install_with_kubectl_then_use_upgrade_and_remove(cluster, tmp_path):
    """`kubectl apply -f deploy/` applies the CRDs, then the Namespace with the controller, then
    the RBAC; the image can be set; a controller with the installed ServiceAccount, RBAC and
    ConfigMap leads and runs the demo Tasks, which `kubectl get/describe` and `kubectl taskfsm`
    show; re-applying (the upgrade) keeps the stored objects; deleting them while the controller
    runs releases every finalizer and deletes the Jobs; `kubectl delete -f deploy/` removes the
    rest, CRDs and Namespace included."""
    kinds = [line.split("/")[0] for line in sh(cluster, APPLY).splitlines()]
    last_crd = max(i for i, k in enumerate(kinds) if k.startswith("customresourcedefinition"))
    assert last_crd < kinds.index("namespace") < kinds.index("deployment.apps")
    assert kinds.index("deployment.apps") < kinds.index("serviceaccount")
    assert len(engine_crds(cluster)) == 10
    sh(cluster, SET_IMAGE)
    image = sh(
        cluster,
        "kubectl -n taskfsm-system get deployment taskfsm-controller "
        "-o jsonpath='{.spec.template.spec.containers[0].image}'",
    )
    assert image == IMAGE

    with stand_in_controller(cluster, tmp_path) as proc:
        check(cluster, "taskfsm-controller-stand-in")
        expected = use(cluster)
        upgraded = sh(cluster, APPLY)
        assert "customresourcedefinition.apiextensions.k8s.io/tasks.engine.nagare.media" in upgraded
        assert task_phases(cluster) == expected
        remove_objects(cluster)
        assert proc.running
    sh(cluster, DELETE_ALL)
    assert engine_crds(cluster) == []
    assert f"namespace/{NS}" not in sh(cluster, "kubectl get namespaces -o name").split()


def test_install_with_kustomize_then_upgrade_and_remove(cluster, tmp_path):
    """`kubectl apply -k deploy/` applies exactly the objects of the three plain manifests (and
    `kubectl apply -f deploy/` skips the Kustomization file); re-applying changes nothing; the
    removal commands remove everything."""
    plain = []
    for name in ("crds.yaml", "manager.yaml", "rbac.yaml"):
        plain += kubetools.documents((REPO / "deploy" / name).read_text())
    kustomized = kubetools.documents(sh(cluster, "kubectl kustomize deploy/"))
    assert by_key(kustomized) == by_key(plain)
    sh(cluster, APPLY_K)
    assert len(engine_crds(cluster)) == 10
    with stand_in_controller(cluster, tmp_path):
        check(cluster, "taskfsm-controller-stand-in")
        again = sh(cluster, APPLY_K).splitlines()
        assert again
        assert all(line.endswith(" unchanged") for line in again), again
        assert "No resources found" in sh(cluster, DELETE_OBJECTS)
    sh(cluster, DELETE_ALL)
    assert engine_crds(cluster) == []


def test_install_with_helm_then_use_upgrade_and_remove(cluster, tmp_path):
    """`helm install` (CRDs from crds/, the chart's RBAC and ConfigMap) gives a controller that
    leads and runs the demo Tasks; the CRDs applied with kubectl and `helm upgrade` make
    revision 2 and keep the objects; `helm uninstall` leaves the CRDs and the namespace, which
    the next two commands remove."""
    assert "STATUS: deployed" in sh(cluster, HELM_INSTALL)
    assert len(engine_crds(cluster)) == 10
    with stand_in_controller(cluster, tmp_path) as proc:
        check(cluster, "taskfsm-controller-stand-in")
        expected = use(cluster)
        sh(cluster, HELM_UPGRADE[0])
        assert "has been upgraded" in sh(cluster, HELM_UPGRADE[1])
        history = sh(cluster, "helm history taskfsm -n taskfsm-system -o json")
        assert [r["revision"] for r in yaml.safe_load(history)] == [1, 2]
        assert task_phases(cluster) == expected
        remove_objects(cluster)
        assert proc.running
    sh(cluster, HELM_REMOVE[0])
    assert "taskfsm-controller" not in sh(cluster, "kubectl -n taskfsm-system get deployments")
    assert len(engine_crds(cluster)) == 10
    assert f"namespace/{NS}" in sh(cluster, "kubectl get namespaces -o name").split()
    sh(cluster, HELM_REMOVE[1])
    assert engine_crds(cluster) == []
    sh(cluster, HELM_REMOVE[2])
    assert f"namespace/{NS}" not in sh(cluster, "kubectl get namespaces -o name").split()
