"""The runtime contract between the MediaProcessingEntity statechart and whoever drives it.

Where this sits in the flow: `machines.mpe.chart.MpeLifecycle` names guards and effects as
strings; `machines.mpe.driver` resolves them on a model that satisfies `MpeLifecycleModel`. The
real reconciler (`taskfsm.controllers.mpe.reconciler`) implements the effects on the MPE's
cluster clients and the main cluster; test fakes record them. Both inherit the guards from
`machines.mpe.guards.MpeObservationGuards`.

Every callback takes the pass's `MpeObservation` as its only argument. Guards answer from the
observation; effects may do I/O and raise (the connect effects raise the reason the client
cannot be used, as an exception with a `reason`, or, while a new client's first list is under
way, an exception whose `setting_up` is True); each is idempotent.

Spec: docs/behaviour.md §1.7 and §4.2.
"""

from __future__ import annotations

from typing import Final, Protocol

from machines.mpe.observation import MpeObservation

GUARD_NAMES: Final = (
    "used_by_tasks",
    "mpe_terminating",
    "tasks_need_cluster",
    "client_was_ready",
    "cleanup_expired",
    "cluster_holds_nothing",
    "no_client_can_be_built",
)
"""Every guard of `MpeLifecycleModel`, in declaration order."""

EFFECT_NAMES: Final = (
    "add_mpe_finalizer",
    "connect",
    "connect_keeping_client",
    "wake_tasks",
    "release_retired_locations",
    "delete_orphans",
    "drop_client",
    "release_client",
    "remove_mpe_finalizer",
)
"""Every effect of `MpeLifecycleModel`, in declaration order."""


class MpeLifecycleModel(Protocol):
    """What the MPE statechart needs from the reconciler, one method per name."""

    # Guards (implemented by machines.mpe.guards.MpeObservationGuards).

    def used_by_tasks(self, observation: MpeObservation) -> bool:
        """A Task's status names the MPE."""
        ...

    def mpe_terminating(self, observation: MpeObservation) -> bool:
        """The MPE has a deletionTimestamp."""
        ...

    def tasks_need_cluster(self, observation: MpeObservation) -> bool:
        """A Task still needs the MPE's cluster (unfinished, or keeping its Job there)."""
        ...

    def client_was_ready(self, observation: MpeObservation) -> bool:
        """The MPE was Ready with a working client before this pass."""
        ...

    def cleanup_expired(self, observation: MpeObservation) -> bool:
        """The cluster has not answered for the cleanup bound."""
        ...

    def cluster_holds_nothing(self, observation: MpeObservation) -> bool:
        """Nothing of a Task can be in the MPE's cluster: it never reached one."""
        ...

    def no_client_can_be_built(self, observation: MpeObservation) -> bool:
        """No client is held and none can be built from the spec and Secret as they are."""
        ...

    # Effects.

    def add_mpe_finalizer(self, observation: MpeObservation) -> None:
        """Add `engine.nagare.media/mpe-protection` (never on a terminating MPE)."""
        ...

    def connect(self, observation: MpeObservation) -> None:
        """Set the client up, or rebuild it after a spec or kubeconfig change (D19); raise why
        it cannot be used (its reason for `Ready=False`)."""
        ...

    def connect_keeping_client(self, observation: MpeObservation) -> None:
        """As `connect`, but a client set up before is kept when no new one can be built (and
        raises why no new one can)."""
        ...

    def wake_tasks(self, observation: MpeObservation) -> None:
        """Queue the Tasks using the MPE to decide again; a usable client's cluster is searched for
        the children of gone Tasks."""
        ...

    def release_retired_locations(self, observation: MpeObservation) -> None:
        """Let go of the earlier locations in which no Task using the MPE has its Job any more."""
        ...

    def delete_orphans(self, observation: MpeObservation) -> None:
        """Delete the children of gone Tasks in the MPE's cluster and its earlier locations."""
        ...

    def drop_client(self, observation: MpeObservation) -> None:
        """Forget the MPE's client, its earlier locations and its kubeconfig Secret watch."""
        ...

    def release_client(self, observation: MpeObservation) -> None:
        """Drop what `drop_client` drops; the Tasks still naming the MPE treat it as gone.

        The deletion is done and no client of it will be set up again (a Task's `mpe_gone`)."""
        ...

    def remove_mpe_finalizer(self, observation: MpeObservation) -> None:
        """Remove `engine.nagare.media/mpe-protection` so the MPE can go."""
        ...
