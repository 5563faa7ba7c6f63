"""Benchmark: the cost of the Task lifecycle statechart per reconcile pass.

Run: `.venv/bin/python benchmarks/bench_machine.py [--repeat N]`

Measures, in microseconds (median and 90th percentile of N individually timed calls, after a
warm-up), (1) building `TaskLifecycle` from a persisted phase, which a worker thread does
once (and again after a pass that reached the final state `Finalized`), and (2) one whole
`run_pass` with a model whose effects do nothing, on the thread's reused machine, so the
figure is the statechart's own overhead on top of the reconciler's API calls (the deletion
row includes the rebuild its final state causes). Prints a Markdown table.
Timings are not asserted anywhere; they depend on the machine.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import statemachine

from machines.task.driver import build_machine, run_pass
from machines.task.guards import ObservationGuards
from machines.task.model import EFFECT_NAMES
from machines.task.observation import JobState, TaskObservation


class NoOpModel(ObservationGuards):
    """Guards from the observation; every effect does nothing."""


for _name in EFFECT_NAMES:
    setattr(NoOpModel, _name, lambda self, observation: None)

NOW = datetime(2024, 5, 1, tzinfo=UTC)
SETTLED = {
    "has_finalizer": True,
    "owned_by_workflow": True,
    "mpe_selected": True,
    "function_selected": True,
    "mpe_ready": True,
}
RUNNING = TaskObservation(
    phase="Running",
    job=JobState.ACTIVE,
    job_uid="u1",
    job_ref_uid="u1",
    job_protected=True,
    **SETTLED,
)

BUILDS = [
    (phase or '"" (New)', TaskObservation(phase=phase))
    for phase in ("", "Initializing", "JobPending", "Running", "Succeeded", "Failed")
]

PASSES = [
    ("new Task: finalizer, ownership, New → Initializing", TaskObservation()),
    ("Initializing → JobPending (select)", TaskObservation(phase="Initializing", **SETTLED)),
    ("JobPending → Running (create Job)", TaskObservation(phase="JobPending", **SETTLED)),
    ("Running, Job active (nothing to do)", RUNNING),
    ("Running → Succeeded", RUNNING.replace(job=JobState.SUCCEEDED)),
    (
        "Succeeded, release Job finalizer",
        RUNNING.replace(phase="Succeeded", job=JobState.SUCCEEDED),
    ),
    ("deletion: clean up Job, Finalized", RUNNING.replace(deletion_requested=True)),
    ("unknown phase (error outcome)", TaskObservation(phase="Pending", **SETTLED)),
]


def measure(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and 90th percentile of `repeat` timed calls, in microseconds."""
    for _ in range(max(50, repeat // 10)):
        call()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=500, help="timed calls per row")
    args = parser.parse_args()
    model = NoOpModel()

    print(
        f"python-statemachine {statemachine.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}; {args.repeat} calls per row\n"
    )
    print("| Operation | Case | median µs | p90 µs |")
    print("| --- | --- | ---: | ---: |")
    for label, observation in BUILDS:
        median, p90 = measure(lambda o=observation: build_machine(o, model), args.repeat)
        print(f"| build from phase | {label} | {median:.1f} | {p90:.1f} |")
    for label, observation in PASSES:
        median, p90 = measure(lambda o=observation: run_pass(o, model, now=NOW), args.repeat)
        print(f"| run_pass | {label} | {median:.1f} | {p90:.1f} |")


if __name__ == "__main__":
    main()
