"""Who may read ``/metrics`` with ``taskfsm run --metrics-secure``: the API server decides.

A caller sends its ServiceAccount (or any) bearer token; a ``TokenReview`` asks the API server who
it is, and a ``SubjectAccessReview`` whether that user may ``get`` the non-resource URL
``/metrics`` -- the same two questions controller-runtime's ``WithAuthenticationAndAuthorization``
filter asks, so the same RBAC works: bind the ``taskfsm-metrics-reader`` ClusterRole (or any role
granting ``nonResourceURLs: ["/metrics"], verbs: ["get"]``) to Prometheus' ServiceAccount.

Answers are cached for :data:`CACHE_SECONDS` by a hash of the token (never the token itself), at
most :data:`CACHE_SIZE` of them, so a scrape every few seconds costs two API requests a minute, and
a flood of made-up tokens costs at most two requests each and a bounded amount of memory
(docs/security.md, "Endpoints").
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from taskfsm.kube.errors import KubeError
from taskfsm.kube.rest import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, Rest

log = logging.getLogger(__name__)

CACHE_SECONDS = 30.0
"""How long an answer is reused for the same token and path."""
CACHE_SIZE = 1024
"""Most answers kept; the oldest goes first."""
REVIEW_TIMEOUT = (5.0, 10.0)
"""(connect, read) seconds for each review request."""


class MetricsAuthorizer:
    """Decides, through the API server, whether a bearer token may read a path.

    Args:
        rest: the main cluster (the controller's own identity creates the reviews).
        clock: monotonic seconds (injected by tests).
    """

    def __init__(self, rest: Rest, *, clock: Any = time.monotonic) -> None:
        self.rest = rest
        self.clock = clock
        self._answers: OrderedDict[str, tuple[float, int, str]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, token: str, path: str) -> tuple[int, str]:
        """(HTTP status, reason): 200, 401 (no or unknown token), 403 (not allowed) or 503
        (the API server could not be asked; not cached)."""
        if not token:
            return 401, "Unauthorized: a bearer token is required"
        key = hashlib.sha256(f"{path}\0{token}".encode()).hexdigest()
        now = self.clock()
        with self._lock:
            cached = self._answers.get(key)
            if cached is not None and cached[0] > now:
                return cached[1], cached[2]
        try:
            code, reason = self._review(token, path)
        except KubeError as exc:
            log.warning("metrics: could not review a token", extra={"error": str(exc)})
            return 503, "Service Unavailable: the API server could not review the token"
        with self._lock:
            self._answers[key] = (now + CACHE_SECONDS, code, reason)
            self._answers.move_to_end(key)
            while len(self._answers) > CACHE_SIZE:
                self._answers.popitem(last=False)
        return code, reason

    def _review(self, token: str, path: str) -> tuple[int, str]:
        review = self.rest.request(
            "POST",
            TOKEN_REVIEWS,
            TOKEN_REVIEWS.path(),
            body={
                "apiVersion": TOKEN_REVIEWS.api_version,
                "kind": TOKEN_REVIEWS.kind,
                "spec": {"token": token},
            },
            timeout=REVIEW_TIMEOUT,
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return 401, "Unauthorized: the token was not accepted"
        user = status.get("user") or {}
        access = self.rest.request(
            "POST",
            SUBJECT_ACCESS_REVIEWS,
            SUBJECT_ACCESS_REVIEWS.path(),
            body={
                "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
                "kind": SUBJECT_ACCESS_REVIEWS.kind,
                "spec": {
                    "user": user.get("username") or "",
                    "uid": user.get("uid") or "",
                    "groups": user.get("groups") or [],
                    "extra": user.get("extra") or {},
                    "nonResourceAttributes": {"path": path, "verb": "get"},
                },
            },
            timeout=REVIEW_TIMEOUT,
        )
        if (access.get("status") or {}).get("allowed"):
            return 200, "OK"
        name = user.get("username") or "the caller"
        return 403, f"Forbidden: {name} may not get {path}"
