"""`make generate` regenerates every generated file: its generator list names every generator
(a module with a ``main`` taking ``--check``, the command the freshness tests check against), in
an order where each reads only what the ones before it wrote, and every stale report says to
run it. (Running it takes about 20 s on two cores, so the freshness tests, not this file, check
that its output is committed.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRAPPERS = {"taskfsm.cli": "`taskfsm diagram --check` runs machines.diagrams.render"}
"""Modules with a ``--check`` that generate nothing of their own, and why."""


def make_generators() -> list[str]:
    """The modules the Makefile's GENERATORS variable lists, in its order."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^GENERATORS := ((?:.*\\\n)*.*)$", makefile, re.M)
    assert match, "no GENERATORS in the Makefile"
    return match.group(1).replace("\\", " ").split()


def generator_modules() -> set[str]:
    """Every module of the product and the statecharts that has a ``main`` with ``--check``."""
    found = set()
    for package in ("taskfsm", "machines", "taskfsm_dev"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if re.search(r"^def main\(", text, re.M) and '"--check"' in text:
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found - set(WRAPPERS)


def source_of(module: str) -> str:
    """The text of ``module`` (a package: its ``__init__``)."""
    path = ROOT / Path(*module.split("."))
    return (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()


def test_the_generate_target_runs_every_generator() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\ngenerate:", 1)[1].split("\n\n", 1)[0]
    assert "for module in $(GENERATORS)" in recipe
    assert "$(PY) -m $$module" in recipe
    assert "set -e" in recipe  # a failing generator fails the target
    generators = make_generators()
    assert len(generators) == len(set(generators))
    assert set(generators) == generator_modules()


def test_generators_run_after_what_they_read() -> None:
    """deploy/ copies the CRDs and embeds the alerts and the dashboard."""
    order = make_generators().index
    assert order("taskfsm.api.crdgen") < order("taskfsm.tools.deploygen")
    assert order("taskfsm.tools.monitoring") < order("taskfsm.tools.deploygen")


def test_every_stale_report_says_run_make_generate() -> None:
    """The generators' ``--check`` reports and the freshness tests' messages."""
    for module in make_generators():
        source = source_of(module)
        assert "run `make generate`" in source, module
    for test in (
        "tests/support/freshness.py",
        "tests/unit/test_generated_deploy.py",
        "tests/unit/api/test_api_crds.py",
        "tests/unit/test_docs.py",
        "tests/unit/strategic_merge/test_patch_meta.py",
        "tests/unit/test_monitoring.py",
    ):
        text = (ROOT / test).read_text()
        assert "run `make generate`" in text, test
        assert not re.search(r"run:? `?(\.venv/bin/)?python -m", text), test
