"""The Task controller's read policy (machines/task/reads.py): what a pass reads, and where
from, decided from what is known before the Job is read."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from machines.task.observation import JobState, TaskObservation, WorkflowState
from machines.task.phases import JOB_PENDING, RUNNING, SUCCEEDED
from machines.task.reads import (
    MOUNT_GRACE_SECONDS,
    POD_GRACE_SECONDS,
    JobRead,
    cannot_start,
    job_inputs_needed,
    job_read,
    mount_failures_count,
    pods_checked,
    reselect_mpe,
    wait_left,
)

LIVE = TaskObservation(phase=RUNNING, has_finalizer=True, mpe_selected=True)


def test_a_deleting_task_without_the_finalizer_reads_no_job() -> None:
    going = TaskObservation(phase=RUNNING, deletion_requested=True, has_finalizer=False)
    assert job_read(going) is JobRead.NONE
    # ... whatever else would have asked the cluster
    assert job_read(going, job_watch_healthy=False) is JobRead.NONE


def test_a_deleting_task_with_the_finalizer_confirms_a_missing_job_in_its_cluster() -> None:
    deleting = TaskObservation(
        phase=RUNNING, deletion_requested=True, has_finalizer=True, cleanup_wait_left=30.0
    )
    assert job_read(deleting) is JobRead.SOURCE_IF_MISSING
    assert job_read(deleting, job_watch_healthy=False) is JobRead.SOURCE
    assert job_read(replace(deleting, cleanup_wait_left=0)) is (JobRead.SOURCE)


@pytest.mark.parametrize("phase", [JOB_PENDING, RUNNING])
def test_a_terminated_workflow_asks_the_jobs_cluster_for_an_outcome(phase: str) -> None:
    before = TaskObservation(phase=phase, has_finalizer=True, workflow=WorkflowState.TERMINATED)
    assert job_read(before) is JobRead.SOURCE


def test_a_task_that_had_a_job_calls_it_missing_only_on_its_clusters_word() -> None:
    assert job_read(replace(LIVE, job_ref_uid="u")) is (JobRead.SOURCE_IF_MISSING)
    assert job_read(TaskObservation(phase=JOB_PENDING, has_finalizer=True)) is JobRead.CACHE


def test_selection_is_asked_again_only_for_a_deleting_task_holding_the_finalizer() -> None:
    unrecorded = TaskObservation(phase=JOB_PENDING, deletion_requested=True, has_finalizer=True)
    assert reselect_mpe(unrecorded)
    assert not reselect_mpe(replace(unrecorded, mpe_selected=True))
    assert not reselect_mpe(replace(unrecorded, has_finalizer=False))
    assert not reselect_mpe(TaskObservation(phase=JOB_PENDING, has_finalizer=True))


def test_job_inputs_are_built_only_for_a_live_job_pending_task() -> None:
    assert job_inputs_needed(TaskObservation(phase=JOB_PENDING))
    assert not job_inputs_needed(TaskObservation(phase=JOB_PENDING, deletion_requested=True))
    assert not job_inputs_needed(TaskObservation(phase=RUNNING))
    assert not job_inputs_needed(TaskObservation(phase=SUCCEEDED))


def test_pods_are_asked_about_for_an_active_job_without_ready_pods_past_the_grace() -> None:
    assert pods_checked(JobState.ACTIVE, ready=False, age_seconds=POD_GRACE_SECONDS)
    assert not pods_checked(JobState.ACTIVE, ready=False, age_seconds=POD_GRACE_SECONDS - 0.1)
    assert not pods_checked(JobState.ACTIVE, ready=True, age_seconds=60)
    for state in (JobState.SUSPENDED, JobState.SUCCEEDED, JobState.FAILED, JobState.ABSENT):
        assert not pods_checked(state, ready=False, age_seconds=60)


def test_a_wait_bounded_by_zero_lasts_for_ever_and_never_goes_negative() -> None:
    assert math.isinf(wait_left(0, 1e9))
    assert wait_left(300, 100) == 200
    assert wait_left(300, 400) == 0


def test_only_waiting_reasons_that_do_not_pass_by_themselves_count_as_cannot_start() -> None:
    assert cannot_start("ImagePullBackOff")
    assert cannot_start("CreateContainerConfigError")
    assert not cannot_start("ContainerCreating")  # it passes by itself
    assert not cannot_start("")


def test_mount_failures_count_only_for_a_pod_past_the_grace_that_never_started() -> None:
    assert mount_failures_count(MOUNT_GRACE_SECONDS, started=False)
    assert not mount_failures_count(MOUNT_GRACE_SECONDS - 1, started=False)
    assert not mount_failures_count(600, started=True)
