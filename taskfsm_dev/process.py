"""``taskfsm run`` as a separate process, for end-to-end tests: what an operator deploys.

:class:`ControllerProcess` starts ``python -m taskfsm run`` against a kubeconfig with free
loopback ports for ``/metrics`` and the probes, sends its output to a log file, waits for
``/readyz``, and stops it the two ways a kubelet does: :meth:`~ControllerProcess.terminate`
(SIGTERM, a graceful stop) and :meth:`~ControllerProcess.kill` (SIGKILL, a crash). The child dies
with the test process (``PR_SET_PDEATHSIG``), so a killed test run leaves no controller behind.
Errors carry the tail of the log.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from taskfsm_dev.controlplane import PORT_ATTEMPTS, REPO_ROOT, free_port


class ControllerProcessError(RuntimeError):
    """The controller process did not start, answer or stop as expected (message: its log tail)."""


def _child_setup() -> None:
    os.setpgrp()
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the test process


class ControllerProcess:
    """One ``taskfsm run`` process.

    Args:
        kubeconfig: kubeconfig file of the main cluster.
        namespace: ``--namespace`` (None: all namespaces).
        leader_elect: ``--leader-elect`` (with ``lease_namespace``) or ``--no-leader-elect``.
        identity: ``--leader-election-identity``.
        args: further ``taskfsm run`` flags.
        log_dir: where the log file goes (default: a new temporary directory).
        name: label for the log file and messages.
    """

    def __init__(
        self,
        kubeconfig: str | Path,
        *,
        namespace: str | None = None,
        leader_elect: bool = False,
        lease_namespace: str | None = None,
        identity: str | None = None,
        args: Sequence[str] = (),
        log_dir: str | Path | None = None,
        name: str = "taskfsm",
    ) -> None:
        self.name = name
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="taskfsm-proc-")) / f"{name}.log"
        cmd = [
            sys.executable,
            "-m",
            "taskfsm",
            "run",
            f"--kubeconfig={kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            "--leader-elect" if leader_elect else "--no-leader-elect",
        ]
        if namespace:
            cmd.append(f"--namespace={namespace}")
        if lease_namespace:
            cmd.append(f"--leader-election-namespace={lease_namespace}")
        if identity:
            cmd.append(f"--leader-election-identity={identity}")
        self.cmd = [*cmd, *args]
        self.popen: subprocess.Popen[bytes] | None = None
        self._env: dict[str, str] = {}
        self._note = ""

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, *, wait_ready: bool = True, timeout: float = 120.0) -> ControllerProcess:
        """Start the process; with ``wait_ready`` return once ``/readyz`` answers 200."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KUBECONFIG", None)
        self._spawn(env, "")
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def _spawn(self, env: dict[str, str], note: str) -> None:
        """Start the process with ``env``; ``note`` prefixes its command line in the log. Both
        are kept for a start on fresh ports (:meth:`wait_ready`)."""
        self._env, self._note = env, note
        with self.log_path.open("ab") as log:
            log.write(f"$ {note}{' '.join(self.cmd)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self.cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO_ROOT,
                env=env,
                preexec_fn=_child_setup,
            )

    def fresh_ports(self) -> None:
        """New endpoint ports for the next start: the old ones may have been taken meanwhile
        (another process's ephemeral port)."""
        self.metrics_port, self.health_port = free_port(), free_port()
        flags = {
            "--metrics-bind-address=": f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address=": f"127.0.0.1:{self.health_port}",
        }
        self.cmd = [
            next((f + v for f, v in flags.items() if arg.startswith(f)), arg) for arg in self.cmd
        ]

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.ensure_stopped()

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def kill(self) -> None:
        """SIGKILL (a crash: no cleanup, the Lease is not released); wait until it is gone."""
        if self.running:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (graceful stop); wait up to ``timeout`` s and return the exit code."""
        assert self.popen is not None
        if self.running:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ControllerProcessError(
                f"{self.name} did not exit {timeout:.0f}s after SIGTERM\n{self.tail()}"
            ) from None

    def ensure_stopped(self) -> None:
        """Teardown: SIGTERM, then SIGKILL after a grace period."""
        if not self.running:
            return
        assert self.popen is not None
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()

    # -- endpoints -------------------------------------------------------------------------------

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def probe(self, path: str) -> tuple[int, str]:
        """GET ``/healthz`` or ``/readyz``: (status, body); (0, reason) when nothing answers."""
        url = f"http://127.0.0.1:{self.health_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=3) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except (urllib.error.URLError, OSError) as exc:
            return 0, str(exc)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until ``/readyz`` answers 200; raise with the log tail if the process exits
        first.

        A process that lost one of its ports to another process is started again on fresh ones
        (twice at most), whoever started it: the ports are picked free before the process binds
        them, a second or two later, and on a busy machine another process sometimes takes one
        meanwhile ("Address already in use")."""
        for attempt in range(PORT_ATTEMPTS):
            try:
                self._wait_ready_once(timeout)
                return
            except ControllerProcessError:
                if attempt + 1 == PORT_ATTEMPTS or "Address already in use" not in self.tail(5):
                    raise
                self.fresh_ports()
                self._spawn(self._env, self._note)

    def _wait_ready_once(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last: tuple[int, str] = (0, "")
        while time.monotonic() < deadline:
            if not self.running:
                raise ControllerProcessError(
                    f"{self.name} exited ({self.returncode}) before ready\n{self.tail()}"
                )
            last = self.probe("/readyz")
            if last[0] == 200:
                return
            time.sleep(0.2)
        raise ControllerProcessError(
            f"{self.name} not ready after {timeout:.0f}s (last {last})\n{self.tail()}"
        )

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text: str = response.read().decode()
            return text

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of ``/metrics`` as ``{(name, sorted label pairs): value}``."""
        out = {}
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def metric(self, sample: str, /, **labels: str) -> float:
        """Sum of the samples called ``sample`` whose labels include ``labels`` (0 when none)."""
        total = 0.0
        for (sample_name, pairs), value in self.samples().items():
            if sample_name == sample and all(dict(pairs).get(k) == v for k, v in labels.items()):
                total += value
        return total

    # -- logs ------------------------------------------------------------------------------------

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the log, labelled (for failure messages)."""
        text = self.log_text().splitlines()[-lines:]
        return f"--- {self.name} log ({self.log_path}) ---\n" + "\n".join(text)
