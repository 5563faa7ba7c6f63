"""taskfsm installs as `pipx install` installs it -- its wheel into a fresh virtual environment of
each Python version ``requires-python`` claims -- and its commands run there.

The wheel is built from this checkout (`uv build`), installed with its pinned dependencies from
PyPI into a venv of Python 3.11 and one of 3.12 (found on PATH, under pyenv, or installed with
`uv python install`; none found fails the test), and each venv's `taskfsm --version`,
`taskfsm list --help`, `kubectl-taskfsm --version` and `taskfsm ui --help` run, and the UI's
charts and script load from the installed package. Installed without the ``client`` extra (as in
the controller image), the controller runs and the client-only commands say what to install. The claimed
versions are read from pyproject.toml, so widening `requires-python` without testing the new
version fails here.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from taskfsm import __version__

REPO = Path(__file__).resolve().parents[2]
# scripts/setup.sh installs uv (from PyPI) on PATH or as `python3 -m uv`.
UV = [shutil.which("uv")] if shutil.which("uv") else ["python3", "-m", "uv"]


def claimed_versions() -> list[str]:
    """The minor versions ``>=3.A,<3.B`` of pyproject.toml's requires-python: 3.A .. 3.(B-1)."""
    spec = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    match = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", spec)
    assert match, f"requires-python {spec!r} is not of the form >=3.A,<3.B"
    low, high = int(match[1]), int(match[2])
    return [f"3.{minor}" for minor in range(low, high)]


def interpreter(version: str) -> str:
    """A CPython of ``version``: on PATH, else a pyenv build, else one `uv python install`s."""
    found = shutil.which(f"python{version}")
    if found and _version_of(found) == version:
        return found
    for candidate in sorted(
        glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}"))
    ):
        if _version_of(candidate) == version:
            return candidate
    installed = subprocess.run(
        [*UV, "python", "install", version], capture_output=True, text=True, check=False
    )
    found_uv = subprocess.run(
        [*UV, "python", "find", version], capture_output=True, text=True, check=False
    )
    if found_uv.returncode != 0:
        raise AssertionError(
            f"no Python {version}: not on PATH, not under ~/.pyenv, and `uv python install "
            f"{version}` failed:\n{installed.stderr[-2000:]}"
        )
    return found_uv.stdout.strip()


def _version_of(python: str) -> str:
    proc = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [*UV, "build", "--wheel", "--out-dir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    (built,) = out.glob("taskfsm-*.whl")
    return built


def test_claimed_versions_are_at_least_3_11_and_3_12() -> None:
    assert {"3.11", "3.12"} <= set(claimed_versions())


@pytest.mark.parametrize("version", claimed_versions())
def test_wheel_installs_and_runs_on(version: str, wheel: Path, tmp_path: Path) -> None:
    """The wheel, its ``client`` extra and their locked dependencies install into a fresh venv of
    ``version`` and the console scripts run there."""
    run = _installed(version, f"{wheel}[client]", tmp_path)

    assert run("python", "-c", "import sys; print(sys.version_info[:2])") == (
        f"({version.replace('.', ', ')})\n"
    )
    assert run("taskfsm", "--version").strip() == f"taskfsm {__version__}"
    assert "--all-namespaces" in run("taskfsm", "list", "--help")
    assert run("kubectl-taskfsm", "--version").strip() == f"taskfsm {__version__}"
    assert "list" in run("kubectl_complete-taskfsm", "li")
    assert "--port" in run("taskfsm", "ui", "--help")
    # The UI's charts and page come from the wheel (no checkout, no Graphviz needed).
    sizes = run(
        "python",
        "-c",
        "from taskfsm.tools.ui import charts, server; "
        "print(len(charts.svg('task', 'phases')), len(server._static('app.js')))",
    )
    assert all(int(n) > 1000 for n in sizes.split()), sizes


def test_without_the_client_extra_the_controller_runs_and_client_commands_say_what_is_missing(
    wheel: Path, tmp_path: Path
) -> None:
    """The controller image installs taskfsm without the ``client`` extra (no graphviz or
    argcomplete; aiohttp stays, the Kubernetes client needs it): ``taskfsm run`` starts as far as
    its flags, and ``diagram`` and ``completion`` exit naming the extra."""
    run = _installed("3.11", str(wheel), tmp_path)
    missing = run(
        "python",
        "-c",
        "import importlib.util as u; print([m for m in ('graphviz', 'argcomplete') if u.find_spec(m)])",
    )
    assert missing.strip() == "[]"
    assert run("taskfsm", "--version").strip() == f"taskfsm {__version__}"
    assert "--metrics-secure" in run("taskfsm", "run", "--help")
    for command in (["diagram"], ["completion", "bash"]):
        message = run("taskfsm", *command, expect=1)
        assert "pip install 'taskfsm[client]'" in message, (command, message)


def _installed(version: str, requirement: str, tmp_path: Path) -> Any:
    """A fresh venv of Python ``version`` with ``requirement`` installed; returns a runner of its
    console scripts (stdout, or stderr when ``expect`` is the non-zero exit it must end with)."""
    python = interpreter(version)
    venv = tmp_path / "venv"
    subprocess.run([*UV, "venv", "--python", python, str(venv)], check=True, capture_output=True)
    install = subprocess.run(
        [*UV, "pip", "install", "--python", str(venv / "bin" / "python"), requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    def run(*argv: str, expect: int = 0) -> str:
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        proc = subprocess.run(
            [str(venv / "bin" / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,  # not the checkout: the installed package must be the one imported
            env=env,
        )
        assert proc.returncode == expect, f"{argv}: {proc.stderr[-3000:]}"
        return proc.stdout if expect == 0 else proc.stderr

    return run
