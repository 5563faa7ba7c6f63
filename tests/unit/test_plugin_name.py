"""The kubectl plugin names itself as kubectl users call it (`kubectl taskfsm`), not `taskfsm`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from taskfsm.cli import program_name

BIN = Path(sys.executable).parent


def test_program_name_follows_the_executable():
    assert program_name("/usr/local/bin/kubectl-taskfsm") == "kubectl taskfsm"
    assert program_name("kubectl-taskfsm") == "kubectl taskfsm"
    assert program_name("/usr/local/bin/taskfsm") == "taskfsm"
    assert program_name("-c") == "taskfsm"


def test_plugin_help_and_usage_errors_name_the_plugin():
    """`kubectl-taskfsm --help` and a usage error of a subcommand say `kubectl taskfsm`;
    `taskfsm --help` still says `taskfsm`."""
    plugin = subprocess.run(
        [BIN / "kubectl-taskfsm", "--help"], capture_output=True, text=True, check=True
    )
    assert plugin.stdout.startswith("usage: kubectl taskfsm ")
    wrong = subprocess.run(
        [BIN / "kubectl-taskfsm", "wait"], capture_output=True, text=True, check=False
    )
    assert wrong.returncode == 2
    assert "usage: kubectl taskfsm wait" in wrong.stderr
    own = subprocess.run([BIN / "taskfsm", "--help"], capture_output=True, text=True, check=True)
    assert own.stdout.startswith("usage: taskfsm ")
