"""What ``taskfsm run`` configures: the controller's settings, with their defaults (the one
home of them: the CLI's flags take their defaults from :data:`DEFAULTS`, and the flag table of
docs/operations.md is generated from the CLI's parser, ``python -m taskfsm.flagdoc``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from machines.workflow.observation import DEFAULT_WAITING_SECONDS
from taskfsm.api import constants as c
from taskfsm.api.config import NatsConfiguration
from taskfsm.kube.kubeconfig import STRICT as STRICT_KUBECONFIGS
from taskfsm.kube.kubeconfig import KubeconfigPolicy

CONTROLLERS = ("task", "workflow", "mpe")
"""What ``--controllers`` may name: the Task controller, the Workflow controller and the
MediaProcessingEntity status controller (finalizer, Ready/Failed). Without ``mpe`` the MPE
clients are still built, for the Tasks, but nothing is written to the MPEs."""


@dataclass
class Settings:
    """Controller settings (``taskfsm run`` flags map onto these)."""

    workers: int = 4
    """Concurrent Task reconciles (one per Task at a time)."""
    namespace: str | None = None
    """Watch one namespace only; None watches all."""
    resync_seconds: float = 300.0
    """A Task whose Job may still change is reconciled at least this often without events."""
    watch_timeout: float = 240.0
    """Server-side watch duration (s); a dead connection is noticed within this plus
    ``read_margin``."""
    read_margin: float = 30.0
    watch_max_backoff: float = 30.0
    """Cap (s) on the wait before re-opening a failing watch (jittered to 0.5-1.5 times)."""
    metrics_address: str | None = ":8080"
    """``host:port`` for /metrics; None disables it."""
    health_address: str | None = ":8081"
    """``host:port`` for /healthz and /readyz; None disables them."""
    leader_election: bool = False
    lease_namespace: str = "default"
    lease_name: str = "taskfsm-task-controller"
    identity: str = ""
    lease_duration: float = 15.0
    """Leader election (s): a follower takes a Lease not renewed for this long."""
    renew_deadline: float = 10.0
    """Leader election (s): a leader whose renewal is not answered within this long after the
    previous one gives up (and exits); writes need a renewal sent less than this long ago."""
    retry_period: float = 2.0
    """Leader election (s): pause between renewals and between acquisition attempts."""
    cache_sync_timeout: float = 120.0
    shutdown_timeout: float = 30.0
    """Seconds in-flight reconciles get to finish on shutdown."""
    nats: NatsConfiguration | None = None
    cleanup_timeout: float = 120.0
    """Seconds a deleting Task keeps retrying to clean up its Job in an unreachable
    MediaProcessingEntity before it abandons the Job (Warning Event ``JobAbandoned``)."""
    workflow_termination_waiting: float = DEFAULT_WAITING_SECONDS
    """``workflowTerminationWaitingDuration`` (s): how long a Workflow with no active Task waits."""
    job_ttl_seconds: int = c.JOB_TTL_SECONDS_AFTER_FINISHED
    """``ttlSecondsAfterFinished`` of every Job: how long a finished Job (and its logs) stays."""
    job_pods_refused_timeout: float = 600.0
    """Seconds a Running Task waits while its Job's pods are refused (Pod Security, an
    admission policy, a quota) before it fails with ``JobPodsRefused``; 0 waits for ever."""
    mpe_resync_seconds: float = 60.0
    """How often a live MediaProcessingEntity is looked at again without events (its kubeconfig
    Secret re-read should an event have been missed, D19; its earlier locations released)."""
    orphan_sweep_seconds: float = 60.0
    """How often Jobs and Secrets of Tasks that are gone are looked for
    (:mod:`taskfsm.controllers.task.orphans`); they are also found on every reconcile of their
    Task's key."""
    api_error_max_backoff: float = 30.0
    """Cap (s) on the retry backoff of reconciles that failed because the API was unreachable
    or refused (other errors back off up to ~16 min)."""
    buckets: int = 1
    """Keys are split into this many buckets, each owned through a Lease of its own
    (``taskfsm-bucket-<i>-of-<B>``), so several replicas work at once; 1: one leader (or none,
    without leader election) does everything. Above 1 needs ``leader_election``."""
    controllers: frozenset[str] = frozenset(CONTROLLERS)
    """Which of :data:`CONTROLLERS` run."""
    metrics_secure: bool = False
    """Serve ``/metrics`` over HTTPS to callers the API server authenticates and authorizes
    (:mod:`taskfsm.manager.metrics_auth`)."""
    metrics_cert_dir: str | None = None
    """``tls.crt`` and ``tls.key`` for the secure metrics endpoint; None: self-signed."""
    kubeconfig_policy: KubeconfigPolicy = STRICT_KUBECONFIGS
    """What ClusterMediaProcessingEntities' kubeconfigs may hold beyond the allow-list of
    :mod:`taskfsm.kube.kubeconfig` (a namespaced MPE's never may: docs/security.md)."""


DEFAULTS: Final = Settings()
"""The default settings (what ``taskfsm run`` without flags runs with)."""


def check(settings: Settings) -> None:
    """Refuse settings that cannot work together.

    Raises:
        ValueError: naming the setting and why.
    """
    unknown = sorted(set(settings.controllers) - set(CONTROLLERS))
    if unknown:
        raise ValueError(
            f"unknown controller(s) {', '.join(unknown)}: choose from {', '.join(CONTROLLERS)}"
        )
    if settings.buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {settings.buckets}")
    if settings.buckets > 1 and not settings.leader_election:
        raise ValueError("buckets above 1 need leader election (--leader-elect)")
