"""A failing list is never retried sooner than the API server's Retry-After,
even when the informer's own backoff would be shorter (the first retry waits ~0.5 s)."""

from __future__ import annotations

import threading
import time
from typing import Any

from taskfsm.kube.errors import Unavailable
from taskfsm.kube.informer import Informer
from taskfsm.kube.rest import JOBS


class FailingOnceRest:
    """A Rest whose first LIST answers 429 with Retry-After; the next ones an empty list."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self.lists: list[float] = []
        self.listed = threading.Event()

    def list(self, res: Any, namespace: Any = None, **options: Any) -> dict[str, Any]:
        self.lists.append(time.monotonic())
        if len(self.lists) == 1:
            raise Unavailable("too many requests", status=429, retry_after=self.retry_after)
        self.listed.set()
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise Unavailable("no watch in this test")


def test_a_failed_list_waits_at_least_retry_after() -> None:
    rest = FailingOnceRest(retry_after=1.5)
    informer = Informer(rest, JOBS, max_backoff=0.1)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    informer.start()
    try:
        assert rest.listed.wait(10)
    finally:
        informer.stop()
    assert rest.lists[1] - rest.lists[0] >= 1.5


def test_backoff_stays_finite_after_a_long_outage() -> None:
    """Found in review: after ~1,025 consecutive failures (8.5 h at the 30 s cap) the doubling
    overflowed (OverflowError in the watch loop's error handler ended the watch for good)."""
    informer = Informer(FailingOnceRest(0.0), JOBS, max_backoff=30.0)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    informer._consecutive_failures = 5000
    assert 15.0 <= informer._backoff() <= 45.0


def test_a_stop_while_another_thread_starts_the_informer_never_fails() -> None:
    """Found in a clean-clone run (test_rbac): a Manager stopped while another thread was still
    starting it joined an informer thread created but not yet started ("cannot join thread
    before it is started"). A stop now sees no thread or a started one; a stopped informer
    never starts."""
    for _ in range(200):
        informer = Informer(FailingOnceRest(0.0), JOBS, max_backoff=0.1)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
        starter = threading.Thread(target=informer.start)
        starter.start()
        informer.stop(timeout=5.0)
        starter.join()
        informer.stop(timeout=5.0)
    stopped = Informer(FailingOnceRest(0.0), JOBS)  # type: ignore[arg-type]  # a fake standing in for the real type: duck-typed
    stopped.stop()
    stopped.start()
    assert stopped._thread is None
