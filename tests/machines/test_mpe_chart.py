"""The MediaProcessingEntity chart: its structure, and what one pass decides in each state.

A fake model records the effects and raises on demand (a connect effect raises an error with a
`reason`, as the runtime's `MpeError` does); the pass's outcome says the conditions, the
message (`detail`), the Events and when to look again (docs/mpe-lifecycle.md).
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

import pytest

from machines import chart_data
from machines.mpe.chart import MpeLifecycle, configuration_for, events_for
from machines.mpe.driver import (
    DELETION_POLL_SECONDS,
    MPE_ENGINE,
    SETTING_UP_SECONDS,
    VERDICT_NAMES,
    WAIT_CLIENT,
    _PassRecord,
)
from machines.mpe.guards import MpeObservationGuards
from machines.mpe.model import EFFECT_NAMES, GUARD_NAMES, MpeLifecycleModel
from machines.mpe.observation import MpeObservation

NOW = datetime(2024, 5, 1, tzinfo=UTC)


class Refused(Exception):
    """What a connect effect raises: why the MPE's client cannot be used, with its reason."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SettingUp(Exception):
    """What a connect effect raises while the client's Job watch makes its first list."""

    setting_up = True


class FakeModel(MpeObservationGuards):
    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail or {}


def _effect(name: str) -> Any:
    def effect(self: FakeModel, observation: MpeObservation) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail[name]

    effect.__name__ = name
    return effect


for _name in EFFECT_NAMES:
    setattr(FakeModel, _name, _effect(_name))


def run(fail: dict[str, BaseException] | None = None, **fields: Any) -> Any:
    return MPE_ENGINE.run(MpeObservation(**fields), FakeModel(fail), now=NOW)


def ready(outcome: Any) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in outcome.conditions}


# -- structure ------------------------------------------------------------------------------


def test_every_name_of_the_chart_resolves_and_every_protocol_name_is_used():
    assert chart_data.guard_names(MpeLifecycle) == set(GUARD_NAMES)
    assert chart_data.action_names(MpeLifecycle) == set(EFFECT_NAMES) | set(VERDICT_NAMES)
    assert all(callable(getattr(_PassRecord, name)) for name in VERDICT_NAMES)
    members = [
        name
        for name, value in vars(MpeLifecycleModel).items()
        if inspect.isfunction(value) and not name.startswith("_")
    ]
    assert members == [*GUARD_NAMES, *EFFECT_NAMES]


@pytest.mark.parametrize(
    ("fields", "configuration"),
    [
        ({}, ["live", "connecting"]),
        ({"ready_condition": "True"}, ["live", "connecting"]),  # a restart holds no client
        ({"ready_condition": "True", "client_ready": True}, ["live", "ready"]),
        ({"ready_condition": "False", "client_ready": True}, ["live", "unusable"]),
    ],
)
def test_the_state_a_pass_starts_in_is_observed(fields: dict[str, Any], configuration: list[str]):
    assert configuration_for(MpeObservation(**fields)) == configuration


@pytest.mark.parametrize(
    ("fields", "events"),
    [
        ({"has_finalizer": True}, ("observed", "settled")),
        ({}, ("finalizer_missing", "observed", "settled")),
        ({"deletion_requested": True}, ("deletion_requested", "observed")),
        ({"manages_status": False}, ("managed_elsewhere", "observed", "settled")),
        ({"exists": False}, ("gone",)),
        ({"exists": False, "manages_status": False}, ("managed_elsewhere", "gone")),
    ],
)
def test_events_for(fields: dict[str, Any], events: tuple[str, ...]):
    assert events_for(MpeObservation(**fields)) == events


# -- live --------------------------------------------------------------------------------------


def test_a_new_mpe_gets_its_finalizer_connects_becomes_ready_and_wakes_its_tasks():
    outcome = run()
    assert outcome.effects == (
        "add_mpe_finalizer",
        "connect",
        "release_retired_locations",
        "wake_tasks",
    )
    assert ready(outcome) == {"Ready": ("True", "Connected")}
    assert outcome.detail.message == ""
    assert outcome.requeue_after == 60.0
    assert outcome.error is None


def test_a_ready_mpe_connects_again_without_waking_anyone():
    outcome = run(has_finalizer=True, ready_condition="True", client_ready=True)
    assert outcome.effects == ("connect", "release_retired_locations")


def test_an_mpe_used_by_tasks_keeps_the_client_that_worked():
    outcome = run(has_finalizer=True, tasks_using=2, tasks_active=2)
    assert outcome.effects[0] == "connect_keeping_client"


def test_an_unusable_mpe_says_why_on_ready_with_a_warning_event():
    refused = Refused("Secret 'ns/kc' key 'kubeconfig' is refused: exec", "KubeconfigRefused")
    outcome = run({"connect": refused}, has_finalizer=True)
    assert outcome.state == "unusable"
    assert outcome.message == str(refused)
    assert ready(outcome) == {
        "Ready": ("False", "KubeconfigRefused"),
        "Failed": ("True", "KubeconfigRefused"),
    }
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "KubeconfigRefused")]
    assert outcome.requeue_after is None  # an error: the runtime backs off


def test_a_failed_write_says_nothing_about_the_mpes_cluster():
    outcome = run({"add_mpe_finalizer": RuntimeError("the API server is restarting")})
    assert outcome.message == "the API server is restarting"
    assert outcome.conditions == ()
    assert outcome.events == ()


def test_an_mpe_answering_again_turns_ready_and_wakes_its_tasks():
    outcome = run(has_finalizer=True, ready_condition="False", client_ready=True)
    assert "wake_tasks" in outcome.effects
    assert ready(outcome)["Ready"] == ("True", "Connected")
    assert "Failed" not in ready(outcome)


def quiet_wait(outcome: Any) -> None:
    """The pass waits for the client's Job watch: no error, no verdict, no Event."""
    assert outcome.error is None
    assert outcome.waiting
    assert outcome.waiting_quietly
    assert outcome.waiting_on == WAIT_CLIENT
    assert outcome.requeue_after == SETTING_UP_SECONDS
    assert outcome.detail is None
    assert outcome.events == ()


def test_a_client_being_set_up_is_waited_for_without_an_error_or_a_verdict():
    outcome = run({"connect": SettingUp("listing")}, has_finalizer=True, ready_condition="True")
    quiet_wait(outcome)
    assert outcome.effects == ()  # neither released nor woken before the client works
    assert outcome.conditions == ()


def test_a_replica_that_does_not_write_the_mpe_waits_for_its_client_too():
    quiet_wait(run({"connect": SettingUp("listing")}, manages_status=False))


# -- following -------------------------------------------------------------------------------


def test_a_replica_that_does_not_write_the_mpe_keeps_its_client_and_writes_nothing():
    outcome = run(manages_status=False, ready_condition="True", client_ready=True)
    assert outcome.effects == ("connect", "release_retired_locations")
    assert outcome.detail is None  # no verdict on the MPE: its status stays as it is
    assert outcome.requeue_after == 60.0


def test_a_following_replica_keeps_a_deleting_mpes_client_and_polls():
    outcome = run(manages_status=False, deletion_requested=True)
    assert outcome.effects == ("connect_keeping_client", "wake_tasks")
    assert outcome.requeue_after == DELETION_POLL_SECONDS
    again = run(
        manages_status=False, deletion_requested=True, ready_condition="True", client_ready=True
    )
    assert again.effects == ("connect_keeping_client",)


def test_a_following_replica_keeps_the_client_its_tasks_use_and_wakes_them_once_ready():
    outcome = run(manages_status=False, tasks_using=1, tasks_active=1)
    assert outcome.effects == (
        "connect_keeping_client",
        "release_retired_locations",
        "wake_tasks",
    )


def test_a_following_replica_reports_a_connect_error_without_a_verdict():
    outcome = run({"connect": Refused("down", "NotReachable")}, manages_status=False)
    assert outcome.message == "down"
    assert outcome.detail is None
    assert outcome.events == ()


# -- deletion --------------------------------------------------------------------------------


def test_a_deleting_mpe_waits_for_the_tasks_that_need_its_cluster():
    outcome = run(
        deletion_requested=True,
        ready_condition="True",
        client_ready=True,
        tasks_using=3,
        tasks_active=1,
        jobs_kept=1,
    )
    assert outcome.effects == ("connect_keeping_client",)
    assert outcome.detail.message == "waiting for 2 Task(s) still using this MediaProcessingEntity"
    assert ready(outcome)["Ready"] == ("True", "Connected")
    assert outcome.requeue_after == DELETION_POLL_SECONDS


def test_a_deleting_mpe_rebuilds_its_client_after_a_restart_and_wakes_its_tasks():
    outcome = run(deletion_requested=True, tasks_using=1, tasks_active=1)
    assert outcome.effects == ("connect_keeping_client", "wake_tasks")


def test_a_deleting_mpe_whose_client_cannot_be_built_says_so_while_it_waits():
    outcome = run(
        {"connect_keeping_client": Refused("not reachable: timeout", "NotReachable")},
        deletion_requested=True,
        tasks_using=1,
        tasks_active=1,
    )
    assert outcome.message == (
        "waiting for 1 Task(s) still using this MediaProcessingEntity; not reachable: timeout"
    )
    assert ready(outcome)["Ready"] == ("False", "NotReachable")
    assert outcome.events == ()


def test_a_deleting_mpe_waits_for_a_client_being_set_up():
    waiting = run(
        {"connect_keeping_client": SettingUp("listing")},
        deletion_requested=True,
        tasks_using=1,
        tasks_active=1,
    )
    quiet_wait(waiting)
    assert waiting.effects == ()  # its Tasks are woken once the client works
    searching = run({"delete_orphans": SettingUp("listing")}, deletion_requested=True)
    quiet_wait(searching)
    assert not searching.finalized


def test_a_deleting_mpe_no_task_needs_deletes_the_orphans_and_goes():
    outcome = run(deletion_requested=True, tasks_using=2)  # both finished, their Jobs gone
    assert outcome.effects == (
        "delete_orphans",
        "release_client",
        "remove_mpe_finalizer",
        "wake_tasks",
    )
    assert outcome.finalized


def test_a_failed_orphan_search_is_retried_until_the_cleanup_bound():
    outcome = run(
        {"delete_orphans": RuntimeError("connection refused")},
        deletion_requested=True,
        unreachable_seconds=30.0,
    )
    assert outcome.message == "deleting orphaned Jobs and Secrets before going: connection refused"
    assert not outcome.finalized


def test_a_cluster_silent_for_the_cleanup_bound_is_given_up():
    outcome = run(deletion_requested=True, unreachable_seconds=121.0, cleanup_timeout=120.0)
    assert outcome.effects == ("release_client", "remove_mpe_finalizer", "wake_tasks")
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "OrphansNotChecked")]
    assert outcome.finalized


def test_a_cluster_no_client_can_reach_any_more_is_given_up_at_once():
    """Its kubeconfig Secret went first (a namespace deletion) and this process holds no client:
    no search is possible however long it waits, so it goes without the cleanup bound, saying
    why (regression: the MPE waited out --cleanup-timeout, and its namespace with it)."""
    outcome = run(
        deletion_requested=True,
        unbuildable="KubeconfigSecretUnavailable",
        unreachable_seconds=5.0,
        cleanup_timeout=120.0,
    )
    assert outcome.effects == ("release_client", "remove_mpe_finalizer", "wake_tasks")
    assert [(e.type, e.reason) for e in outcome.events] == [("Warning", "OrphansNotChecked")]
    assert "no client of it can be built (KubeconfigSecretUnavailable)" in outcome.events[0].note
    assert outcome.finalized


def test_tasks_that_need_the_cluster_are_waited_for_even_when_no_client_can_be_built():
    outcome = run(
        deletion_requested=True,
        tasks_using=1,
        tasks_active=1,
        unbuildable="KubeconfigSecretUnavailable",
    )
    assert outcome.effects == ("connect_keeping_client", "wake_tasks")
    assert not outcome.finalized


@pytest.mark.parametrize("reason", ["NamespaceNotAllowed", "KubeconfigRefused", "NotReachable"])
def test_a_deleting_mpe_that_never_reached_a_cluster_goes_at_once(reason):
    """Refused by policy, or never connected: nothing of a Task can be in its cluster, so no
    orphan search, no cleanup bound; its Tasks decide again."""
    outcome = run(deletion_requested=True, has_finalizer=True, never_reached=reason)
    assert outcome.effects == ("release_client", "remove_mpe_finalizer", "wake_tasks")
    assert outcome.events == ()
    assert outcome.finalized


def test_a_deleting_mpe_that_never_reached_a_cluster_but_kept_locations_searches_them():
    outcome = run(deletion_requested=True, never_reached="NotReachable", retired_locations=1)
    assert outcome.effects == (
        "delete_orphans",
        "release_client",
        "remove_mpe_finalizer",
        "wake_tasks",
    )


def test_a_gone_mpe_drops_what_this_process_held_for_it():
    assert run(exists=False).effects == ("drop_client",)
    assert run(exists=False, manages_status=False).effects == ("drop_client",)


SITUATIONS: list[tuple[dict[str, BaseException] | None, dict[str, Any]]] = [
    (None, {}),
    (None, {"has_finalizer": True, "ready_condition": "True", "client_ready": True}),
    (None, {"has_finalizer": True, "ready_condition": "False"}),
    (None, {"has_finalizer": True, "tasks_using": 1}),
    ({"connect": Refused("down", "NotReachable")}, {"has_finalizer": True}),
    (
        {"connect": Refused("down", "NotReachable")},
        {"has_finalizer": True, "ready_condition": "True", "client_ready": True},
    ),
    (
        {"connect": Refused("down", "NotReachable")},
        {"has_finalizer": True, "ready_condition": "False"},
    ),
    (None, {"manages_status": False}),
    (None, {"manages_status": False, "ready_condition": "True", "client_ready": True}),
    (None, {"manages_status": False, "tasks_using": 1}),
    (None, {"manages_status": False, "deletion_requested": True}),
    (
        None,
        {
            "manages_status": False,
            "deletion_requested": True,
            "ready_condition": "True",
            "client_ready": True,
        },
    ),
    ({"connect": Refused("down", "NotReachable")}, {"manages_status": False}),
    (None, {"deletion_requested": True, "tasks_using": 1, "tasks_active": 1}),
    (
        None,
        {
            "deletion_requested": True,
            "tasks_using": 1,
            "tasks_active": 1,
            "ready_condition": "True",
            "client_ready": True,
        },
    ),
    (
        {"connect_keeping_client": Refused("down", "NotReachable")},
        {"deletion_requested": True, "tasks_using": 1, "tasks_active": 1},
    ),
    (None, {"deletion_requested": True}),
    (None, {"deletion_requested": True, "unreachable_seconds": 200.0}),
    (None, {"deletion_requested": True, "unbuildable": "KubeconfigSecretUnavailable"}),
    (None, {"deletion_requested": True, "never_reached": "NamespaceNotAllowed"}),
    (None, {"exists": False}),
    (None, {"exists": False, "manages_status": False}),
]
"""Every situation the tests above decide, once each (for the coverage of the chart)."""


def test_every_transition_is_taken_in_some_situation():
    taken: set[str] = set()
    for fail, fields in SITUATIONS:
        taken.update(run(fail, **fields).transitions)
    every = {t.key for t in chart_data.transitions(MpeLifecycle)}
    assert every - taken == set()
