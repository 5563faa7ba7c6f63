"""Kubernetes API failures as taskfsm exceptions, so nothing above ``taskfsm.kube`` catches
``ApiException``.

Each error keeps the HTTP status and the API server's own message (for example
``jobs.batch "x" not found``), which is what users see in ``status.message``
(docs/behaviour.md §3.14: raw API errors are part of the catalogue).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import urllib3
from kubernetes.client.exceptions import ApiException


class KubeError(Exception):
    """An API call failed. ``status`` is the HTTP status (0 when no response arrived).

    ``retry_after`` is the server's ``Retry-After`` in seconds on a 429 or 5xx answer that carried
    one (None otherwise): whoever retries must not do so sooner.
    """

    status = 0

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        reason: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.reason = reason
        self.retry_after = retry_after


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    """409 Conflict: a resourceVersion or UID precondition failed."""

    status = 409


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create found an object of that name."""


class Gone(KubeError):
    """410 Gone: the requested resourceVersion is too old (compacted)."""

    status = 410


class Invalid(KubeError):
    """422 (or 400): the API server rejected the object; the message names the fields."""

    status = 422


class Forbidden(KubeError):
    status = 403

    @property
    def rbac_denied(self) -> bool:
        """The caller lacks a permission (RBAC's "... cannot <verb> resource ..."), as opposed to
        a refusal of the object itself (a namespace being terminated, an admission policy)."""
        return " cannot " in str(self)


class Unavailable(KubeError):
    """No usable answer: connection refused or reset, a timeout, 429, or a 5xx."""


class ConnectionDropped(Unavailable):
    """The connection closed or was reset before a whole answer arrived (a pooled keep-alive
    connection the server had closed, a proxy dropping it). Nothing says whether the request was
    processed; :class:`taskfsm.kube.rest.Rest` retries it once when the verb is idempotent."""


class NotLeader(KubeError):
    """A write was refused before it was sent: this replica cannot show that it still holds the
    leader-election Lease (``taskfsm.kube.leader.LeaderElector.write_guard``, docs/operations.md).

    Nothing reached the API server; the reconcile fails like any other API error and is retried
    with backoff (by the next leader, if this replica has lost the Lease).
    """


def translate(exc: ApiException) -> KubeError:
    """Map an ``ApiException`` to the matching :class:`KubeError` subclass."""
    message, reason = exc.reason or "", ""
    if exc.body:
        try:
            body = json.loads(exc.body)
            message = body.get("message") or message
            reason = body.get("reason") or ""
        except (ValueError, AttributeError):
            pass
    status = exc.status or 0
    cls: type[KubeError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 410:
        cls = Gone
    elif status in (400, 422):
        cls = Invalid
    elif status in (401, 403):
        cls = Forbidden
    else:
        cls = Unavailable
    retry_after = _retry_after(exc) if status == 429 or status >= 500 else None
    return cls(message, status=status, reason=reason, retry_after=retry_after)


def _retry_after(exc: ApiException) -> float | None:
    """The ``Retry-After`` header in seconds, when it is a non-negative integer (the form the API
    server sends; an HTTP date or garbage counts as absent)."""
    headers = getattr(exc, "headers", None) or {}
    for key, value in headers.items():
        if key.lower() == "retry-after":
            text = str(value).strip()
            return float(text) if text.isascii() and text.isdigit() else None
    return None


@contextmanager
def api_errors() -> Iterator[None]:
    """Translate exceptions raised inside the block into :class:`KubeError` subclasses."""
    try:
        yield
    except ApiException as exc:
        raise translate(exc) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(f"API server unreachable: {type(exc).__name__}: {exc}") from None
