"""The Workflow's phases: every value `status.phase` may hold, and the states they stand for.

The one home of the Workflow phase names in `machines` (the runtime's copy, for the wire, is
`taskfsm.api.constants.WorkflowPhase`; a test keeps the two equal).

Spec: docs/behaviour.md §1.4 and §4.3.
"""

from __future__ import annotations

from typing import Final

INITIALIZING: Final = "Initializing"
RUNNING: Final = "Running"
AWAITING_COMPLETION: Final = "AwaitingCompletion"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"

PHASE_STATES: Final = {
    "": "new",
    INITIALIZING: "initializing",
    RUNNING: "running",
    AWAITING_COMPLETION: "awaiting_completion",
    SUCCEEDED: "succeeded",
    FAILED: "failed",
}
"""`status.phase` → state id. `""` is no valid state value for the library, hence the map."""

STATE_PHASES: Final = {state_id: phase for phase, state_id in PHASE_STATES.items()}
"""State id → `status.phase`, for the six phase states only."""

PHASES: Final = tuple(PHASE_STATES)
"""Every value `status.phase` may hold (`""` = not set yet)."""

TERMINAL_PHASES: Final = frozenset({SUCCEEDED, FAILED})
"""Phases after which the Workflow never changes again; its active Tasks then fail (§3.11)."""

WARNING_PHASES: Final = frozenset({FAILED})
"""Phases whose Event is a Warning (every other phase change is a Normal Event)."""
