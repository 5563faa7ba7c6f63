"""The lifecycle names exist once per layer, and the two layers agree.

`machines` (pure) has the charts' phases (`machines/task/phases.py`,
`machines/workflow/phases.py`); the runtime has the wire names (`taskfsm.api.constants`). The
terminal phases of each are the states under the chart's Terminated.
"""

from __future__ import annotations

from machines import chart_data
from machines.conditions import Condition
from machines.task import phases as task_phases
from machines.task.chart import TaskLifecycle
from machines.workflow import phases as workflow_phases
from machines.workflow.chart import WorkflowLifecycle
from taskfsm.api import constants as c
from taskfsm.api import timestamps


def _terminal(machine: type) -> set[str]:
    return {s.phase for s in chart_data.states(machine) if s.parent == "terminated" and s.phase}


def test_the_task_phases_are_the_same_in_both_layers():
    assert set(task_phases.PHASES) == {"", *(p.value for p in c.TaskPhase)}
    assert task_phases.TERMINAL_PHASES == set(c.TASK_TERMINAL_PHASES) == _terminal(TaskLifecycle)
    assert set(c.TASK_TERMINAL_CONDITIONS) == set(c.TASK_TERMINAL_PHASES)
    assert set(c.TASK_PRE_RUNNING_PHASES) | {"Running"} | task_phases.TERMINAL_PHASES == set(
        task_phases.PHASES
    )


def test_the_workflow_phases_are_the_same_in_both_layers():
    assert set(workflow_phases.PHASES) == {"", *(p.value for p in c.WorkflowPhase)}
    assert (
        workflow_phases.TERMINAL_PHASES
        == set(c.WORKFLOW_TERMINAL_PHASES)
        == _terminal(WorkflowLifecycle)
    )


def test_the_time_format_is_the_same_in_both_layers():
    stamp = "2024-05-01T12:00:00Z"
    when = timestamps.parse_time(stamp)
    assert when is not None
    assert timestamps.format_time(when) == stamp
    cond = Condition.from_dict({"type": "Ready", "status": "True", "lastTransitionTime": stamp})
    assert cond.last_transition_time == when
    assert cond.to_dict()["lastTransitionTime"] == stamp
    assert timestamps.format_micro_time(when) == "2024-05-01T12:00:00.000000Z"
