"""A real, local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager.

taskfsm's integration tests, benchmarks and demo run against the same binaries a production cluster
runs (built from the Go module proxy by ``tools/controlplane/build.sh``), on loopback ports in a
temporary directory, the way Go controllers use envtest. Nothing here talks to a real cluster.

Flow of :meth:`ControlPlane.start`: pick free ports → etcd (wait ``/health``) → service-account key
pair and a static admin token → kube-apiserver (wait for its self-signed serving certificate and
``/readyz``) → kubeconfig → kube-controller-manager with only the Job, TTL-after-finished,
garbage-collector and namespace controllers. :meth:`ControlPlane.stop` ends exactly the processes it
started (each in its own process group), SIGTERM first, SIGKILL after a grace period.

The recipe and its measured figures are in ``docs/control-plane.md``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from taskfsm.kube.client import ApiClient

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout this development package lives in (it is never installed anywhere else)."""
BUILD_SCRIPT = REPO_ROOT / "tools" / "controlplane" / "build.sh"
BINARIES = ("etcd", "kube-apiserver")
"""What a control plane cannot start without (kube-controller-manager is optional)."""

#: The controllers kube-controller-manager runs: what taskfsm's Jobs, TTLs, owner references and
#: test namespaces need, nothing that wants nodes, a scheduler or cloud credentials.
CONTROLLERS = (
    "job-controller",
    "ttl-after-finished-controller",
    "garbage-collector-controller",
    "namespace-controller",
)
#: What a real node's pods need on top (``for_nodes``): the Node's taints follow its Ready
#: condition, every namespace gets its ``default`` ServiceAccount and ``kube-root-ca.crt``, token
#: Secrets are signed, Services get endpoints, Deployments get pods.
NODE_CONTROLLERS = (
    "node-lifecycle-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "replicaset-controller",
    "deployment-controller",
    "disruption-controller",
)

ADMIN_TOKEN = "taskfsm-admin-token"  # static, loopback-only test credential
SERVICE_CIDR = "10.0.0.0/24"
"""The Services' cluster IPs (the ``kubernetes`` Service is its first, 10.0.0.1)."""


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message carries the log tails."""


def binaries_dir() -> Path:
    """Return the directory holding ``etcd``, ``kube-apiserver`` and ``kube-controller-manager``.

    ``KUBEBUILDER_ASSETS`` (the envtest convention) names it directly: no build script is
    needed then. Otherwise the checkout's ``tools/controlplane/build.sh`` runs, which reuses
    cached binaries and builds only what is missing (a cold build takes tens of minutes on 2
    cores, see docs/control-plane.md).

    Raises:
        ControlPlaneError: the directory lacks a binary, there is neither ``KUBEBUILDER_ASSETS``
            nor a build script, or the build failed (with its output).
    """
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        return _checked(Path(assets), "KUBEBUILDER_ASSETS")
    if not BUILD_SCRIPT.is_file():
        raise ControlPlaneError(
            f"no control plane binaries: KUBEBUILDER_ASSETS is not set and {BUILD_SCRIPT} does "
            "not exist; set KUBEBUILDER_ASSETS to a directory holding etcd and kube-apiserver"
        )
    return _checked(run_build_script(BUILD_SCRIPT, "the control plane"), str(BUILD_SCRIPT))


def run_build_script(script: Path, what: str) -> Path:
    """Run one of the checkout's ``tools/*/build.sh`` (cached builds cost nothing) and return
    the directory it prints last.

    Raises:
        ControlPlaneError: the build failed (with the end of its output).
    """
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ControlPlaneError(
            f"building {what} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def _checked(path: Path, source: str) -> Path:
    for name in BINARIES:
        if not (path / name).is_file():
            raise ControlPlaneError(f"{path} (from {source}) lacks {name}")
    return path


PORT_ATTEMPTS = 3
"""How often a process (or control plane) that lost a port picked by :func:`free_port` to
another process is started again on fresh ones."""


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port on ``address`` that was free a moment ago (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """Child-process setup: own process group, and SIGKILL when the starting thread's process dies.

    The death signal means a SIGKILLed test runner or demo never leaves an apiserver behind.
    """
    os.setsid()
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])


@dataclass
class ControlPlane:
    """One local control plane on loopback.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Attributes after start:
    ``server`` (``https://127.0.0.1:<port>``), ``ca_file``, ``kubeconfig`` (path), ``token``.

    Args:
        bin_dir: directory with the binaries (default: :func:`binaries_dir`).
        controller_manager: also run kube-controller-manager (needs the binary).
        name: a label used in log lines and the kubeconfig's cluster name.
        startup_timeout: seconds to wait for each component to become ready.
        controller_manager_args: extra kube-controller-manager flags (the benchmarks raise its
            client rate limits, ``--kube-api-qps``, so the Job controller is not the bottleneck).
        address: the IPv4 address kube-apiserver binds and advertises (the ``kubernetes``
            Service's endpoint); a real node's pods reach it there (:mod:`taskfsm_dev.node`).
        for_nodes: serve real nodes: ServiceAccount admission on (pods get their token), the
            ``kubernetes`` Service's endpoint kept, and :data:`NODE_CONTROLLERS` too.
    """

    bin_dir: Path | None = None
    controller_manager: bool = True
    name: str = "taskfsm-test"
    startup_timeout: float = 120.0
    controller_manager_args: tuple[str, ...] = ()
    address: str = "127.0.0.1"
    for_nodes: bool = False
    workdir: Path = field(init=False)
    server: str = field(init=False, default="")
    ca_file: Path = field(init=False)
    kubeconfig: Path = field(init=False)
    token: str = field(init=False, default=ADMIN_TOKEN)
    etcd_url: str = field(init=False, default="")
    _procs: list[Process] = field(init=False, default_factory=list)
    _apiserver_args: list[str] = field(init=False, default_factory=list)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    # -- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start etcd, kube-apiserver (and kube-controller-manager); return when all are ready.

        Raises:
            ControlPlaneError: a component exited or did not become ready in time; the message
                holds the tail of every started component's log. Everything started is stopped.
        """
        if self.bin_dir is None:
            self.bin_dir = binaries_dir()
        atexit.register(self.stop)
        # The ports are picked free before etcd and kube-apiserver bind them; on a busy machine
        # another process sometimes takes one meanwhile: start again on fresh ones.
        attempt = 1
        while True:
            try:
                return self._start_once()
            except ControlPlaneError as exc:
                if attempt == PORT_ATTEMPTS or "address already in use" not in str(exc).lower():
                    raise
                attempt += 1

    def _start_once(self) -> ControlPlane:
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        try:
            self._start_etcd()
            self._start_apiserver()
            self._write_kubeconfig()
            if self.controller_manager:
                self._start_controller_manager()
        except BaseException as exc:
            tails = self.log_tails()
            self.stop()
            if isinstance(exc, ControlPlaneError):
                raise ControlPlaneError(f"{exc}\n{tails}") from None
            raise
        return self

    def stop(self, grace: float = 10.0) -> None:
        """Stop what :meth:`start` started, in reverse order; remove the work directory.

        Safe to call twice and from ``atexit``. Only the process groups this object created are
        signalled.
        """
        with self._lock:
            procs, self._procs = self._procs, []
        for proc in reversed(procs):
            terminate(proc.popen, grace)
        workdir = getattr(self, "workdir", None)
        if workdir is not None and workdir.exists() and not os.environ.get("TASKFSM_KEEP_CP"):
            shutil.rmtree(workdir, ignore_errors=True)

    def log_tails(self, lines: int = 40) -> str:
        """The last lines of every component's log, for failure messages."""
        return "\n".join(f"--- {p.name} ({p.log_path}) ---\n{p.tail(lines)}" for p in self._procs)

    def restart_apiserver(self, *, down_seconds: float = 0.0, kill: bool = False) -> None:
        """Stop kube-apiserver only and start it again on the same port with the same serving
        certificate and flags; etcd (so every object) and kube-controller-manager stay up.

        ``kill`` sends SIGKILL instead of a graceful SIGTERM; ``down_seconds`` keeps the port
        closed that long before the restart. Returns once ``/readyz`` answers again. Fault tests
        use it to prove clients reconnect to a restarted API server.
        """
        with self._lock:
            old = next(p for p in self._procs if p.name == "kube-apiserver")
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(old.popen.pid, signal.SIGKILL)
            old.popen.wait(10)
        else:
            terminate(old.popen, 10.0)
        with self._lock:
            self._procs.remove(old)
        if down_seconds > 0:
            time.sleep(down_seconds)
        proc = self._spawn("kube-apiserver", self._apiserver_args)
        self._wait(proc, self._apiserver_ready, "kube-apiserver /readyz after restart")

    # -- clients ---------------------------------------------------------------------------------

    def api_client(self) -> ApiClient:
        """A new API client with admin rights on this control plane."""
        from taskfsm.kube.client import from_kubeconfig

        return from_kubeconfig(self.kubeconfig)

    def kubeconfig_dict(self, *, namespace: str | None = None) -> dict[str, object]:
        """The admin kubeconfig as a dict; ``namespace`` sets the context's namespace."""
        ctx: dict[str, str] = {"cluster": self.name, "user": "admin"}
        if namespace:
            ctx["namespace"] = namespace
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": self.name,
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": _b64(self.ca_file.read_bytes()),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": self.name, "context": ctx}],
            "current-context": self.name,
        }

    # -- components ------------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> Process:
        log_path = self.workdir / f"{name}.log"
        log = log_path.open("ab")  # append: a restarted component keeps its earlier log
        popen = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
            cwd=self.workdir,
        )
        log.close()
        proc = Process(name, popen, log_path)
        with self._lock:
            self._procs.append(proc)
        return proc

    def _start_etcd(self) -> None:
        assert self.bin_dir is not None
        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        proc = self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync",  # test data: durability across power loss is not needed
                "--log-level=warn",
            ],
        )
        self._wait(proc, lambda: _http_ok(f"{self.etcd_url}/health"), "etcd /health")

    def _start_apiserver(self) -> None:
        assert self.bin_dir is not None
        port = free_port(self.address)
        self.server = f"https://{self.address}:{port}"
        cert_dir = self.workdir / "certs"
        sa_key, sa_pub = self.workdir / "sa.key", self.workdir / "sa.pub"
        _write_rsa_key_pair(sa_key, sa_pub)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f"{self.token},admin,admin,system:masters\n")
        self.ca_file = cert_dir / "apiserver.crt"
        self._apiserver_args = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={port}",
            f"--cert-dir={cert_dir}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}",
            f"--service-account-signing-key-file={sa_key}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            *(
                # Pods get their ServiceAccount's token; the `kubernetes` Service gets this
                # server as its endpoint.
                # kubectl logs reaches a kubelet at its Node's InternalIP (no DNS names it).
                ["--endpoint-reconciler-type=lease", "--kubelet-preferred-address-types=InternalIP"]
                if self.for_nodes
                # Without the ServiceAccount controller nothing creates the `default`
                # ServiceAccount; Job pods would never be admitted.
                else [
                    "--endpoint-reconciler-type=none",
                    "--disable-admission-plugins=ServiceAccount",
                ]
            ),
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ]
        proc = self._spawn("kube-apiserver", self._apiserver_args)
        self._wait(proc, self.ca_file.exists, "kube-apiserver serving certificate")
        self._wait(proc, self._apiserver_ready, "kube-apiserver /readyz")

    def _apiserver_ready(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        return _http_ok(f"{self.server}/readyz", token=self.token, context=ctx)

    def _write_kubeconfig(self) -> None:
        self.kubeconfig = self.workdir / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(self.kubeconfig_dict()))

    def _start_controller_manager(self) -> None:
        assert self.bin_dir is not None
        binary = self.bin_dir / "kube-controller-manager"
        if not binary.is_file():
            raise ControlPlaneError(f"{binary} is missing (needed for Jobs, TTL and GC)")
        controllers = CONTROLLERS + (NODE_CONTROLLERS if self.for_nodes else ())
        node_args = (
            [
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}",
            ]
            if self.for_nodes
            else []
        )
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(binary),
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={','.join(controllers)}",
                *node_args,
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--v=1",
                *self.controller_manager_args,
            ],
        )
        # KCM has no port to poll (secure-port=0); it is ready once it survives its start-up and
        # the namespace controller answers, which the fixtures see soon after. A crash is caught.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(f"kube-controller-manager exited ({proc.popen.returncode})")
            time.sleep(0.2)

    def _wait(self, proc: Process, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(
                    f"{proc.name} exited ({proc.popen.returncode}) before {what}"
                )
            if ready():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"timed out after {self.startup_timeout:.0f}s waiting for {what}")


def terminate(popen: subprocess.Popen[bytes], grace: float) -> None:
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGTERM)
    try:
        popen.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(5)


def _http_ok(url: str, *, token: str | None = None, context: ssl.SSLContext | None = None) -> bool:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def _write_rsa_key_pair(private_path: Path, public_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()
