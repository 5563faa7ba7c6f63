"""Kubernetes API failures as taskfsm exceptions, so nothing above ``taskfsm.kube`` catches
``ApiException``.

Each error keeps the HTTP status and the API server's own message (for example
``jobs.batch "x" not found``), which is what users see in ``status.message``
(task-controller.md §3.14: raw API errors are part of the catalogue).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import urllib3
from kubernetes.client.exceptions import ApiException


class KubeError(Exception):
    """An API call failed. ``status`` is the HTTP status (0 when no response arrived)."""

    status = 0

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.reason = reason


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


class Unavailable(KubeError):
    """No usable answer: connection refused or reset, a timeout, 429, or a 5xx."""


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
    return cls(message, status=status, reason=reason)


@contextmanager
def api_errors() -> Iterator[None]:
    """Translate exceptions raised inside the block into :class:`KubeError` subclasses."""
    try:
        yield
    except ApiException as exc:
        raise translate(exc) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unavailable(f"API server unreachable: {type(exc).__name__}: {exc}") from None
