"""The MediaProcessingEntity lifecycle's guards, implemented once over the observation.

Spec: docs/behaviour.md §4.2.
"""

from __future__ import annotations

from machines.mpe.observation import MpeObservation


class MpeObservationGuards:
    """Mixin: every guard of `MpeLifecycleModel`, answered from the observation alone."""

    def used_by_tasks(self, observation: MpeObservation) -> bool:
        """A Task's status names the MPE: its client is kept whatever happens to the spec or
        the kubeconfig Secret (docs/operations.md, "Deleting a namespace")."""
        return observation.tasks_using > 0

    def mpe_terminating(self, observation: MpeObservation) -> bool:
        """The MPE has a deletionTimestamp."""
        return observation.deletion_requested

    def tasks_need_cluster(self, observation: MpeObservation) -> bool:
        """A Task still needs the MPE's cluster: it is unfinished, or it is finished and its
        Job is still there (it deletes it itself once the MPE is being deleted)."""
        return observation.tasks_needing_cluster > 0

    def client_was_ready(self, observation: MpeObservation) -> bool:
        """The MPE was Ready (its condition) with a client this process holds: becoming ready
        again is no news to its Tasks."""
        return observation.ready_condition == "True" and observation.client_ready

    def cleanup_expired(self, observation: MpeObservation) -> bool:
        """The cluster has not answered for `--cleanup-timeout`: its children are given up."""
        waited = observation.unreachable_seconds
        return waited > 0 and waited >= observation.cleanup_timeout

    def no_client_can_be_built(self, observation: MpeObservation) -> bool:
        """This process holds no client of the MPE and its spec or kubeconfig Secret, as they
        are now, cannot build one (the Secret went first in a namespace deletion): its cluster
        cannot be searched, and waiting for `--cleanup-timeout` would not change that."""
        return bool(observation.unbuildable)

    def cluster_holds_nothing(self, observation: MpeObservation) -> bool:
        """Nothing of a Task can be in the MPE's cluster (refused by policy, or never
        connected) and it has no earlier location: there is nothing to clean up or wait for."""
        return bool(observation.never_reached) and observation.retired_locations == 0
