"""The defaults of ``taskfsm run``, defined once.

:class:`taskfsm.manager.settings.Settings` takes its defaults from here, and so do the CLI's
flags (``taskfsm run --help``) and the flag table of docs/operations.md generated from them.
Plain values and no imports: the CLI reads them without loading the controller.
"""

from __future__ import annotations

from typing import Final

WORKERS: Final = 4
"""Concurrent Task reconciles."""
QUEUE_FAIRNESS: Final = "namespace"
"""How the work queues order ready keys: ``namespace`` (round robin over namespaces) or
``fifo`` (one queue for every key, client-go's order)."""
QUEUE_FAIRNESS_CHOICES: Final = ("namespace", "fifo")
MAX_IN_FLIGHT_PER_NAMESPACE: Final = 0
"""Tasks of one namespace reconciled at once, at most (0: no cap)."""
RESYNC_SECONDS: Final = 300.0
"""A Task (or Workflow) that may still change is looked at again at least this often."""
WATCH_TIMEOUT: Final = 240.0
"""Server-side duration (s) of one watch request."""
WATCH_READ_MARGIN: Final = 30.0
"""Seconds past the watch timeout before a silent connection counts as dead."""
WATCH_MAX_BACKOFF: Final = 30.0
"""Cap (s) on the wait before re-opening a failing list or watch."""
METRICS_ADDRESS: Final = ":8080"
HEALTH_ADDRESS: Final = ":8081"
LEASE_NAMESPACE: Final = "default"
LEASE_NAME: Final = "taskfsm-task-controller"
LEASE_DURATION: Final = 15.0
RENEW_DEADLINE: Final = 10.0
RETRY_PERIOD: Final = 2.0
CACHE_SYNC_TIMEOUT: Final = 120.0
SHUTDOWN_TIMEOUT: Final = 30.0
CLEANUP_TIMEOUT: Final = 120.0
"""Seconds a deleting Task waits for its unreachable MPE (counted while it does not answer)."""
JOB_TTL_SECONDS: Final = 86400
"""``ttlSecondsAfterFinished`` of every Job (it always overrides the template, §2)."""
FINISHED_TTL: Final = 0.0
"""``--finished-ttl``: 0 keeps finished Workflows and Tasks forever (retention is opt-in)."""
JOB_PODS_REFUSED_TIMEOUT: Final = 600.0
MPE_RESYNC_SECONDS: Final = 60.0
ORPHAN_SWEEP_SECONDS: Final = 60.0
API_ERROR_MAX_BACKOFF: Final = 30.0
BUCKETS: Final = 1
CONTROLLERS: Final = ("task", "workflow", "mpe")
"""What ``--controllers`` may name, and runs by default."""
