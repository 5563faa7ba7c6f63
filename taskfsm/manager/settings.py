"""What ``taskfsm run`` configures: the controller's settings. Their defaults are
:mod:`taskfsm.defaults`' (the CLI's flags take theirs from there too, and the flag table of
docs/operations.md is generated from the CLI's parser, ``python -m taskfsm.flagdoc``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from machines.workflow.observation import DEFAULT_WAITING_SECONDS
from taskfsm import defaults as d
from taskfsm.api.config import NatsConfiguration
from taskfsm.kube.kubeconfig import STRICT as STRICT_KUBECONFIGS
from taskfsm.kube.kubeconfig import KubeconfigPolicy

CONTROLLERS = d.CONTROLLERS
"""What ``--controllers`` may name: the Task controller, the Workflow controller and the
MediaProcessingEntity status controller (finalizer, Ready/Failed). Without ``mpe`` the MPE
clients are still built, for the Tasks, but nothing is written to the MPEs."""


@dataclass
class Settings:
    """Controller settings (``taskfsm run`` flags map onto these)."""

    workers: int = d.WORKERS
    """Concurrent Task reconciles (one per Task at a time)."""
    queue_fairness: str = d.QUEUE_FAIRNESS
    """``namespace``: the Task and Workflow queues serve namespaces round robin; ``fifo``: one
    queue for every key."""
    namespace_weights: tuple[tuple[str, int], ...] = ()
    """Keys a namespace is served per turn (default 1 for a namespace not named)."""
    max_in_flight_per_namespace: int = d.MAX_IN_FLIGHT_PER_NAMESPACE
    """Tasks of one namespace reconciled at once, at most (0: no cap)."""
    namespace: str | None = None
    """Watch one namespace only; None watches all."""
    resync_seconds: float = d.RESYNC_SECONDS
    """A Task whose Job may still change is reconciled at least this often without events."""
    watch_timeout: float = d.WATCH_TIMEOUT
    """Server-side watch duration (s); a dead connection is noticed within this plus
    ``read_margin``."""
    read_margin: float = d.WATCH_READ_MARGIN
    watch_max_backoff: float = d.WATCH_MAX_BACKOFF
    """Cap (s) on the wait before re-opening a failing watch (jittered to 0.5-1.5 times)."""
    metrics_address: str | None = d.METRICS_ADDRESS
    """``host:port`` for /metrics; None disables it."""
    health_address: str | None = d.HEALTH_ADDRESS
    """``host:port`` for /healthz and /readyz; None disables them."""
    leader_election: bool = False
    lease_namespace: str = d.LEASE_NAMESPACE
    lease_name: str = d.LEASE_NAME
    identity: str = ""
    lease_duration: float = d.LEASE_DURATION
    """Leader election (s): a follower takes a Lease not renewed for this long."""
    renew_deadline: float = d.RENEW_DEADLINE
    """Leader election (s): a leader whose renewal is not answered within this long after the
    previous one gives up (and exits); writes need a renewal sent less than this long ago."""
    retry_period: float = d.RETRY_PERIOD
    """Leader election (s): pause between renewals and between acquisition attempts."""
    cache_sync_timeout: float = d.CACHE_SYNC_TIMEOUT
    shutdown_timeout: float = d.SHUTDOWN_TIMEOUT
    """Seconds in-flight reconciles get to finish on shutdown."""
    nats: NatsConfiguration | None = None
    cleanup_timeout: float = d.CLEANUP_TIMEOUT
    """Seconds a deleting Task keeps retrying to clean up its Job in an unreachable
    MediaProcessingEntity before it abandons the Job (Warning Event ``JobAbandoned``)."""
    workflow_termination_waiting: float = DEFAULT_WAITING_SECONDS
    """``workflowTerminationWaitingDuration`` (s): how long a Workflow with no active Task waits."""
    job_ttl_seconds: int = d.JOB_TTL_SECONDS
    """``ttlSecondsAfterFinished`` of every Job: how long a finished Job (and its logs) stays."""
    finished_ttl: float = d.FINISHED_TTL
    """``--finished-ttl`` (s): a Succeeded or Failed Workflow (with its Tasks), and a finished
    Task whose Workflow does not exist, are deleted this long after their endTime; 0 keeps them
    forever."""
    job_pods_refused_timeout: float = d.JOB_PODS_REFUSED_TIMEOUT
    """Seconds a Running Task waits while its Job's pods are refused (Pod Security, an
    admission policy, a quota) before it fails with ``JobPodsRefused``; 0 waits for ever."""
    mpe_resync_seconds: float = d.MPE_RESYNC_SECONDS
    """How often a live MediaProcessingEntity is looked at again without events (its kubeconfig
    Secret re-read should an event have been missed, D19; its earlier locations released)."""
    orphan_sweep_seconds: float = d.ORPHAN_SWEEP_SECONDS
    """How often Jobs and Secrets of Tasks that are gone are looked for
    (:mod:`taskfsm.controllers.task.orphans`); they are also found on every reconcile of their
    Task's key."""
    api_error_max_backoff: float = d.API_ERROR_MAX_BACKOFF
    """Cap (s) on the retry backoff of reconciles that failed because the API was unreachable
    or refused (other errors back off up to ~16 min)."""
    buckets: int = d.BUCKETS
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
    metrics_tenant_labels: bool = False
    """Let metric labels name tenants' remote API servers and namespaces (the ``resource`` of
    each MediaProcessingEntity Job watch in ``taskfsm_watch_healthy``, the ``host`` of remote
    clusters in ``rest_client_requests_total`` and ``rest_client_request_duration_seconds``);
    False: ``jobs@main``/``jobs@remote`` and
    ``remote`` instead (docs/security.md, "Endpoints")."""
    http_transport: str = "libcurl"
    """``libcurl`` (the default, docs/operations.md): ordinary requests go over libcurl where a
    client's configuration allows it (taskfsm/kube/curl.py); ``urllib3``: every request takes
    the Kubernetes client's own pool."""
    task_phase_events: bool = False
    """Write a Normal Event for each phase change of a Task (JobPending, Running, Succeeded);
    False: the status write says it, and only Warnings (a Failed Task) are Events too."""
    kubeconfig_policy: KubeconfigPolicy = STRICT_KUBECONFIGS
    """What ClusterMediaProcessingEntities' kubeconfigs may hold beyond the allow-list of
    :mod:`taskfsm.kube.kubeconfig` (a namespaced MPE's never may: docs/security.md)."""


DEFAULTS: Final = Settings()
"""The default settings (what ``taskfsm run`` without flags runs with)."""


def check(settings: Settings) -> None:
    """Refuse settings that cannot work together: the one check, whether they came from
    ``taskfsm run``'s flags (whose names the messages use) or from code.

    Raises:
        ValueError: naming the setting and why.
    """
    unknown = sorted(set(settings.controllers) - set(CONTROLLERS))
    if unknown or not settings.controllers:
        raise ValueError(
            f"--controllers: unknown controller(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(CONTROLLERS)}"
        )
    if settings.queue_fairness not in d.QUEUE_FAIRNESS_CHOICES:
        raise ValueError(
            f"--queue-fairness must be one of {', '.join(d.QUEUE_FAIRNESS_CHOICES)}, "
            f"got {settings.queue_fairness!r}"
        )
    if settings.max_in_flight_per_namespace < 0:
        raise ValueError(
            "--max-in-flight-per-namespace must be at least 0 (0: no cap), got "
            f"{settings.max_in_flight_per_namespace}"
        )
    for namespace, weight in settings.namespace_weights:
        if weight < 1:
            raise ValueError(
                f"--namespace-weights: namespace {namespace}: a weight must be at least 1, "
                f"got {weight}"
            )
    if not settings.lease_duration > settings.renew_deadline > settings.retry_period > 0:
        raise ValueError(
            "leader election needs --leader-election-lease-duration > "
            "--leader-election-renew-deadline > --leader-election-retry-period > 0"
        )
    if settings.buckets < 1:
        raise ValueError(f"--buckets must be at least 1, got {settings.buckets}")
    if settings.buckets > 1 and not settings.leader_election:
        raise ValueError(
            "--buckets above 1 needs leader election (--leader-elect): the buckets are Leases"
        )
