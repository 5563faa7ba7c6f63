"""With a real queueing system: Kueue admits the Job taskfsm creates.

Kueue (``sigs.k8s.io/kueue``, the version ``tools/kueue/build.sh`` pins) is built from the Go module
proxy and runs as a process against the session's control plane, its CRDs installed from that
module's directory in the Go module cache (``go list -m -f '{{.Dir}}' sigs.k8s.io/kueue`` in
``tools/kueue``). The Task's ``templatePatches`` give the Job what Kueue's Job webhook would: the
label ``kueue.x-k8s.io/queue-name`` and ``spec.suspend: true``. While the ClusterQueue is held
(``stopPolicy: Hold``) Kueue keeps the Job suspended and taskfsm shows it (Running, ``Ready=False``
reason JobSuspended); once the hold is lifted Kueue admits the Workload and unsuspends the Job, the
simulated kubelet runs its pod, and the Task succeeds with its one Job.

How Kueue runs here, without a cluster's Deployment:

* a Kueue ``Configuration`` with ``internalCertManagement`` off, leader election off,
  ``manageJobsWithoutQueueName: false``, only the ``batch/job`` integration, the visibility API
  server off (feature gate ``VisibilityOnDemand``), metrics, probes and webhook server on free
  loopback ports;
* the webhook server serves a self-signed certificate made here; no webhook configuration is
  installed, so the API server never calls it (which is why the Task's patches suspend the Job);
* with internal certificate management off Kueue reads its metrics serving certificate from the
  fixed path ``/etc/kueue/metrics/certs``. Kueue runs in a private mount namespace (``unshare
  --mount``, as tests/support/image.py runs the image) where ``/etc`` is an overlay whose upper
  layer is a tmpfs holding that certificate: the host's ``/etc`` is never written. This needs root
  (CAP_SYS_ADMIN), like the image test.

A missing prerequisite (go, the Kueue build, the CRDs, unshare) fails the test; nothing is skipped.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskfsm.kube.errors import AlreadyExists, NotFound
from taskfsm.kube.rest import NAMESPACES, Resource, Rest
from taskfsm.manifests import jobs
from taskfsm_dev import objects
from taskfsm_dev.controlplane import PORT_ATTEMPTS, REPO_ROOT, ControlPlane, free_port
from taskfsm_dev.crds import install_crds
from taskfsm_dev.waiting import wait_for
from tests.support.probes import conditions_of

KUEUE_TOOLS = REPO_ROOT / "tools" / "kueue"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_NAMESPACE = "kueue-system"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
RESOURCE_FLAVORS = Resource(GROUP, VERSION, "resourceflavors", "ResourceFlavor", namespaced=False)
CLUSTER_QUEUES = Resource(GROUP, VERSION, "clusterqueues", "ClusterQueue", namespaced=False)
LOCAL_QUEUES = Resource(GROUP, VERSION, "localqueues", "LocalQueue")
WORKLOADS = Resource(GROUP, VERSION, "workloads", "Workload")

#: In Kueue's private mount namespace: /etc becomes an overlay with a tmpfs upper layer, the metrics
#: certificate goes where Kueue reads it, then Kueue runs (same PID: the death signal holds).
_MOUNT_AND_RUN = r"""
set -eu
work=$1 certs=$2
shift 2
mount -t tmpfs -o size=1m,mode=0755 tmpfs "$work"
mkdir "$work/upper" "$work/work"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$work/upper,workdir=$work/work" /etc
mkdir -p /etc/kueue/metrics/certs
cp "$certs/tls.crt" "$certs/tls.key" /etc/kueue/metrics/certs/
exec "$@"
"""


class KueueError(RuntimeError):
    """Kueue could not be built, found or started (message: what failed, with its output)."""


def kueue_binary() -> Path:
    """The Kueue manager built by tools/kueue/build.sh (cached; a cold build takes minutes)."""
    proc = subprocess.run(
        ["bash", str(KUEUE_TOOLS / "build.sh")], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise KueueError(f"building kueue failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    path = Path(proc.stdout.strip().splitlines()[-1])
    if not path.is_file():
        raise KueueError(f"tools/kueue/build.sh printed {path}, which does not exist")
    return path


def kueue_module_dir() -> Path:
    """Kueue's module directory in the Go module cache, as tools/kueue's go.mod pins it."""
    go = shutil.which("go")
    if go is None:
        raise KueueError("'go' is not on PATH: it finds Kueue's module (and its CRDs)")
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", KUEUE_MODULE],
        capture_output=True,
        text=True,
        check=False,
        cwd=KUEUE_TOOLS,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"},
    )
    path = Path(proc.stdout.strip())
    if proc.returncode != 0 or not proc.stdout.strip() or not path.is_dir():
        raise KueueError(
            f"go list -m {KUEUE_MODULE} in {KUEUE_TOOLS} gave {proc.stdout.strip()!r} "
            f"(exit {proc.returncode}); tools/kueue/build.sh downloads the module:\n"
            f"{proc.stderr[-2000:]}"
        )
    return path


def kueue_crds() -> list[dict[str, Any]]:
    """Kueue's CRDs (config/components/crd/bases of its module)."""
    bases = kueue_module_dir() / "config" / "components" / "crd" / "bases"
    docs = [
        doc
        for path in sorted(bases.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc and doc.get("kind") == "CustomResourceDefinition"
    ]
    names = {d["metadata"]["name"] for d in docs}
    wanted = {f"{r.plural}.{GROUP}" for r in (RESOURCE_FLAVORS, CLUSTER_QUEUES, LOCAL_QUEUES)}
    wanted.add(f"{WORKLOADS.plural}.{GROUP}")
    if not wanted <= names:
        raise KueueError(f"{bases} lacks the CRDs {sorted(wanted - names)}")
    return docs


def write_self_signed(certs: Path) -> None:
    """A self-signed serving certificate for 127.0.0.1 (tls.crt, tls.key) in ``certs``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-webhook")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    certs.mkdir(parents=True, exist_ok=True)
    (certs / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (certs / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (certs / "tls.key").chmod(0o600)


def _child_setup() -> None:
    """Own process group, and SIGKILL when the test process dies (no Kueue left behind)."""
    import ctypes

    os.setsid()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class Kueue:
    """The running Kueue manager."""

    binary: Path
    version: str
    log_path: Path
    popen: subprocess.Popen[bytes]

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture(scope="module")
def kueue(control_plane: ControlPlane, api_client: Any) -> Iterator[Kueue]:
    """Kueue's CRDs installed, the namespace kueue-system, and the Kueue manager running against
    the session's control plane until the module ends."""
    unshare = shutil.which("unshare")
    if unshare is None:
        raise KueueError("'unshare' (util-linux) is missing: Kueue runs in a mount namespace")
    binary = kueue_binary()
    version = binary.parent.name.split("-")[0]
    install_crds(api_client, kueue_crds())
    with contextlib.suppress(AlreadyExists):
        Rest(api_client).create(NAMESPACES, None, {"metadata": {"name": KUEUE_NAMESPACE}})

    tmp = Path(tempfile.mkdtemp(prefix="taskfsm-kueue-"))
    certs = tmp / "certs"
    write_self_signed(certs)
    (tmp / "etc-overlay").mkdir()
    log_path = tmp / "kueue.log"

    def launch() -> tuple[Kueue, int]:
        health_port, metrics_port, webhook_port = free_port(), free_port(), free_port()
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "featureGates": {"VisibilityOnDemand": False},
            "integrations": {"frameworks": ["batch/job"]},
        }
        (tmp / "config.yaml").write_text(yaml.safe_dump(config))
        cmd = [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            _MOUNT_AND_RUN,
            "sh",
            str(tmp / "etc-overlay"),
            str(certs),
            str(binary),
            f"--config={tmp / 'config.yaml'}",
            "--zap-log-level=info",
        ]
        with log_path.open("ab") as log:
            popen = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)},
                preexec_fn=_child_setup,
            )
        return Kueue(binary=binary, version=version, log_path=log_path, popen=popen), health_port

    running, health_port = launch()
    try:
        deadline = time.monotonic() + 120
        attempt = 1
        while not _http_ok(f"http://127.0.0.1:{health_port}/readyz"):
            if running.popen.poll() is not None:
                # Its ports were picked free a moment before it bound them; another process
                # may have taken one meanwhile: start again on fresh ones.
                lost_port = "address already in use" in running.tail(10).lower()
                if not lost_port or attempt == PORT_ATTEMPTS:
                    raise KueueError(
                        f"kueue exited ({running.popen.returncode}):\n{running.tail()}"
                    )
                attempt += 1
                running, health_port = launch()
            if time.monotonic() > deadline:
                raise KueueError(f"kueue not ready after 120 s:\n{running.tail()}")
            time.sleep(0.3)
        if f'"gitVersion":"{version}"' not in log_path.read_text(errors="replace"):
            raise KueueError(f"kueue does not report version {version}:\n{running.tail()}")
        yield running
    finally:
        popen = running.popen
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGTERM)
            try:
                popen.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)
                popen.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Queues:
    flavor: str
    cluster_queue: str
    local_queue: str


@pytest.fixture
def queues(kueue: Kueue, api_client: Any, namespace: str) -> Iterator[Queues]:
    """A ResourceFlavor, a held ClusterQueue (4 CPUs, 4Gi) and a LocalQueue in the test's
    namespace; deleted after the test while Kueue still runs (it owns their finalizers)."""
    rest = Rest(api_client)
    q = Queues(f"flavor-{namespace}", f"cq-{namespace}", "team-queue")
    rest.create(RESOURCE_FLAVORS, None, {"metadata": {"name": q.flavor}})
    rest.create(
        CLUSTER_QUEUES,
        None,
        {
            "metadata": {"name": q.cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "stopPolicy": "Hold",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": q.flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "4"},
                                    {"name": "memory", "nominalQuota": "4Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    rest.create(
        LOCAL_QUEUES,
        namespace,
        {"metadata": {"name": q.local_queue}, "spec": {"clusterQueue": q.cluster_queue}},
    )
    yield q
    for res, ns, name in (
        *((WORKLOADS, namespace, w["metadata"]["name"]) for w in workloads(rest, namespace)),
        (LOCAL_QUEUES, namespace, q.local_queue),
        (CLUSTER_QUEUES, None, q.cluster_queue),
        (RESOURCE_FLAVORS, None, q.flavor),
    ):
        _delete(rest, res, ns, name)


def _delete(rest: Rest, res: Resource, namespace: str | None, name: str) -> None:
    """Delete a Kueue object and wait until Kueue released it; strip what it kept after 30 s
    (nothing is left behind in the session's cluster)."""

    def gone() -> bool:
        try:
            rest.get(res, namespace, name)
        except NotFound:
            return True
        return False

    with contextlib.suppress(NotFound):
        rest.delete(res, namespace, name)
    try:
        wait_for(gone, timeout=30, what=f"{res.kind} {name} gone")
    except TimeoutError:
        with contextlib.suppress(NotFound):
            rest.patch(res, namespace, name, {"metadata": {"finalizers": None}})


def workloads(rest: Rest, namespace: str) -> list[dict[str, Any]]:
    return rest.list(WORKLOADS, namespace).get("items") or []


def workload_of(rest: Rest, namespace: str, job: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload Kueue made for ``job`` (its controller owner reference names the Job)."""
    uid = job["metadata"]["uid"]
    for w in workloads(rest, namespace):
        if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or []):
            return w
    return None


def ready(task: dict[str, Any]) -> dict[str, Any]:
    conditions = (task.get("status") or {}).get("conditions") or []
    return next((x for x in conditions if x["type"] == "Ready"), {})


def queued_function(name: str) -> dict[str, Any]:
    """A Function whose container asks for resources Kueue counts against the quota."""
    fn = objects.function(name, run_seconds=0.2)
    container = fn["spec"]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    return fn


def test_kueue_admits_the_suspended_job_and_the_task_succeeds(
    kueue, queues, controller_factory, engine, kubelet, probe, namespace
):
    rest = probe.rest
    engine.create(objects.workflow("wf"))
    engine.create(queued_function("f"))
    engine.create(objects.local_mpe("m"))
    controller_factory()
    engine.create(
        objects.task(
            "t",
            workflow_name="wf",
            function_name="f",
            mpe_name="m",
            # What Kueue's Job webhook would do: the Job is queued, and created suspended.
            templatePatches={
                "metadata": {"labels": {QUEUE_NAME_LABEL: queues.local_queue}},
                "spec": {"suspend": True},
            },
        )
    )

    # Held: Kueue has a Workload for the Job but does not admit it; taskfsm shows the suspension.
    wait_for(
        lambda: ready(probe.task("t") or {}).get("reason") == "JobSuspended",
        timeout=60,
        what="Ready=False/JobSuspended",
    )
    task = probe.task("t")
    assert task["status"]["phase"] == "Running"
    job = probe.job(jobs.job_name(task))
    assert job is not None
    assert job["metadata"]["labels"][QUEUE_NAME_LABEL] == queues.local_queue
    held = wait_for(
        lambda: workload_of(rest, namespace, job),
        timeout=60,
        what=lambda: f"a Workload for the Job; Kueue log:\n{kueue.tail()}",
    )
    assert held["spec"]["queueName"] == queues.local_queue
    assert conditions_of(held).get("Admitted") != "True"
    wait_for(
        lambda: (
            conditions_of(workload_of(rest, namespace, job) or {}).get("QuotaReserved") == "False"
        ),
        timeout=30,
        what="the Workload not given quota while its ClusterQueue is held",
    )
    time.sleep(2)  # Kueue had its chance to admit; nothing runs
    assert probe.job(jobs.job_name(task))["spec"]["suspend"] is True
    assert probe.pods(jobs.job_name(task)) == []
    probe.wait_event("t", "JobSuspended")
    # Released: Kueue admits the Workload and unsuspends the Job; the pod runs; the Task succeeds.
    rest.patch(CLUSTER_QUEUES, None, queues.cluster_queue, {"spec": {"stopPolicy": "None"}})
    admitted = wait_for(
        lambda: (
            w
            if conditions_of(w := workload_of(rest, namespace, job) or {}).get("Admitted") == "True"
            else None
        ),
        timeout=60,
        what=lambda: f"the Workload Admitted; Kueue log:\n{kueue.tail()}",
    )
    assert admitted["status"]["admission"]["clusterQueue"] == queues.cluster_queue
    done = probe.wait_phase("t", "Succeeded", timeout=90)
    assert conditions_of(done).get("Complete") == "True"
    probe.wait_event("t", "JobResumed")
    all_jobs = probe.jobs()
    assert [j["metadata"]["uid"] for j in all_jobs] == [job["metadata"]["uid"]]
    assert all_jobs[0]["spec"]["suspend"] is False
    assert done["status"]["jobRef"]["uid"] == job["metadata"]["uid"]
    # Kueue saw the Job finish and released its quota.
    wait_for(
        lambda: conditions_of(workload_of(rest, namespace, job) or {}).get("Finished") == "True",
        timeout=60,
        what=lambda: f"the Workload Finished; Kueue log:\n{kueue.tail()}",
    )
    assert kueue.popen.poll() is None, f"kueue exited:\n{kueue.tail()}"
