"""Crash points: a configured write exits the process with 137; others do nothing."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from tests.support import crashpoints
crashpoints.after_write("PATCH", "tasks/status")
crashpoints.after_write("POST", "jobs")
print("after first create", flush=True)
crashpoints.after_write("POST", "jobs")
print("not reached", flush=True)
"""


def test_crash_after_the_nth_matching_write():
    """TASKFSM_CRASH_AFTER='create jobs#2' exits on the second Job create, not before."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env={"TASKFSM_CRASH_AFTER": "create jobs#2", "PATH": ""},
        check=False,
    )
    assert proc.returncode == 137
    assert proc.stdout == "after first create\n"
    assert "crash point reached after 'create jobs' #2" in proc.stderr


def test_unset_does_nothing():
    """Without the variable every write passes."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env={"PATH": ""},
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.endswith("not reached\n")


def test_installed_observer_reports_successful_writes_only(monkeypatch):
    """The REST observer hook, not a hook in the write path, carries the crash points."""
    from taskfsm.kube import rest
    from tests.support import crashpoints

    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(
        crashpoints, "after_write", lambda method, resource: seen.append((method, resource))
    )
    monkeypatch.setattr(rest.Rest, "__init__", rest.Rest.__init__)
    crashpoints.install()
    client = rest.Rest(object())  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    assert client.observer is not None
    client.observer("POST", "jobs", 201)
    client.observer("POST", "jobs", 409)
    client.observer("GET", "jobs", 200)
    assert seen == [("POST", "jobs")]
