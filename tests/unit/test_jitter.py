"""The controller's jitter never moves the process-wide `random` state.

Regression: a full test run failed Hypothesis tests ("Do not use the `random` module inside
strategies") because controller threads left running by earlier tests drew their retry jitter from
the global generator while Hypothesis was drawing examples.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

from taskfsm.kube import jitter
from taskfsm.manager.queue import WorkQueue

PRODUCT = Path(__file__).resolve().parents[2] / "taskfsm"


def test_no_product_module_draws_from_the_global_generator() -> None:
    """No module of the product calls a function of the `random` module other than making its
    own `random.Random()`."""
    offenders = []
    for path in sorted(PRODUCT.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "random":
                offenders.append(f"{path.relative_to(PRODUCT)}: from random import ...")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "random"
                and node.attr != "Random"
            ):
                offenders.append(f"{path.relative_to(PRODUCT)}:{node.lineno}: random.{node.attr}")
    assert offenders == []


def test_jittered_retries_leave_the_global_state_alone() -> None:
    """Rate-limited requeues (jittered) and the jitter source keep `random.getstate()` as it was."""
    before = random.getstate()
    queue = WorkQueue(base_delay=0.01, max_delay=0.1, jitter=0.5)
    for n in range(20):
        queue.add_rate_limited(f"ns/task-{n}")
    draws = [jitter.uniform(0.5, 1.5) for _ in range(100)]
    queue.shutdown()
    assert random.getstate() == before
    assert all(0.5 <= d <= 1.5 for d in draws)
    assert len(set(draws)) > 1
