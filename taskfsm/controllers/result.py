"""What a reconcile tells its worker, and how an error is classified for the retry.

Every reconciler (Task, Workflow, MediaProcessingEntity) returns a :class:`Result`; the worker of
the manager (``taskfsm.manager.manager``) requeues the key from it: an error with a per-key
backoff (short for failures of the API, long for errors of the object, never sooner than a
``Retry-After``), otherwise after ``requeue_after`` seconds or only on the next event
(docs/behaviour.md §3.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from taskfsm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound


@dataclass(frozen=True)
class Result:
    """What the worker does with the key next.

    ``error`` set → re-add with per-key backoff; else ``requeue_after`` seconds (None: only on
    the next event) and the key's backoff is reset.
    """

    error: str | None = None
    requeue_after: float | None = None
    transient: bool = False
    """The error came from the API (unreachable, refusing, a conflict), not from the object: the
    worker retries it with a backoff capped in seconds, not minutes."""
    retry_after: float | None = None
    """The API server's ``Retry-After`` (seconds) on the failure: the retry waits at least that."""
    panic: bool = False
    """The reconcile raised an exception that is no answer of the API (a bug, a library error),
    caught by the reconciler's entry point or by the worker: controller-runtime's recovered
    panic, counted in ``controller_runtime_reconcile_panics_total``; retried like any error."""

    @classmethod
    def after(cls, seconds: float | None) -> Result:
        """Look again after ``seconds`` (a chart's verdict; 0: at once, as :data:`AT_ONCE`), or
        only on the next event (None)."""
        return cls(requeue_after=None if seconds is None else max(seconds, AT_ONCE))

    @classmethod
    def at_once(cls) -> Result:
        """Look again at once: something changed meanwhile that the reconcile must decide on."""
        return cls(requeue_after=AT_ONCE)


def internal_error(exc: BaseException) -> Result:
    """The :class:`Result` of a reconcile that raised ``exc``: an error retried with backoff, a
    panic unless ``exc`` is (or was caused by) a failure of the API."""
    return Result(
        error=f"internal error: {type(exc).__name__}: {exc}",
        transient=is_transient(exc),
        retry_after=retry_after_of(exc),
        panic=api_failure(exc) is None,
    )


def api_failure(exc: BaseException | None) -> KubeError | None:
    """The API error behind ``exc`` (itself, its cause or its context), if any."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KubeError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def is_transient(exc: BaseException | None) -> bool:
    """An API failure that says nothing about the object: the API was unreachable or refused
    (transport errors, 429, 5xx, admission denials), or a precondition found a newer version.
    NotFound and AlreadyExists are answers about the object, not failures of the API."""
    failure = api_failure(exc)
    return failure is not None and not isinstance(failure, (NotFound, AlreadyExists))


def retry_after_of(exc: BaseException | None) -> float | None:
    """The ``Retry-After`` the API server sent with the failure behind ``exc``, if any."""
    failure = api_failure(exc)
    return None if failure is None else failure.retry_after


def is_conflict(exc: BaseException | None) -> bool:
    """A precondition failed: the write was computed from a view that is no longer current.
    A normal race, retried from a fresh read without a Warning Event."""
    failure = api_failure(exc)
    return isinstance(failure, Conflict) and not isinstance(failure, AlreadyExists)


AT_ONCE = 0.001
"""The requeue of a key to be looked at again at once (a chart's "look again after 0 s"): the
work queue takes a key back after this delay, while ``requeue_after`` 0 would mean "only on the
next event"."""
