"""One version source (pyproject.toml) and everything derived from it: `taskfsm --version`, the
changelog's newest release, the image tag of deploy/manager.yaml and the chart's versions; the
kubectl plugin entry point; the license."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

import taskfsm
from taskfsm.tools import deploygen

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_taskfsm_version_prints_the_pyproject_version():
    """`taskfsm --version` and `taskfsm.__version__` are pyproject.toml's version."""
    version = PYPROJECT["project"]["version"]
    assert deploygen.project_version() == version
    assert taskfsm.__version__ == version
    out = subprocess.run(
        [sys.executable, "-m", "taskfsm", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout == f"taskfsm {version}\n"


def test_changelog_names_this_version_as_the_newest_release():
    """CHANGELOG.md has an Unreleased section, then this version as the newest release, with a
    date."""
    headings = re.findall(r"^## \[([^\]]+)\](.*)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[0][0] == "Unreleased"
    version, rest = headings[1]
    assert version == deploygen.project_version()
    assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest)


def test_image_and_chart_carry_the_version():
    """deploy/manager.yaml runs ghcr.io/nagare-media/taskfsm:<version>; the chart's version and
    appVersion are <version> and its default image repository is the same; no other image name
    is left in deploy/ or the docs."""
    version = deploygen.project_version()
    manager = [d for d in yaml.safe_load_all((ROOT / "deploy/manager.yaml").read_text()) if d]
    deployment = next(d for d in manager if d["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/nagare-media/taskfsm:{version}" == deploygen.image()
    chart = yaml.safe_load((ROOT / "deploy/chart/Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version
    values = yaml.safe_load((ROOT / "deploy/chart/values.yaml").read_text())
    assert values["image"]["repository"] == deploygen.IMAGE_REPOSITORY
    pages = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "deploy").rglob("*.yaml")]
    assert [p for p in pages if "ghcr.io/example" in p.read_text()] == []


def test_kubectl_plugin_entry_point_is_the_cli():
    """pyproject.toml declares the kubectl-taskfsm console script (kubectl's plugin name for
    `kubectl taskfsm`) as the taskfsm CLI, and the environment has it installed."""
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts["kubectl-taskfsm"] == scripts["taskfsm"] == "taskfsm.cli:main"
    assert (Path(sys.executable).parent / "kubectl-taskfsm").is_file()


def test_license_is_apache_2():
    """LICENSE is the Apache License 2.0 text, as pyproject.toml declares."""
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0")
    assert "END OF TERMS AND CONDITIONS" in text
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
