"""The memory benchmark's start-up hook (benchmarks/memory_hooks/sitecustomize.py) really hooks
the controller: Python reports an error in ``sitecustomize`` and goes on without it, so a hook
that no longer imports (the manager module was renamed once) silently measured every variant as
shipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("levers", ["none,freeze,trim", "traced"])
def test_the_hook_replaces_the_managers_start_for_every_lever(levers: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "benchmarks" / "memory_hooks"), str(REPO)]),
        "TASKFSM_BENCH_MEMORY": levers,
    }
    probe = "from taskfsm.manager.manager import Manager; print(Manager.start.__qualname__)"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert "sitecustomize" not in done.stderr, done.stderr
    assert done.stdout.strip() == "_after_start.<locals>.start"
