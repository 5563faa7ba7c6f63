"""A Task whose MediaProcessingEntity's client is still being set up waits for it quietly (no
error, no Event, no timer) and is woken by the MPE's reconcile the moment the client is ready;
Task workers never wait for MPE clients.
"""

from __future__ import annotations

import threading
from typing import Any

from taskfsm.api import constants as c
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.probes import warnings


def test_a_task_waiting_for_its_mpe_client_is_woken_when_it_is_ready(
    controller_factory, engine, probe, namespace
):
    """Task workers do not wait for MediaProcessingEntity clients. A Task created right
    after its MPE is reconciled while the MPE's client is still being set up, quietly (no error,
    no Event, no timer), and again as soon as the MPE reconcile has set it up (before: Task
    workers waited up to 10 s for the first MPE reconciles, then polled every second)."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.never_starting(objects.function("f")))
    ctl = controller_factory(start=False)
    gate = threading.Event()
    results: list[tuple[str, Any]] = []
    mpe_reconcile = ctl.mpe_reconciler.reconcile

    def held_mpe(key: str) -> Any:
        gate.wait(60)
        return mpe_reconcile(key)

    ctl.mpe_reconciler.reconcile = held_mpe  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    task_reconcile = ctl.reconciler.reconcile

    def recorded(key: str) -> Any:
        result = task_reconcile(key)
        results.append((key, result))
        return result

    ctl.reconciler.reconcile = recorded  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
    ctl.start()
    engine.create(objects.local_mpe("m"))
    wait_for(
        lambda: all(
            ctl.caches.get(kind, namespace, name) is not None
            for kind, name in (
                (c.KIND_MEDIA_PROCESSING_ENTITY, "m"),
                (c.KIND_FUNCTION, "f"),
                (c.KIND_WORKFLOW, "wf"),
            )
        ),
        timeout=30,
        what="the objects in the controller's caches",
    )
    engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
    try:
        probe.wait_message("t", "waiting for its client to be set up", timeout=30)
        key = f"{namespace}/t"
        # The message is written inside the reconcile; its result is recorded when it returns.
        wait_for(
            lambda: any(k == key for k, _ in results),
            timeout=10,
            what="the Task reconcile that wrote the message to return",
        )
        waiting = [r for k, r in results if k == key]
        # No error, no backoff, and no timer but the resync every Task with a Job pending has.
        resync = ctl.settings.resync_seconds
        assert all(r.error is None and r.requeue_after in (None, resync) for r in waiting)
        assert probe.phase("t") == "JobPending"
        assert [w for w in warnings(probe, "t")] == []
    finally:
        gate.set()
    probe.wait_phase("t", "Running", timeout=30)
