"""The Task's phases: every value `status.phase` may hold, and the states they stand for.

The one home of the Task phase names in `machines` (the runtime's copy, for the wire, is
`taskfsm.api.constants.TaskPhase`; a test keeps the two equal). The chart
(`machines.task.chart`) restores a pass's configuration from `PHASE_STATES`, the observation
(`machines.task.observation`) asks `PHASES` and `TERMINAL_PHASES`.

Spec: docs/behaviour.md §1.3 and §3.4.
"""

from __future__ import annotations

from typing import Final

INITIALIZING: Final = "Initializing"
JOB_PENDING: Final = "JobPending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"

PHASE_STATES: Final = {
    "": "new",
    INITIALIZING: "initializing",
    JOB_PENDING: "job_pending",
    RUNNING: "running",
    SUCCEEDED: "succeeded",
    FAILED: "failed",
}
"""`status.phase` → state id. `""` (not set yet) is no valid state value for the library, hence
the map."""

STATE_PHASES: Final = {state_id: phase for phase, state_id in PHASE_STATES.items()}
"""State id → `status.phase`, for the six phase states only."""

PHASES: Final = tuple(PHASE_STATES)
"""Every value `status.phase` may hold (`""` = not set yet)."""

TERMINAL_PHASES: Final = frozenset({SUCCEEDED, FAILED})
"""Phases that record the Job's outcome (the states under Terminated); a terminal phase never
goes back (§3.9)."""

WARNING_PHASES: Final = frozenset({FAILED})
"""Phases whose Event is a Warning (every other phase change is a Normal Event)."""
