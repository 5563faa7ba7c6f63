"""The MediaProcessingEntity lifecycle as a statechart: states, events, guards and actions.

Where this sits in the flow: the MPE reconciler condenses an MPE, the client this process holds
for it and the Tasks using it into an `MpeObservation`; `machines.mpe.driver` starts the
machine in the state the observation stands for (an MPE has no phase), sends the events
`events_for(observation)` derives, and reports what was done and decided. Guards and effects are
names resolved on the runtime's model (`machines.mpe.model.MpeLifecycleModel`), verdicts on the
driver's pass record.

What each state means:

- Live: the MPE is in use. Connecting (no verdict yet), Ready (its client works: `Ready=True`,
  reason `Connected`) or Unusable (`Ready=False` with the reason its client could not be set up
  or its cluster does not answer, `Failed=True`, a Warning Event). Every pass connects: it sets
  the client up, keeps it, or rebuilds it after a spec or kubeconfig change (D19); while Tasks
  use the MPE, the client that worked is kept even when no new one can be built (its kubeconfig
  Secret went first in a namespace deletion). Becoming Ready wakes the Tasks using it.
- Following: another replica (or nobody, `--controllers` without `mpe`) writes the MPE; this one
  keeps its client for its own Tasks and writes nothing.
- Finalized: the MPE is gone; what this process held for it is dropped.
- Deleting: the MPE keeps its client while Tasks need its cluster (unfinished ones, and finished
  ones keeping a Job there, which each delete it: the Task chart's `mpe_deleting`); then the
  children of gone Tasks are deleted from its cluster and the finalizer removed. A cluster that
  has not answered for `--cleanup-timeout` is given up (Warning Event `OrphansNotChecked`), and
  so, at once, is one no client can reach any more (none held, and its spec or kubeconfig
  Secret cannot build one).
  An MPE that never reached a cluster (refused by policy, or never connected) goes at once:
  nothing of a Task can be there, so nothing is waited for or searched.

Spec: docs/behaviour.md §1.7 and §4.2, with D18 and D19.
"""

from __future__ import annotations

from enum import StrEnum
from typing import cast

from statemachine import State

from machines.engine import LifecycleChart
from machines.mpe.observation import MpeObservation


class Event(StrEnum):
    """What a pass observed of the MPE, derived from the observation by `events_for`."""

    GONE = "gone"
    DELETION_REQUESTED = "deletion_requested"
    MANAGED_ELSEWHERE = "managed_elsewhere"
    FINALIZER_MISSING = "finalizer_missing"
    OBSERVED = "observed"
    SETTLED = "settled"


class MpeLifecycle(LifecycleChart):
    """Lifecycle of one MediaProcessingEntity or ClusterMediaProcessingEntity (§4.2); the
    engine's rules of a chart are `machines.engine.LifecycleChart`'s."""

    class live(State.Compound, name="Live"):
        connecting = State("Connecting", initial=True)
        ready = State("Ready", enter="wake_tasks")
        unusable = State("Unusable")

    following = State("Following")
    deleting = State("Deleting")
    finalized = State("Finalized", final=True)

    # Another replica writes the MPE (or nobody does): this one only keeps its client.
    managed_elsewhere = live.to(following)
    deletion_requested = live.to(deleting)
    # The MPE is gone (deleted, or its finalizer released by another replica): its client, its
    # earlier locations and its kubeconfig Secret watch are dropped.
    gone = live.to(finalized, before="drop_client") | following.to(finalized, before="drop_client")
    finalizer_missing = cast(State, live).to(None, before="add_mpe_finalizer")
    observed = (
        # The client that worked is kept while Tasks use the MPE, whatever its spec or Secret
        # say now (a namespace deletion may delete the kubeconfig Secret first).
        cast(State, live).to(None, cond="used_by_tasks", before="connect_keeping_client")
        | cast(State, live).to(None, before="connect")
        | following.to(None, cond="used_by_tasks", before="connect_keeping_client")
        | following.to(None, cond="mpe_terminating", before="connect_keeping_client")
        | following.to(None, before="connect")
        # Nothing of a Task can be where the MPE never reached (its spec refused by policy, or
        # no client of it ever connected): it goes at once, and its Tasks decide again.
        | deleting.to(
            finalized,
            cond="cluster_holds_nothing",
            before=["release_client", "remove_mpe_finalizer", "wake_tasks"],
        )
        # D18: the Tasks that still need the cluster are waited for, with the client kept (or,
        # after a restart, built again) so they can finish or clean up their Jobs.
        | deleting.to(
            None,
            cond="tasks_need_cluster",
            unless="client_was_ready",
            before=["connect_keeping_client", "wake_tasks"],
            on="wait_for_tasks",
        )
        | deleting.to(
            None, cond="tasks_need_cluster", before="connect_keeping_client", on="wait_for_tasks"
        )
        # Then nothing of a Task may stay behind where no client reaches any more: the
        # children of gone Tasks are deleted, unless the cluster has not answered for the
        # cleanup bound; then it is given up, and the MPE goes.
        # A cluster no client can reach any more (none held, and the spec or kubeconfig
        # Secret cannot build one: the Secret went first in a namespace deletion) cannot be
        # searched however long the MPE waits; it is given up at once, as one that has not
        # answered for the cleanup bound is.
        # Each way out releases the client: the Tasks still naming the MPE are woken and
        # treat it as gone (the Task chart's `mpe_gone`), since nothing will set it up again.
        | deleting.to(
            finalized,
            cond="no_client_can_be_built",
            before=["release_client", "remove_mpe_finalizer", "wake_tasks"],
            on="note_orphans_not_checked",
        )
        | deleting.to(
            finalized,
            cond="cleanup_expired",
            before=["release_client", "remove_mpe_finalizer", "wake_tasks"],
            on="note_orphans_not_checked",
        )
        | deleting.to(
            finalized,
            before=["delete_orphans", "release_client", "remove_mpe_finalizer", "wake_tasks"],
        )
    )
    # After a successful connect: Ready, the earlier locations no Task needs released, and a
    # look again after the resync period (the kubeconfig Secret re-read, D19).
    settled = (
        live.connecting.to(
            live.ready,
            before="release_retired_locations",
            on=["note_connected", "schedule_resync"],
        )
        | live.unusable.to(
            live.ready,
            before="release_retired_locations",
            on=["note_connected", "schedule_resync"],
        )
        | live.ready.to(
            None, before="release_retired_locations", on=["note_connected", "schedule_resync"]
        )
        | following.to(
            None,
            cond="mpe_terminating",
            unless="client_was_ready",
            before="wake_tasks",
            on="schedule_deletion_poll",
        )
        | following.to(None, cond="mpe_terminating", on="schedule_deletion_poll")
        | following.to(
            None,
            unless="client_was_ready",
            before=["release_retired_locations", "wake_tasks"],
            on="schedule_resync",
        )
        | following.to(None, before="release_retired_locations", on="schedule_resync")
    )
    # A live MPE's error (its client could not be set up, or a write failed) leaves it
    # Unusable for the pass; its Ready condition says so only for the MPE's own problems.
    error_execution = (
        live.connecting.to(live.unusable, on="report_unusable")
        | live.ready.to(live.unusable, on="report_unusable")
        | live.unusable.to(None, on="report_unusable")
        | following.to(None, on="report_error")
        | deleting.to(None, on="report_deletion_blocked")
    )


def configuration_for(observation: MpeObservation) -> list[str]:
    """The configuration a pass starts in: an MPE has no phase, so its Live state is read from
    its Ready condition together with this process's client (a restarted controller holds
    none, so the MPE is Connecting again). Deletion and a replica that does not write the MPE
    are events (`events_for`)."""
    ready = getattr(observation, "ready_condition", "")
    if ready == "True" and getattr(observation, "client_ready", False):
        return ["live", "ready"]
    if ready == "False":
        return ["live", "unusable"]
    return ["live", "connecting"]


def events_for(observation: MpeObservation) -> tuple[str, ...]:
    """The events one pass sends, in order: whether another replica writes the MPE, its
    deletion, the finalizer (a live MPE this replica writes), `observed` (connect, or the
    deletion's step), `settled` (the verdict after a successful connect). The driver stops
    early when a pass ends in error."""
    e = Event
    if not observation.exists:
        return (e.GONE,) if observation.manages_status else (e.MANAGED_ELSEWHERE, e.GONE)
    if not observation.manages_status:
        return (e.MANAGED_ELSEWHERE, e.OBSERVED, e.SETTLED)
    if observation.deletion_requested:
        return (e.DELETION_REQUESTED, e.OBSERVED)
    if not observation.has_finalizer:
        return (e.FINALIZER_MISSING, e.OBSERVED, e.SETTLED)
    return (e.OBSERVED, e.SETTLED)
