"""The MediaProcessingEntity lifecycle's verdicts and its pass engine.

Where this sits in the flow: the MPE reconciler reads the MPE, its client and the Tasks using
it into an `MpeObservation` and asks `MPE_ENGINE` to reconcile it (`MPE_ENGINE.reconcile`: one
pass, an MPE has no phase to move forward; `MPE_ENGINE.run`, one pass alone). Verdicts
(`note_*`, `report_*`, `wait_for_tasks`, `schedule_*`) decide the MPE's status (`MpeStatus` as
the pass's detail), its Events and when to look again.

Spec: docs/behaviour.md §1.7 and §4.2.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from machines.engine import WARNING, ChartSpec, PassEngine, PassOutcome, ReconcileOutcome
from machines.engine import PassRecord as _EnginePassRecord
from machines.mpe.chart import MpeLifecycle, configuration_for, events_for
from machines.mpe.conditions import CONNECTED, MpeStatus, compute_mpe_conditions
from machines.mpe.model import EFFECT_NAMES, GUARD_NAMES
from machines.mpe.observation import MpeObservation

VERDICT_NAMES: Final = (
    "note_connected",
    "wait_for_tasks",
    "note_orphans_not_checked",
    "schedule_resync",
    "schedule_deletion_poll",
    "report_unusable",
    "report_deletion_blocked",
    "report_error",
)
"""Actions resolved on the pass record rather than the model: they decide, they do no I/O."""

DELETION_POLL_SECONDS: Final = 5.0
"""How often a deleting MPE whose cluster works looks again whether its Tasks are done."""

SETTING_UP_SECONDS: Final = 5.0
"""How soon an MPE whose client is being set up is looked at again without a notification (its
Job watch's first sync or failure re-queues it at once; this only guards against a lost one)."""

WAIT_CLIENT: Final = "mpe_client"
"""`PassOutcome.waiting_on` of an MPE whose client's Job watch is making its first list."""


class _PassRecord(_EnginePassRecord):
    """The MPE chart's model for one pass: `PassRecord` plus the MPE verdicts."""

    chart = MpeLifecycle
    observation: MpeObservation

    def _waiting_text(self) -> str:
        count = self.observation.tasks_needing_cluster
        return f"waiting for {count} Task(s) still using this MediaProcessingEntity"

    def note_connected(self) -> None:
        self.detail = MpeStatus(True, CONNECTED)

    def wait_for_tasks(self) -> None:
        self.detail = MpeStatus(True, CONNECTED, self._waiting_text())
        self.look_again(DELETION_POLL_SECONDS)

    def note_orphans_not_checked(self) -> None:
        observation = self.observation
        why = (
            f"no client of it can be built ({observation.unbuildable}) and this process holds none"
            if observation.unbuildable
            else f"it has not answered for {observation.unreachable_seconds:.0f}s"
        )
        self.note_event(
            WARNING,
            "OrphansNotChecked",
            f"the cluster could not be searched for Jobs and Secrets of gone Tasks: {why}",
        )

    def schedule_resync(self) -> None:
        self.look_again(self.observation.resync_seconds)

    def schedule_deletion_poll(self) -> None:
        self.look_again(DELETION_POLL_SECONDS)

    def _wait_if_setting_up(self, error: BaseException) -> bool:
        """A connect effect raised that the client's Job watch is making its first list
        (`setting_up`): no error, no Event, `Ready` and `status.message` as they are; the
        watch's first sync or failure wakes the MPE, at the latest after `SETTING_UP_SECONDS`.
        Nothing waits on the cluster meanwhile (docs/security.md)."""
        if not getattr(error, "setting_up", False):
            return False
        self.running_callback = None
        self.wait("the client's Job watch is making its first list", on=WAIT_CLIENT, quiet=True)
        self.look_again(SETTING_UP_SECONDS)
        return True

    def report_error(self, error: BaseException) -> None:
        """`error.execution` of an MPE another replica writes: its client cannot be set up
        (or is being set up: a wait)."""
        if not self._wait_if_setting_up(error):
            super().report_error(error)

    def report_unusable(self, error: BaseException) -> None:
        """`error.execution` of a live MPE: a connect effect raised why the client cannot be
        used (its `reason`): `Ready=False` with it, and a Warning Event. Any other error (a
        write failed) says nothing about the MPE's cluster: the conditions stay. A client
        being set up is a wait (`_wait_if_setting_up`)."""
        if self._wait_if_setting_up(error):
            return
        self.report_error(error)
        reason = getattr(error, "reason", None)
        if isinstance(reason, str):
            self.detail = MpeStatus(False, reason, str(error))
            self.note_event(WARNING, reason, str(error))

    def report_deletion_blocked(self, error: BaseException) -> None:
        """`error.execution` of a deleting MPE: while Tasks need its cluster, `Ready=False`
        says why the client cannot be used (no Event); afterwards, the search for the children
        of gone Tasks failed and is retried until the cleanup bound. A client being set up
        is a wait (`_wait_if_setting_up`)."""
        if self._wait_if_setting_up(error):
            return
        action, self.running_callback = self.running_callback, None
        reason = getattr(error, "reason", None)
        if self.observation.tasks_needing_cluster:
            message = f"{self._waiting_text()}; {error}"
            if isinstance(reason, str):
                self.detail = MpeStatus(False, reason, message)
        else:
            message = f"deleting orphaned Jobs and Secrets before going: {error}"
        self.report(message, action or "report_deletion_blocked", exception=error)


MPE_ENGINE: Final = PassEngine(
    ChartSpec(
        chart=MpeLifecycle,
        record=_PassRecord,
        guard_names=GUARD_NAMES,
        effect_names=EFFECT_NAMES,
        configuration=configuration_for,
        events=events_for,
        conditions=compute_mpe_conditions,
        max_passes=1,
    )
)
"""The MPE chart's pass engine (one reused machine per thread)."""

MpePassOutcome: TypeAlias = PassOutcome[None]
MpeReconcileOutcome: TypeAlias = ReconcileOutcome[None]
