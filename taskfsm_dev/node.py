"""A real node beside the local control plane: containerd, kubelet, kube-proxy, kube-scheduler.

The simulated kubelet (:mod:`taskfsm_dev.kubelet`) plays pods for the scale and fault tests; what
a user runs on a node (the chart's controller Pod, a Job's container) is tested here, on a node
that runs containers: Debian's containerd and runc, the CNI plugins of
``containernetworking-plugins``, and kubelet, kube-proxy and kube-scheduler built by
``tools/node/build.sh`` from the control plane's Go module set. No registry is reachable, so the
node's images are imported into its containerd (:meth:`RealNode.import_image`): the pod sandbox
image and the tests' workload image (:data:`PAUSE_IMAGE`, :data:`WORKLOAD_IMAGE`, both the static
``workload`` program of ``tools/node/cmd/workload``), and any archive a test adds (the
controller's own image, ``make image``).

**Ends exactly what it started.** The node lives in namespaces of its own
(:class:`NodeSandbox`): a network namespace joined to the host by a veth pair, a mount namespace
(every overlay, Secret tmpfs and network-namespace mount of containerd and the kubelet, and
tmpfs over ``/run`` and ``/var/log``, where both keep fixed paths) and a PID namespace whose
init is the ``workload pause`` program. Stopping kills that init, and the kernel then kills every
process of the namespace: containerd, its shims, the containers, the kubelet, kube-proxy. The
mounts, the pods' network namespaces, the veth pair, the CNI bridge and every iptables rule go
with the namespaces. What stays is on the host's cgroup file system: the cgroups runc and the
kubelet made, which :meth:`RealNode.stop` removes (those made while the node ran, and only
those), and the node's temporary directory, which it deletes.

**Addresses.** The host side of the veth pair is ``10.200.<n>.1/30`` and kube-apiserver binds
and advertises it (``ControlPlane(address=..., for_nodes=True)``: the ``kubernetes`` Service's
endpoint, reachable from pods); the node side is ``10.200.<n>.2``, the node's InternalIP (the
kubelet refuses loopback, and ``kubectl logs`` reaches the kubelet there); pods get
``10.201.<n>.0/24`` on the CNI bridge, routed from the host through the veth.

**Host settings, and why** (docs/control-plane.md has the measured cost): containerd needs
``restrict_oom_score_adj`` (runc cannot lower ``oom_score_adj`` in a sandbox); kubelet 1.35 needs
``failCgroupV1: false`` on a cgroup v1 host, ``cgroupDriver: cgroupfs`` (no systemd),
``cgroupsPerQOS: false`` and ``enforceNodeAllocatable: []`` (the QoS cgroups need controllers a
hybrid host does not delegate), ``failSwapOn: false``; kube-proxy leaves the conntrack sysctls
alone (they are the host's, not the namespace's). :func:`missing_prerequisites` names what a host
lacks, and :meth:`RealCluster.start` fails with that list, never skipping.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from taskfsm_dev import oci
from taskfsm_dev.controlplane import (
    REPO_ROOT,
    ControlPlane,
    ControlPlaneError,
    Process,
    die_with_parent,
    run_build_script,
    terminate,
)

if TYPE_CHECKING:
    from taskfsm.kube.client import ApiClient

NODE_BUILD_SCRIPT = REPO_ROOT / "tools" / "node" / "build.sh"
NODE_BINARIES = ("kubelet", "kube-proxy", "kube-scheduler", "workload")
PAUSE_IMAGE = "taskfsm.invalid/pause:1"
"""The pod sandbox image (containerd's ``sandbox_image``): ``workload pause``."""
WORKLOAD_IMAGE = "taskfsm.invalid/workload:1"
"""The tests' workload: ``/workload cat|exit|sleep|get ...`` (tools/node/cmd/workload)."""
HOST_COMMANDS = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "conntrack": "conntrack",
    "ip": "iproute2",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "mount": "mount",
}
"""Commands the node runs, with the Debian package that has each."""
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
"""From Debian's containernetworking-plugins."""
CGROUP_ROOT = Path("/sys/fs/cgroup")


class NodeError(ControlPlaneError):
    """The node could not be built, started or stopped; the message says what is missing or
    carries the log tails."""


def node_binaries_dir() -> Path:
    """The directory holding kubelet, kube-proxy, kube-scheduler and workload (built once by
    ``tools/node/build.sh``, then cached).

    Raises:
        NodeError: the build failed or left a binary out.
    """
    try:
        path = run_build_script(NODE_BUILD_SCRIPT, "the node")
    except ControlPlaneError as exc:
        raise NodeError(str(exc)) from None
    for name in NODE_BINARIES:
        if not (path / name).is_file():
            raise NodeError(f"{path} (from {NODE_BUILD_SCRIPT}) lacks {name}")
    return path


def missing_prerequisites() -> list[str]:
    """What this host lacks to run a node, one line each (empty: nothing)."""
    missing: list[str] = []
    if os.geteuid() != 0:
        missing.append("root: containerd, runc and the node's namespaces need uid 0")
    for command, package in HOST_COMMANDS.items():
        if shutil.which(command) is None:
            missing.append(f"{command} (Debian package {package})")
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN_DIR / plugin).is_file():
            missing.append(f"{CNI_BIN_DIR / plugin} (Debian package containernetworking-plugins)")
    if not (CGROUP_ROOT / "memory").is_dir() and not (CGROUP_ROOT / "cgroup.controllers").is_file():
        missing.append(f"cgroups: neither v1 controllers nor v2 mounted at {CGROUP_ROOT}")
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        missing.append("br_netfilter (/proc/sys/net/bridge): Services between pods need it")
    if "overlay" not in Path("/proc/filesystems").read_text():
        missing.append("the overlay file system (containerd's snapshotter)")
    return missing


def _run(args: list[str], what: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NodeError(f"{what}: {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class NodeAddresses:
    """The addresses of node ``index`` (1-250): the veth link and the pod subnet."""

    index: int

    @property
    def host_ip(self) -> str:
        """The host side of the veth pair: kube-apiserver binds and advertises it."""
        return f"10.200.{self.index}.1"

    @property
    def node_ip(self) -> str:
        """The node side: the node's InternalIP, where the kubelet serves."""
        return f"10.200.{self.index}.2"

    @property
    def pod_cidr(self) -> str:
        return f"10.201.{self.index}.0/24"

    @property
    def host_link(self) -> str:
        return f"tfsm{self.index}h"

    @property
    def node_link(self) -> str:
        return f"tfsm{self.index}n"


class NodeSandbox:
    """The node's network, mount and PID namespaces, joined to the host by a veth pair.

    The namespaces exist while their init (``workload pause``, PID 1 inside) lives;
    :meth:`spawn` starts a process in all three; :meth:`stop` kills the init, and with it every
    process, mount and network device of the node.
    """

    def __init__(self, workload: Path, workdir: Path) -> None:
        self.workload = workload
        self.workdir = workdir
        self.addresses: NodeAddresses | None = None
        self._unshare: subprocess.Popen[bytes] | None = None
        self.init_pid = 0

    def start(self) -> NodeSandbox:
        self._unshare = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child=SIGKILL",
                str(self.workload),
                "pause",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        self.init_pid = self._wait_for_init()
        self.addresses = self._link()
        a = self.addresses
        self.run(
            "set -e\n"
            # Mounts made inside stay inside (the kubelet's mount propagation checks want a
            # shared root); /run and /var/log hold containerd's and the kubelet's fixed paths.
            "mount --make-rshared /\n"
            "mount -t tmpfs -o mode=755 node-run /run\n"
            "mount -t tmpfs -o mode=755 node-log /var/log\n"
            "ip link set lo up\n"
            f"ip addr add {a.node_ip}/30 dev {a.node_link}\n"
            f"ip link set {a.node_link} up\n"
            f"ip route add default via {a.host_ip}\n"
            # The namespace's own copies: a router for its pods, and Service traffic between
            # pods on one bridge through iptables.
            "echo 1 > /proc/sys/net/ipv4/ip_forward\n"
            "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables\n",
            "configuring the node's namespaces",
        )
        return self

    def _wait_for_init(self) -> int:
        assert self._unshare is not None
        own = os.readlink("/proc/self/ns/pid")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._unshare.poll() is not None:
                raise NodeError(f"unshare exited ({self._unshare.returncode})")
            with contextlib.suppress(OSError, ValueError):
                children = Path(f"/proc/{self._unshare.pid}/task/{self._unshare.pid}/children")
                for pid in children.read_text().split():
                    if os.readlink(f"/proc/{pid}/ns/pid") != own:
                        return int(pid)
            time.sleep(0.05)
        raise NodeError("the node's namespaces did not come up within 10 s")

    def _link(self) -> NodeAddresses:
        """The veth pair of the first free index; the host side addressed and routed."""
        for index in range(1, 251):
            a = NodeAddresses(index)
            proc = subprocess.run(
                ["ip", "link", "add", a.host_link, "type", "veth", "peer", "name", a.node_link],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                if "exists" in proc.stderr:
                    continue  # another node's
                raise NodeError(f"ip link add {a.host_link}: {proc.stderr.strip()}")
            _run(["ip", "link", "set", a.node_link, "netns", str(self.init_pid)], "veth")
            _run(["ip", "addr", "add", f"{a.host_ip}/30", "dev", a.host_link], "veth")
            _run(["ip", "link", "set", a.host_link, "up"], "veth")
            _run(["ip", "route", "add", a.pod_cidr, "via", a.node_ip], "pod route")
            return a
        raise NodeError("no free node index: 250 veth pairs tfsm<n>h exist")

    def enter(self) -> list[str]:
        """The command prefix that runs a program in the node's namespaces."""
        return ["nsenter", f"--target={self.init_pid}", "--net", "--mount", "--pid", "--"]

    def run(self, script: str, what: str) -> str:
        """Run a shell script in the node's namespaces; returns its output."""
        return _run([*self.enter(), "sh", "-c", script], what)

    def stop(self) -> None:
        """Kill the init: the kernel ends every process of the node, and the namespaces with
        their mounts and network devices go with the last of them."""
        if self.init_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        if self._unshare is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._unshare.wait(10)
        # The veth pair dies with the network namespace; a host side left by a failed start is
        # removed here.
        if self.addresses is not None:
            subprocess.run(
                ["ip", "link", "del", self.addresses.host_link], capture_output=True, check=False
            )
        self.init_pid = 0


def _cgroup_dirs() -> set[Path]:
    """Every cgroup directory of the host (all v1 hierarchies, or the v2 tree)."""
    found: set[Path] = set()
    for top, dirs, _ in os.walk(CGROUP_ROOT):
        found.update(Path(top) / d for d in dirs)
    return found


def _remove_cgroups(before: set[Path], timeout: float = 10.0) -> list[Path]:
    """Remove the cgroup directories made since ``before`` (deepest first); returns those
    that would not go (a process still in them) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = sorted(_cgroup_dirs() - before, key=lambda p: len(p.parts), reverse=True)
        for path in left:
            with contextlib.suppress(OSError):
                path.rmdir()
        left = [p for p in left if p.exists()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _workload_rootfs(workload: Path, directory: Path) -> Path:
    rootfs = directory / "rootfs"
    rootfs.mkdir(parents=True, exist_ok=True)
    shutil.copy2(workload, rootfs / "workload")
    (rootfs / "tmp").mkdir(exist_ok=True)
    return rootfs


def local_images(workload: Path, directory: Path) -> list[oci.Archive]:
    """The pause and workload image archives, both the ``workload`` program, written into
    ``directory`` (deterministic: the same binary gives the same digests)."""
    rootfs = _workload_rootfs(workload, directory)
    epoch = int(workload.stat().st_mtime)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    archives = []
    for reference, command in ((PAUSE_IMAGE, ["pause"]), (WORKLOAD_IMAGE, ["sleep", "0"])):
        name, tag = reference.rsplit(":", 1)
        archives.append(
            oci.write_archive(
                directory / f"{name.rsplit('/', 1)[-1]}.oci.tar",
                rootfs,
                name=name,
                tag=tag,
                config={
                    "Entrypoint": ["/workload"],
                    "Cmd": command,
                    "User": "65532:65532",
                    "Env": ["PATH=/"],
                },
                created=created,
                epoch=epoch,
                history=["tools/node/cmd/workload (taskfsm_dev.node.local_images)"],
            )
        )
    return archives


class RealNode:
    """One node: containerd, the kubelet and kube-proxy in a :class:`NodeSandbox`, and
    kube-scheduler beside the control plane.

    Args:
        control_plane: started with ``address=`` the sandbox's host IP and ``for_nodes=True``.
        sandbox: started.
        bin_dir: :func:`node_binaries_dir`.
        name: the Node's name.
        startup_timeout: seconds for each component, and for the Node to become Ready.
    """

    def __init__(
        self,
        control_plane: ControlPlane,
        sandbox: NodeSandbox,
        bin_dir: Path,
        *,
        name: str = "taskfsm-node",
        startup_timeout: float = 120.0,
    ) -> None:
        assert sandbox.addresses is not None
        self.control_plane = control_plane
        self.sandbox = sandbox
        self.addresses = sandbox.addresses
        self.bin_dir = bin_dir
        self.name = name
        self.startup_timeout = startup_timeout
        self.workdir = sandbox.workdir
        self.socket = self.workdir / "containerd" / "containerd.sock"
        self._procs: list[Process] = []
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> RealNode:
        self._start_containerd()
        for archive in local_images(self.bin_dir / "workload", self.workdir / "images"):
            self.import_image(archive.path)
        self._start_kubelet()
        self._start_kube_proxy()
        self._start_scheduler()
        self._wait_node_ready()
        return self

    def stop(self, grace: float = 5.0) -> None:
        """Stop kube-scheduler, then the sandbox: what runs there ends with it (a node needs no
        graceful stop, and its pods are gone with it)."""
        with self._lock:
            procs, self._procs = self._procs, []
        for proc in procs:
            if proc.name == "kube-scheduler":
                terminate(proc.popen, grace)
        self.sandbox.stop()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(10)

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(f"--- {p.name} ({p.log_path}) ---\n{p.tail(lines)}" for p in self._procs)

    # -- images ----------------------------------------------------------------------------------

    def import_image(self, archive: Path) -> None:
        """Import an OCI or docker archive into the node's containerd (the CRI's namespace), so
        pods use it with ``imagePullPolicy: Never`` or ``IfNotPresent``."""
        _run(
            [
                *self.sandbox.enter(),
                "ctr",
                f"--address={self.socket}",
                "--namespace=k8s.io",
                "images",
                "import",
                "--all-platforms",
                str(archive),
            ],
            f"importing {archive.name}",
        )

    def images(self) -> list[str]:
        """The image references the node's containerd holds."""
        out = _run(
            [*self.sandbox.enter(), "ctr", f"--address={self.socket}", "--namespace=k8s.io",
             "images", "list", "--quiet"],
            "listing images",
        )  # fmt: skip
        return out.split()

    # -- components ------------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], *, in_sandbox: bool = True) -> Process:
        log_path = self.workdir / f"{name}.log"
        log = log_path.open("ab")
        popen = subprocess.Popen(
            [*self.sandbox.enter(), *args] if in_sandbox else args,
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

    def _wait(self, proc: Process, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise NodeError(f"{proc.name} exited ({proc.popen.returncode}) before {what}")
            if ready():
                return
            time.sleep(0.2)
        raise NodeError(f"timed out after {self.startup_timeout:.0f}s waiting for {what}")

    def _start_containerd(self) -> None:
        base = self.workdir / "containerd"
        cni_conf = self.workdir / "cni"
        for directory in (base, cni_conf):
            directory.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-taskfsm-node.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "taskfsm-node",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": "cni0",
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": self.addresses.pod_cidr}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(self.workdir / "cni-ipam"),
                            },
                        }
                    ],
                },
                indent=2,
            )
        )
        config = base / "config.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{base / "root"}"\n'
            f'state = "{base / "state"}"\n'
            "[grpc]\n"
            f'  address = "{self.socket}"\n'
            "[metrics]\n"
            '  address = ""\n'
            '[plugins."io.containerd.grpc.v1.cri"]\n'
            f'  sandbox_image = "{PAUSE_IMAGE}"\n'
            # runc cannot lower oom_score_adj here; containerd then asks for no change.
            "  restrict_oom_score_adj = true\n"
            "  disable_apparmor = true\n"
            '[plugins."io.containerd.grpc.v1.cri".containerd]\n'
            '  snapshotter = "overlayfs"\n'
            '[plugins."io.containerd.grpc.v1.cri".cni]\n'
            f'  bin_dir = "{CNI_BIN_DIR}"\n'
            f'  conf_dir = "{cni_conf}"\n'
        )
        proc = self._spawn("containerd", ["containerd", f"--config={config}"])
        self._wait(proc, self.socket.exists, "containerd's socket")

    def _start_kubelet(self) -> None:
        root = self.workdir / "kubelet"
        root.mkdir(exist_ok=True)
        config = root / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "containerRuntimeEndpoint": f"unix://{self.socket}",
                    # The settings this host needs, and why: the module's docstring.
                    "failCgroupV1": False,
                    "failSwapOn": False,
                    "cgroupDriver": "cgroupfs",
                    "cgroupsPerQOS": False,
                    "enforceNodeAllocatable": [],
                    "address": self.addresses.node_ip,
                    "readOnlyPort": 0,
                    "healthzBindAddress": "127.0.0.1",
                    "healthzPort": 10248,
                    # kube-apiserver reaches the kubelet (logs, exec) without a client
                    # certificate; the port is only reachable from the host.
                    "authentication": {
                        "anonymous": {"enabled": True},
                        "webhook": {"enabled": False},
                    },
                    "authorization": {"mode": "AlwaysAllow"},
                    "volumePluginDir": str(root / "volume-plugins"),
                    "podLogsDir": "/var/log/pods",
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "evictionHard": {
                        "memory.available": "50Mi",
                        "nodefs.available": "1%",
                        "imagefs.available": "1%",
                    },
                    "serializeImagePulls": False,
                    "nodeStatusUpdateFrequency": "5s",
                    "nodeStatusReportFrequency": "10s",
                    "shutdownGracePeriod": "0s",
                    "clusterDomain": "cluster.local",
                    "resolvConf": "/etc/resolv.conf",
                }
            )
        )
        proc = self._spawn(
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={self.control_plane.kubeconfig}",
                f"--root-dir={root}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.addresses.node_ip}",
                "--v=1",
            ],
        )
        self._wait(proc, lambda: self._node() is not None, f"Node {self.name} to register")

    def _start_kube_proxy(self) -> None:
        self._spawn(
            "kube-proxy",
            [
                str(self.bin_dir / "kube-proxy"),
                f"--kubeconfig={self.control_plane.kubeconfig}",
                f"--hostname-override={self.name}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={self.addresses.pod_cidr}",
                # The conntrack sysctls are the host's, not the namespace's: leave them.
                "--conntrack-max-per-core=0",
                "--conntrack-tcp-timeout-established=0",
                "--conntrack-tcp-timeout-close-wait=0",
                "--metrics-bind-address=127.0.0.1:10249",
                "--healthz-bind-address=127.0.0.1:10256",
                "--v=1",
            ],
        )

    def _start_scheduler(self) -> None:
        proc = self._spawn(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--kubeconfig={self.control_plane.kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
            in_sandbox=False,
        )
        time.sleep(0.5)
        if proc.popen.poll() is not None:
            raise NodeError(f"kube-scheduler exited ({proc.popen.returncode})")

    # -- the Node --------------------------------------------------------------------------------

    def _node(self) -> dict[str, Any] | None:
        from taskfsm.kube.errors import NotFound
        from taskfsm.kube.rest import Rest
        from taskfsm_dev.podlogs import NODES

        with self.control_plane.api_client() as api:
            try:
                return Rest(api).get(NODES, None, self.name)
            except NotFound:
                return None

    def _wait_node_ready(self) -> None:
        def ready() -> bool:
            node = self._node() or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            is_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            )
            taints = (node.get("spec") or {}).get("taints") or []
            return is_ready and not taints

        proc = next(p for p in self._procs if p.name == "kubelet")
        self._wait(proc, ready, f"Node {self.name} Ready without taints")


@dataclass
class RealCluster:
    """A control plane and one real node: :class:`NodeSandbox` → :class:`ControlPlane` bound
    to the sandbox's host IP → :class:`RealNode`. Stopping reverses it, then removes the
    cgroups the node made.

    Use as a context manager. Attributes after start: ``control_plane``, ``node``.
    """

    name: str = "taskfsm-node"
    controller_manager_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.control_plane: ControlPlane | None = None
        self.node: RealNode | None = None
        self.sandbox: NodeSandbox | None = None
        self._cgroups_before: set[Path] = set()
        self.workdir: Path | None = None

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> RealCluster:
        """Raises:
        NodeError: the host lacks something (the list), or a component failed (log tails).
        """
        missing = missing_prerequisites()
        if missing:
            lacks = "\n  ".join(missing)
            raise NodeError(f"this host cannot run a real node; it lacks:\n  {lacks}")
        bin_dir = node_binaries_dir()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        atexit.register(self.stop)
        self._cgroups_before = _cgroup_dirs()
        try:
            self.sandbox = NodeSandbox(bin_dir / "workload", self.workdir).start()
            assert self.sandbox.addresses is not None
            self.control_plane = ControlPlane(
                name=self.name,
                address=self.sandbox.addresses.host_ip,
                for_nodes=True,
                controller_manager_args=self.controller_manager_args,
            ).start()
            self.node = RealNode(self.control_plane, self.sandbox, bin_dir, name=self.name)
            self.node.start()
        except BaseException as exc:
            tails = self.log_tails()
            self.stop()
            if isinstance(exc, ControlPlaneError):
                raise NodeError(f"{exc}\n{tails}") from None
            raise
        return self

    def log_tails(self, lines: int = 40) -> str:
        parts = [p.log_tails(lines) for p in (self.control_plane, self.node) if p is not None]
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop the node, the control plane and the sandbox; remove the node's cgroups and
        its directory.

        Raises:
            NodeError: a cgroup the node made would not go (a process of it still runs).
        """
        if self.node is not None:
            self.node.stop()
            self.node = None
        if self.sandbox is not None:
            self.sandbox.stop()
            self.sandbox = None
        if self.control_plane is not None:
            self.control_plane.stop()
            self.control_plane = None
        left = _remove_cgroups(self._cgroups_before) if self._cgroups_before else []
        self._cgroups_before = set()
        if self.workdir is not None and not os.environ.get("TASKFSM_KEEP_CP"):
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None
        if left:
            raise NodeError(f"cgroups of the node still in use: {[str(p) for p in left]}")

    def api_client(self) -> ApiClient:
        assert self.control_plane is not None
        return self.control_plane.api_client()


@contextlib.contextmanager
def real_cluster(**options: Any) -> Iterator[RealCluster]:
    """``with real_cluster() as cluster:`` a control plane with one real node."""
    with RealCluster(**options) as cluster:
        yield cluster
