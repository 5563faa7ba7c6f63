"""The reconcile workers: take a key from a work queue, reconcile it, requeue it as the result
says (controller-runtime's worker loop).

A worker reconciles a key only while this replica works on it (:mod:`taskfsm.manager.
ownership`), inside the key's bucket (its writes gated by that bucket's Lease), records the
reconcile metrics, and requeues: an error with a per-key backoff (capped at
``--api-error-max-backoff`` for failures of the API, never sooner than a ``Retry-After``),
otherwise after ``requeue_after`` or only on the next event.

A reconcile that raises anyway (its entry point is meant never to) is controller-runtime's
recovered panic: logged with its traceback, counted in ``controller_runtime_reconcile_panics_total``
(as are the unexpected exceptions the reconcilers catch themselves, :attr:`Result.panic`) and
retried as an error; the worker lives on. taskfsm has no terminal (never retried) errors:
``controller_runtime_terminal_reconcile_errors_total`` stays 0.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from taskfsm.controllers.result import Result, internal_error
from taskfsm.manager import structured_logs
from taskfsm.manager.metrics import Metrics
from taskfsm.manager.ownership import Ownership
from taskfsm.manager.queue import ShutDown, WorkQueue

log = logging.getLogger(__name__)

GATE_RECHECK_SECONDS: Final = 0.5
"""With ``--buckets``: how soon a key is taken again whose bucket's write gate was closed while
this replica still held its Lease (its renewal late; taskfsm/kube/buckets.py)."""


@dataclass(frozen=True)
class Worker:
    """One controller's worker loop.

    Attributes:
        queue: where its keys wait.
        reconcile: the reconciler's entry point (meant never to raise; see the module).
        controller: the ``controller`` label of its metrics.
        bucket_of_key: the bucket whose Lease gates a key's writes (None: the one Lease, or
            none).
        owned_only: a key whose bucket this replica does not hold (any more) is dropped
            unreconciled (its holder works on it); False: every key is reconciled.
    """

    queue: WorkQueue
    reconcile: Callable[[str], Result]
    controller: str
    bucket_of_key: Callable[[str], int | None]
    owned_only: bool = True


def run(
    worker: Worker,
    *,
    ownership: Ownership,
    metrics: Metrics,
    stop: threading.Event,
    api_error_max_backoff: float,
) -> None:
    """Run ``worker`` until its queue shuts down or ``stop`` is set."""
    m = metrics
    queue = worker.queue
    controller = worker.controller
    while True:
        try:
            key = queue.get()
        except ShutDown:
            return
        if key is None:
            continue
        if stop.is_set():  # shutting down: take no new work
            queue.done(key)
            return
        bucket = worker.bucket_of_key(key)
        if worker.owned_only and not ownership.holds(bucket):
            queue.forget(key)
            queue.done(key)
            if ownership.leads(bucket):  # a renewal is late: the gate may reopen
                queue.add_after(key, GATE_RECHECK_SECONDS)
            continue
        m.active_workers.labels(controller).inc()
        structured_logs.bind(key=key, reconcile_id=uuid.uuid4().hex[:12])
        if bucket is not None:
            structured_logs.bind(bucket=bucket)
        log.debug("reconcile", extra={"controller": controller})
        started = time.monotonic()
        try:
            with ownership.scope_bucket(bucket):
                result = _reconcile(worker, key)
            m.reconcile_time.labels(controller).observe(time.monotonic() - started)
            outcome = (
                "error"
                if result.error
                else ("requeue_after" if result.requeue_after else "success")
            )
            m.reconcile_total.labels(controller, outcome).inc()
            if result.panic:
                m.reconcile_panics.labels(controller).inc()
            if result.error:
                m.reconcile_errors.labels(controller).inc()
                cap = api_error_max_backoff if result.transient else None
                queue.add_rate_limited(key, max_delay=cap, min_delay=result.retry_after)
            else:
                queue.forget(key)
                if result.requeue_after:
                    queue.add_after(key, result.requeue_after)
        finally:
            structured_logs.clear()
            m.active_workers.labels(controller).dec()
            queue.done(key)


def _reconcile(worker: Worker, key: str) -> Result:
    """``worker.reconcile(key)``; an exception it raises becomes a panic's error :class:`Result`."""
    try:
        return worker.reconcile(key)
    except Exception as exc:  # a bug: the worker must live on, and the key be retried
        log.exception("reconcile raised", extra={"controller": worker.controller})
        return replace(internal_error(exc), panic=True)
