"""F8: Kubernetes ≥ 1.31 Job conditions, read by type, mapped to the Task phase.

Table test over `interpret_job_conditions`, then the same condition lists through a Running
pass (`run_pass`) to the Task phase they must produce. Rows from docs/behaviour.md F8:
`[SuccessCriteriaMet]`, `[SuccessCriteriaMet, Complete]`, `[FailureTarget]` held before
`Failed`, `[Failed reason=DeadlineExceeded]`, `failed > 0` then `Complete` after retries; plus
the orderings and False statuses that broke `conditions[0]` readers.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from lifecycle_harness import FakeModel

from machines.task.driver import run_pass
from machines.task.job_status import interpret_job_conditions
from machines.task.observation import JobState, TaskObservation


def cond(type_: str, status: str = "True", **extra: str) -> dict[str, str]:
    return {"type": type_, "status": status, **extra}


F8_TABLE = [
    ("no status yet", None, JobState.ACTIVE, "Running"),
    ("no conditions", [], JobState.ACTIVE, "Running"),
    ("SuccessCriteriaMet alone", [cond("SuccessCriteriaMet")], JobState.SUCCEEDED, "Succeeded"),
    (
        "SuccessCriteriaMet then Complete",
        [cond("SuccessCriteriaMet"), cond("Complete")],
        JobState.SUCCEEDED,
        "Succeeded",
    ),
    (
        "FailureTarget held before Failed",
        [cond("FailureTarget", reason="PodFailurePolicy")],
        JobState.FAILED,
        "Failed",
    ),
    (
        "FailureTarget then Failed",
        [cond("FailureTarget"), cond("Failed", reason="PodFailurePolicy")],
        JobState.FAILED,
        "Failed",
    ),
    (
        "Failed by DeadlineExceeded",
        [cond("Failed", reason="DeadlineExceeded")],
        JobState.FAILED,
        "Failed",
    ),
    (
        "Complete after failed pods were retried",
        [cond("Complete")],
        JobState.SUCCEEDED,
        "Succeeded",
    ),
    (
        "Suspended first, Complete later (conditions[0] is not the outcome)",
        [cond("Suspended", "False"), cond("Complete")],
        JobState.SUCCEEDED,
        "Succeeded",
    ),
    (
        "Complete=False does not count",
        [cond("Complete", "False")],
        JobState.ACTIVE,
        "Running",
    ),
    (
        "FailureTarget=False does not count",
        [cond("FailureTarget", "False"), cond("SuccessCriteriaMet")],
        JobState.SUCCEEDED,
        "Succeeded",
    ),
    (
        "failure wins over a contradictory success",
        [cond("Complete"), cond("Failed")],
        JobState.FAILED,
        "Failed",
    ),
]


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [(row[1], row[2]) for row in F8_TABLE],
    ids=[row[0] for row in F8_TABLE],
)
def test_job_conditions_are_read_by_type(conditions: Any, expected: JobState) -> None:
    """Each F8 combination gives the right `JobState`, in any order."""
    assert interpret_job_conditions(conditions) is expected
    if conditions:
        assert interpret_job_conditions(list(reversed(conditions))) is expected


def test_client_objects_are_accepted() -> None:
    """Conditions as client objects (attributes, e.g. V1JobCondition) read the same."""
    objects = [SimpleNamespace(type="SuccessCriteriaMet", status="True")]
    assert interpret_job_conditions(objects) is JobState.SUCCEEDED


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [(row[1], row[3]) for row in F8_TABLE],
    ids=[row[0] for row in F8_TABLE],
)
def test_job_conditions_map_to_the_task_phase(conditions: Any, phase: str) -> None:
    """A Running Task whose Job shows these conditions ends the pass in `phase`."""
    observation = TaskObservation(
        phase="Running",
        has_finalizer=True,
        owned_by_workflow=True,
        mpe_selected=True,
        function_selected=True,
        mpe_ready=True,
        job=interpret_job_conditions(conditions),
        job_uid="u1",
        job_ref_uid="u1",
        job_protected=True,
    )
    outcome = run_pass(observation, FakeModel({}), now=datetime(2024, 5, 1, tzinfo=UTC))
    assert outcome.error is None
    assert outcome.phase == phase


def test_failed_pods_then_complete_over_passes() -> None:
    """`failed > 0` with no terminal condition keeps Running; `Complete` later succeeds."""
    base = TaskObservation(
        phase="Running",
        has_finalizer=True,
        owned_by_workflow=True,
        mpe_selected=True,
        function_selected=True,
        mpe_ready=True,
        job=JobState.ACTIVE,
        job_uid="u1",
        job_ref_uid="u1",
    )
    now = datetime(2024, 5, 1, tzinfo=UTC)
    retrying = base.replace(job=interpret_job_conditions([]))  # status.failed == 2, no condition
    assert run_pass(retrying, FakeModel({}), now=now).phase == "Running"
    done = base.replace(job=interpret_job_conditions([cond("Complete")]))
    assert run_pass(done, FakeModel({}), now=now).phase == "Succeeded"
