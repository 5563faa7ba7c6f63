"""The lifecycle statecharts as the renderers see them: `TASK`, `WORKFLOW` and `MPE`.

Where this sits in the flow: `machines.diagrams.graph` draws any chart described by a `Chart`,
`machines.diagrams.render` writes each one's diagrams and docs blocks. This module only
describes the three charts (which class, which phases, which model protocol documents the guards
and effects, which observation documents its fields), so the renderers import the charts and
never the other way round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from machines.chart_data import ChartClass
from machines.mpe import chart as mpe_chart
from machines.mpe import model as mpe_model
from machines.mpe import observation as mpe_observation
from machines.task import chart as task_chart
from machines.task import model as task_model
from machines.task import observation as task_observation
from machines.task import phases as task_phases
from machines.task.conditions import TerminalReason
from machines.workflow import chart as workflow_chart
from machines.workflow import model as workflow_model
from machines.workflow import observation as workflow_observation
from machines.workflow import phases as workflow_phases
from machines.workflow.conditions import WorkflowReason


@dataclass(frozen=True)
class Chart:
    """What the renderers need to know about one lifecycle statechart.

    Attributes:
        machine: the chart class.
        phase_states: `status.phase` → state id (`""` for the state of a new object).
        title: the DOT graph label, e.g. `Task lifecycle (machines/task/chart.py)`.
        model: the protocol whose documented methods are the guards and effects.
        guard_names: every guard of `model`, in declaration order.
        effect_names: every effect of `model`, in declaration order.
        field_docs: returns `(name, type, doc)` for every observation field.
        reasons: verdict name → the condition reason it writes (`note_job_failed` →
            `JobFailed`): the labels of the user view's edges into a terminal phase.
    """

    machine: ChartClass
    phase_states: Mapping[str, str]
    title: str
    model: type
    guard_names: tuple[str, ...]
    effect_names: tuple[str, ...]
    field_docs: Callable[[], list[tuple[str, str, str]]]
    reasons: Mapping[str, str] = dataclasses.field(default_factory=dict)


TASK: Final = Chart(
    machine=task_chart.TaskLifecycle,
    phase_states=task_phases.PHASE_STATES,
    title="Task lifecycle (machines/task/chart.py)",
    model=task_model.TaskLifecycleModel,
    guard_names=task_model.GUARD_NAMES,
    effect_names=task_model.EFFECT_NAMES,
    field_docs=task_observation.field_docs,
    reasons={
        "note_job_succeeded": TerminalReason.JOB_SUCCEEDED.value,
        "note_job_failed": TerminalReason.JOB_FAILED.value,
        "note_workflow_terminated": TerminalReason.WORKFLOW_TERMINATED.value,
        "note_job_lost": TerminalReason.JOB_LOST.value,
        "note_job_pods_refused_for_good": TerminalReason.JOB_PODS_REFUSED.value,
    },
)
"""The Task lifecycle, the default of every renderer."""

WORKFLOW: Final = Chart(
    machine=workflow_chart.WorkflowLifecycle,
    phase_states=workflow_phases.PHASE_STATES,
    title="Workflow lifecycle (machines/workflow/chart.py)",
    model=workflow_model.WorkflowLifecycleModel,
    guard_names=workflow_model.GUARD_NAMES,
    effect_names=workflow_model.EFFECT_NAMES,
    field_docs=workflow_observation.field_docs,
    reasons={
        "note_task_failed": WorkflowReason.TASK_FAILED.value,
        "note_completed": WorkflowReason.TASKS_COMPLETED.value,
    },
)
"""The Workflow lifecycle as the renderers see it."""

MPE: Final = Chart(
    machine=mpe_chart.MpeLifecycle,
    phase_states={},
    title="MediaProcessingEntity lifecycle (machines/mpe/chart.py)",
    model=mpe_model.MpeLifecycleModel,
    guard_names=mpe_model.GUARD_NAMES,
    effect_names=mpe_model.EFFECT_NAMES,
    field_docs=mpe_observation.field_docs,
)
"""The MediaProcessingEntity lifecycle as the renderers see it (it has no phases: no user
view)."""
