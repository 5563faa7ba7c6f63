"""Where the controller's CPU goes: py-spy samples of `taskfsm run` during a burst, by category.

`bench_controller.py --profile` (and every `make bench`) attaches `py-spy record --gil` to the
controller process for the length of one burst run and hands the collapsed stacks to
`categorise`: each sample (a moment some thread held the GIL, i.e. the process ran Python) is
given to its innermost frame that belongs to a known place: a library cost (JSON, the HTTP client,
the statechart library, deep copies, logging, metrics) or a package of taskfsm's own code. So a
sample in a guard or an effect that the statechart library called counts for that guard or
effect, not for the library (self time by place). Shares times the run's CPU per Task give
milliseconds per Task.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

#: (category, substrings of a frame's file): searching from the innermost frame outwards, the
#: first frame that matches one of these or of :data:`OWN_CODE` gives the sample its category.
LEAF_COSTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("JSON decoding", ("json/decoder.py", "json/__init__.py:loads", "orjson")),
    ("JSON encoding", ("json/encoder.py",)),
    ("client request building (sanitize, headers)", ("kubernetes/client/api_client.py",)),
    (
        "client configuration (token refresh hook, proxy lookup)",
        ("kubernetes/client/configuration.py", "kubernetes/config/"),
    ),
    (
        "HTTP and TLS (urllib3, http.client, ssl)",
        ("urllib3/", "http/client.py", "ssl.py", "socket.py"),
    ),
    ("statechart library (events, callbacks)", ("statemachine/",)),
    ("deep copies", ("copy.py",)),
    ("logging", ("logging/", "structlog/")),
    ("metrics", ("prometheus_client/",)),
    ("pydantic validation", ("pydantic/", "pydantic_core")),
)

#: Where a sample's innermost frame is waiting on another thread (lock contention).
LOCKS = ("threading.py", "queue.py")

#: taskfsm's own code by package (checked after :data:`LEAF_COSTS` for each frame).
OWN_CODE: tuple[tuple[str, str], ...] = (
    ("watch loop (informers, caches)", "taskfsm/kube/informer.py"),
    ("watch loop (informers, caches)", "taskfsm/kube/cache.py"),
    ("watch loop (informers, caches)", "taskfsm/kube/transforms.py"),
    ("REST layer (taskfsm.kube.rest)", "taskfsm/kube/rest.py"),
    # libcurl's own work runs without the GIL and so is in no sample: only its Python side is.
    ("HTTP over libcurl, its Python side (taskfsm.kube.curl)", "taskfsm/kube/curl.py"),
    ("Events", "taskfsm/kube/events.py"),
    ("event handlers (keys to queue)", "taskfsm/controllers/task/handlers.py"),
    ("event handlers (keys to queue)", "taskfsm/controllers/workflow/handlers.py"),
    ("Workflow reconcile", "taskfsm/controllers/workflow/"),
    ("MPE registry and reconcile", "taskfsm/controllers/mpe/"),
    ("MPE registry and reconcile", "taskfsm/controllers/clusters/"),
    ("Task reconcile (read, observe, write)", "taskfsm/controllers/task/reconciler.py"),
    ("Task reconcile (read, observe, write)", "taskfsm/controllers/task/read.py"),
    ("Task reconcile (read, observe, write)", "taskfsm/controllers/task/observe.py"),
    ("Task reconcile (read, observe, write)", "taskfsm/controllers/task/write.py"),
    ("Task reconcile (read, observe, write)", "taskfsm/controllers/task/store.py"),
    ("Task reconcile (read, observe, write)", "taskfsm/controllers/job_facts.py"),
    ("Task effects and builders", "taskfsm/controllers/task/effects.py"),
    ("Task effects and builders", "taskfsm/controllers/task/jobsite.py"),
    ("Task effects and builders", "taskfsm/selection/"),
    ("Task effects and builders", "taskfsm/manifests/"),
    ("Task effects and builders", "taskfsm/strategic_merge/"),
    ("orphan collection", "taskfsm/controllers/task/orphans.py"),
    ("pass engine and chart (machines)", "machines/"),
    ("API models and parsing (taskfsm.api)", "taskfsm/api/"),
    ("work queue and workers", "taskfsm/manager/"),
)


def py_spy() -> str:
    path = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(path).exists():
        raise RuntimeError(
            "py-spy is not installed (it is in the test dependency group: make setup)"
        )
    return path


class Recorder:
    """`py-spy record --gil` on a process until :meth:`stop`."""

    def __init__(self, pid: int, output: Path, rate: int = 250) -> None:
        self.output = output
        self.proc = subprocess.Popen(
            [
                py_spy(),
                "record",
                "--pid",
                str(pid),
                "--gil",
                "--threads",
                "--rate",
                str(rate),
                "--format",
                "raw",
                "--output",
                str(output),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self) -> Counter[str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if not self.output.exists():
            err = (self.proc.stderr.read() if self.proc.stderr else b"").decode(errors="replace")
            raise RuntimeError(f"py-spy wrote no profile: {err[-500:]}")
        return categorise(self.output.read_text())


def categorise(collapsed: str) -> Counter[str]:
    """Samples by category from py-spy's collapsed stacks (`frame;frame;... count` lines)."""
    out: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")[::-1]  # innermost first
        out[_category(frames)] += int(count)
    return out


def _category(frames: list[str]) -> str:
    if frames and any(n in frames[0] for n in LOCKS):
        return "threads and locks"
    for frame in frames:
        for name, needles in LEAF_COSTS:
            if any(n in frame for n in needles):
                return name
        for name, needle in OWN_CODE:
            if needle in frame:
                return name
    return "other"
