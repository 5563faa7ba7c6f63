"""The Workflow lifecycle as a statechart: states, events, guards and actions, and nothing else.

Where this sits in the flow: the Workflow reconciler counts the Workflow's Tasks into a
`WorkflowObservation`; `machines.workflow.driver.run_pass` rebuilds `WorkflowLifecycle` from
the persisted `status.phase`, sends the events `events_for(observation)` derives, and reports
the phase reached, the effects requested and how long to wait before looking again. The chart
imports nothing from Kubernetes and does no I/O: guards and effects are names resolved on the
runtime model (`machines.workflow.model.WorkflowLifecycleModel`), verdicts are names resolved
on the driver's pass record (`machines.workflow.driver`).

What each phase means to a user:

- New (`""`): the Workflow was just created; nothing has been counted yet.
- Initializing: waiting for its first Task (Tasks are created by users or the NBMP gateway,
  never by this controller).
- Running: at least one of its Tasks is still active (startTime is set once).
- AwaitingCompletion: no Task is active any more; if none appears within
  `workflowTerminationWaitingDuration` (default 20 s) the Workflow succeeds. endTime is the
  moment the last Task finished. A new active Task brings it back to Running.
- Succeeded / Failed: final. Failed comes from a Failed Task whose
  `jobFailurePolicy.defaultAction` is FailWorkflow (the default); Ignore lets the Workflow go
  on. The Task controller then fails every Task still active (docs/behaviour.md §3.11).
  With `--finished-ttl` set, a finished Workflow is deleted once that long has passed since
  endTime (its Tasks go with it, through their owner references).
- Deleting / Finalized: the Workflow is going away; not phases but steps: wait until no Task
  is active (each Task deletes itself when its Workflow is deleting), then drop the finalizer.

Spec: docs/behaviour.md §4.3 with D20 (list errors are returned; Failed is final
within the pass that decides it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final, cast

from statemachine import State

from machines.engine import LifecycleChart
from machines.workflow.observation import WorkflowObservation
from machines.workflow.phases import PHASE_STATES, STATE_PHASES

# Events: what the watch loop observed, derived from the observation by `events_for`.
DELETION_REQUESTED: Final = "deletion_requested"
FINALIZER_MISSING: Final = "finalizer_missing"
LABELS_MISSING: Final = "labels_missing"
TASKS_UNLISTED: Final = "tasks_unlisted"
TASKS_COUNTED: Final = "tasks_counted"
TASK_FAILED: Final = "task_failed"
OBSERVED: Final = "observed"
SETTLED: Final = "settled"


class WorkflowLifecycle(LifecycleChart):
    """Lifecycle of one nagare media engine Workflow (docs/behaviour.md §4.3).

    Within a state, transitions for the same event are tried in declaration order and the
    first whose guards all hold is taken. Effects run as `before` actions, so an effect that
    raises aborts its transition (the state does not change) and becomes `error.execution`,
    which every non-final state handles with `report_error`.

    A pass sends `task_failed` before `observed`, so a Workflow that fails in a pass never
    goes on to AwaitingCompletion or Succeeded in that pass (D20): the Terminated states
    ignore `observed`.
    """

    state_phases: ClassVar[Mapping[str, str]] = STATE_PHASES

    # `cast(State, live)`: see machines/task/chart.py (a compound is a State to the library).

    class live(State.Compound, name="Live"):
        new = State("New", initial=True)

        class started(State.Compound, name="Started"):
            initializing = State("Initializing")
            running = State("Running")
            awaiting_completion = State("AwaitingCompletion")

            observed = (
                initializing.to(running, cond="has_tasks", before="record_start_time")
                | running.to(
                    awaiting_completion,
                    unless="tasks_active",
                    before="record_end_time",
                    on="schedule_completion_check",
                )
                | awaiting_completion.to(running, cond="tasks_active", before="clear_end_time")
                # The wait is measured from endTime; without one there is nothing to wait on.
                | awaiting_completion.to(running, unless="end_time_set")
            )

        class terminated(State.Compound, name="Terminated", enter="ensure_end_time"):
            succeeded = State("Succeeded")
            failed = State("Failed")

        observed = (
            new.to(started.initializing, before="record_queued_time")
            | started.awaiting_completion.to(
                terminated.succeeded, cond="waiting_elapsed", on="note_completed"
            )
            # The timed transition: stay, and ask to be looked at again when the wait is over.
            | started.awaiting_completion.to(
                None, unless="waiting_elapsed", on="schedule_completion_check"
            )
            # Retention (`--finished-ttl`): a finished Workflow is deleted once the TTL has
            # passed since endTime (its Tasks go through their owner references and every
            # finalizer runs); until then it is looked at again when the TTL is due.
            | cast(State, terminated).to(
                None,
                cond="finished_ttl_passed",
                before="delete_expired_workflow",
                on="note_finished_ttl_passed",
            )
            | cast(State, terminated).to(
                None, cond="finished_ttl_set", on="schedule_finished_ttl_check"
            )
        )
        # Only a started Workflow fails: a New one is queued first (next step of the pass).
        task_failed = started.to(
            terminated.failed, cond="failure_fails_workflow", on="note_task_failed"
        )
        # Last in every pass: a Workflow that may still change is looked at again after the
        # resync period even without events (a missed Task event); a terminated or deleting
        # one only on events.
        settled = cast(State, started).to(None, on="schedule_resync")

    deleting = State("Deleting")
    finalized = State("Finalized", final=True)

    deletion_requested = live.to(deleting)
    finalizer_missing = cast(State, live).to(None, before="add_workflow_finalizer")
    labels_missing = cast(State, live).to(None, before="set_workflow_labels")
    # D20: a Task list that failed is an error of the pass, never "zero Tasks".
    tasks_unlisted = cast(State, live).to(None, on="report_list_error") | deleting.to(
        None, on="report_list_error"
    )
    tasks_counted = cast(State, live).to(None, before="record_task_counts") | deleting.to(
        None, before="record_task_counts"
    )
    error_execution = cast(State, live).to(None, on="report_error") | deleting.to(
        None, on="report_error"
    )

    # Deletion waits until no Task is active; each Task deletes itself meanwhile (§3.11).
    observed = (
        deleting.to(finalized, unless="finalizer_present")
        | deleting.to(None, cond="tasks_active", on="report_tasks_active")
        | deleting.to(finalized, before="remove_workflow_finalizer", on="note_deleted")
    )


def configuration_for(state_id: str) -> list[str]:
    """Return the configuration (state values, outermost first) that has `state_id` active.

    Raises:
        KeyError: for an unknown state id.
    """
    state = WorkflowLifecycle.states_map[state_id]
    chain = [state, *state.ancestors()]
    return [s.value for s in reversed(chain)]


def configuration_for_phase(phase: str) -> list[str]:
    """Return the configuration a persisted `status.phase` stands for.

    An unknown phase counts as New, as in the reference (§4.3 "empty/unknown →
    Initializing"); the CRD's enum keeps such values out in practice.
    """
    return configuration_for(PHASE_STATES.get(phase, "new"))


def events_for(observation: WorkflowObservation) -> tuple[str, ...]:
    """Return the events one pass sends, in order (docs/behaviour.md §4.3).

    Deletion first (a terminating Workflow gets no finalizer or labels), then the
    finalizer and the labels, then the Task count: a failed list ends the pass there (D20).
    `task_failed` precedes `observed` so Failed wins over any phase step of the same pass.
    `settled` comes last and decides when to look again. The driver stops early when a pass
    ends in error.
    """
    events: list[str] = []
    if observation.deletion_requested:
        if not observation.has_finalizer:
            return (DELETION_REQUESTED, OBSERVED)
        events.append(DELETION_REQUESTED)
    else:
        if not observation.has_finalizer:
            events.append(FINALIZER_MISSING)
        if not observation.labels_set:
            events.append(LABELS_MISSING)
    if not observation.tasks_listed:
        return (*events, TASKS_UNLISTED)
    if not observation.counts_recorded:
        events.append(TASKS_COUNTED)
    if observation.failed and not observation.deletion_requested:
        events.append(TASK_FAILED)
    events += [OBSERVED, SETTLED]
    return tuple(events)
