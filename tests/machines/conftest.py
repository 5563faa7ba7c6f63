"""Pytest hooks for the lifecycle tests: report the transition coverage figure."""

from __future__ import annotations

import lifecycle_harness
import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in lifecycle_harness.COVERAGE_REPORT:
        terminalreporter.write_line(line)
