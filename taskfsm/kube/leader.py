"""Leader election with a ``coordination.k8s.io/v1`` Lease, and the write gate it backs.

Only the leader runs reconcile workers; followers keep warm caches and take over when the Lease
expires. Timings as controller-runtime's, all flags of ``taskfsm run``: lease duration 15 s,
renew deadline 10 s, retry period 2 s (docs/operations.md, "Leader election").

Why not the client's ``kubernetes.leaderelection`` (which this module replaced): it

* reads the Lease (GET) before every write, renewals included, so a renewal takes two round
  trips and twice the time a slow API server needs for one;
* sets no request timeout (its ``LeaseLock`` calls the API through the default client, which
  has none); the fixed 4 s we used to add failed every request of an API server answering in
  5 s, so no replica could acquire or renew at that latency;
* measures the renew deadline and the lease expiry on the wall clock (``time.time()``), which
  steps;
* retries a failed attempt every retry period whatever ``Retry-After`` says (only urllib3's own
  retries waited for it, blind to the renew deadline);
* runs a renew loop that cannot be stopped, and never releases the Lease;
* does not record when the last successful renewal was sent, which a write gate needs.

How this one works, against :class:`taskfsm.kube.rest.Rest` with optimistic concurrency on the
Lease's resourceVersion:

* **Acquiring.** Every retry period (jittered up to +20 %), GET the Lease (POST it when there is
  none). It is taken with a PUT of the object just read when it has no holder, is already ours,
  or has shown the same resourceVersion for its ``leaseDurationSeconds`` since this replica
  first saw that version (answer time: the latest moment the holder may have renewed). Each
  request of an attempt may take the whole lease duration, so acquiring works at any latency
  below it, a fortiori at every latency at which a leader can renew.
* **Renewing.** A PUT of the Lease as last written (no GET; a 409 reads it once: still ours
  means our own write landed unanswered), ``retry_period`` after the last renewal was sent, or
  at once when that answer took longer. The renewal must be answered before the renew deadline,
  ``renew_deadline`` seconds after the previous renewal's answer; each request gets what is left
  of it as its timeout, and a failed one is tried again after the retry period or the
  ``Retry-After`` the server asked for, never sooner. An answer after the deadline (the process
  was paused) does not count. No renewal by the deadline: the Lease is lost, ``on_stopped`` runs
  (the controller exits, like controller-runtime) and this elector never campaigns again.
* **The write gate.** :meth:`LeaderElector.write_guard` is installed on every :class:`Rest` of
  the controller (main and MediaProcessingEntity clusters, not the Lease's own) and refuses a
  write before it is sent unless this replica leads and its last successful renewal was *sent*
  less than ``renew_deadline`` ago, on ``time.monotonic()``. A successor can take the Lease only
  ``lease_duration`` after that renewal was sent (it must see that version unchanged that long,
  from a time after it was written), so a permitted write leaves ``lease_duration -
  renew_deadline`` (5 s) for reaching the API server. A replica resuming from SIGSTOP, or with
  a renewal overdue, therefore writes nothing, however stale its view. What this cannot cover
  (a pause between the check and the send) is left to the resourceVersion and UID
  preconditions of the writes themselves.
* **Releasing.** On a graceful stop the renew loop ends and a PUT clears ``holderIdentity``, so
  a follower takes over on its next attempt instead of after the lease duration.
"""

from __future__ import annotations

import copy
import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from taskfsm.api.timestamps import format_micro_time
from taskfsm.kube import jitter
from taskfsm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound, NotLeader
from taskfsm.kube.rest import LEASES, Rest

log = logging.getLogger(__name__)

JITTER = 0.2
"""Acquisition attempts wait ``retry_period`` times 1 to 1 + JITTER, so followers spread out."""

RELEASE_JOIN_TIMEOUT = 5.0
"""Seconds :meth:`LeaderElector.release` waits for a renewal in flight before releasing."""


def _holder(lease: dict[str, Any] | None) -> str:
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _version(lease: dict[str, Any] | None) -> str:
    return str(((lease or {}).get("metadata") or {}).get("resourceVersion") or "")


class LeaderElector:
    """Campaign for the Lease ``namespace/name`` as ``identity`` in a background thread.

    Args:
        rest: the Lease's cluster; its own :class:`Rest`, without a write guard.
        on_started: called (in a thread of its own) once this replica leads.
        on_stopped: called when the Lease is lost (not on :meth:`release`).
        lease_duration, renew_deadline, retry_period: seconds, see the module docstring;
            ``lease_duration > renew_deadline > retry_period > 0``.
        clock: monotonic seconds; ``wall_clock`` the times written into the Lease;
            ``wait(seconds)`` sleeps and returns True once stopping (tests pass fakes).
        observed: (resourceVersion, ``clock`` time it was first seen) of the Lease as someone
            else already watched it; the expiry counts from then.
    """

    def __init__(
        self,
        rest: Rest,
        *,
        namespace: str,
        name: str,
        identity: str,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        wait: Callable[[float], bool] | None = None,
        observed: tuple[str, float] | None = None,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "leader election needs lease duration > renew deadline > retry period > 0, got "
                f"{lease_duration}, {renew_deadline}, {retry_period}"
            )
        self.rest = rest
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock, self.wall_clock = clock, wall_clock
        self.leading = threading.Event()
        """Set while this replica leads (between acquiring and losing or releasing the Lease)."""
        self._stopping = threading.Event()
        self._wait = wait or self._stopping.wait
        self._on_started, self._on_stopped = on_started, on_stopped
        self._lock = threading.Lock()
        self._lease: dict[str, Any] | None = None
        """The Lease as last read or written."""
        self._observed_version, self._observed_at = observed or ("", 0.0)
        """The resourceVersion last seen and when (``clock``, answer time) it was first seen;
        ``observed`` seeds them with what another reader of the Lease saw (the bucket elector's
        LIST, :mod:`taskfsm.kube.buckets`), so a Lease already seen standing still for its
        duration is taken at the first attempt instead of after another lease duration."""
        self.last_renewed: float | None = None
        """Monotonic time at which the last successful acquire or renew request was sent."""
        self._answered = 0.0
        """Monotonic time at which that request's answer arrived."""
        self._thread = threading.Thread(target=self.run, name="leader-election", daemon=True)

    @property
    def lease_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    # -- what the rest of the process asks ---------------------------------------------------

    def start(self) -> LeaderElector:
        self._thread.start()
        return self

    def holds_lease(self) -> bool:
        """Leading, and the last successful renewal was sent less than ``renew_deadline`` ago."""
        return self._write_allowance() > 0

    def _write_allowance(self) -> float:
        with self._lock:
            if not self.leading.is_set() or self.last_renewed is None:
                return 0.0
            return self.last_renewed + self.renew_deadline - self.clock()

    def write_guard(self, method: str, resource: str) -> float:
        """A :data:`taskfsm.kube.rest.WriteGuard`: seconds for which writing stays allowed, or
        :class:`~taskfsm.kube.errors.NotLeader` when this replica cannot show it holds the
        Lease."""
        allowed = self._write_allowance()
        if allowed <= 0:
            raise NotLeader(
                f"not sending {method} {resource}: this replica does not hold the Lease "
                f"{self.lease_key} (leading: {self.leading.is_set()}, last renewal "
                f"{self._age()} ago, renew deadline {self.renew_deadline:g}s)"
            )
        return allowed

    def _age(self) -> str:
        last = self.last_renewed
        return "never" if last is None else f"{self.clock() - last:.1f}s"

    def release(self) -> None:
        """Stop campaigning; when leading, give the Lease up (graceful shutdown) so a successor
        need not wait for it to expire. Writes through the gate are refused from now on."""
        with self._lock:
            was_leading = self.leading.is_set()
            self.leading.clear()
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(RELEASE_JOIN_TIMEOUT)  # a renewal (or an acquisition) in flight
        with self._lock:
            was_leading = was_leading or self.leading.is_set()  # acquired just now
            self.leading.clear()
            lease = copy.deepcopy(self._lease)
        if not was_leading or lease is None:
            return
        deadline = self.clock() + self.renew_deadline
        for _ in range(3):
            spec = dict(lease.get("spec") or {})
            spec.pop("holderIdentity", None)
            spec["renewTime"] = format_micro_time(self.wall_clock())
            lease["spec"] = spec
            try:
                self._request("PUT", lease, deadline)
                log.info("released the Lease", extra={"lease": self.lease_key})
                return
            except Conflict:
                # A renewal in flight changed it after our last read: read again, release if ours.
                try:
                    lease = self._request("GET", None, deadline)
                except KubeError as exc:
                    log.warning("could not release the Lease", extra={"error": str(exc)})
                    return
                if _holder(lease) != self.identity:
                    return
            except KubeError as exc:
                log.warning("could not release the Lease", extra={"error": str(exc)})
                return
        log.warning("could not release the Lease: it kept changing")

    # -- the election thread -------------------------------------------------------------------

    def run(self) -> None:
        """Acquire, then renew until the Lease is lost or :meth:`release` is called."""
        try:
            if not self._acquire():
                return
            log.info("became leader", extra={"lease": self.lease_key, "identity": self.identity})
            threading.Thread(target=self._on_started, name="leader-started", daemon=True).start()
            reason = self._renew_loop()
        except Exception as exc:  # a bug: never keep leading without renewing
            log.exception("leader election failed")
            reason = f"leader election failed: {type(exc).__name__}: {exc}"
        with self._lock:
            was_leading = self.leading.is_set()
            self.leading.clear()
        if reason and was_leading and not self._stopping.is_set():
            log.error("lost the Lease", extra={"lease": self.lease_key, "reason": reason})
            self._on_stopped()

    def _request(
        self, method: str, lease: dict[str, Any] | None, deadline: float
    ) -> dict[str, Any]:
        path = LEASES.path(self.namespace, None if method == "POST" else self.name)
        return self.rest.request(method, LEASES, path, body=lease, deadline=deadline)

    # acquiring

    def _acquire(self) -> bool:
        """Try every retry period until the Lease is ours (True) or stopping (False)."""
        while not self._stopping.is_set():
            wait = self._try_acquire()
            if wait is None:
                return True
            if self._wait(wait):
                return False
        return False

    def _retry_wait(self, exc: KubeError | None = None) -> float:
        wait = self.retry_period * (1 + JITTER * jitter.uniform(0.0, 1.0))
        if exc is not None and exc.retry_after is not None:
            wait = max(wait, exc.retry_after)
        return wait

    def _try_acquire(self) -> float | None:
        """One attempt; None when it took the Lease, else seconds until the next one. Each
        request may take up to the lease duration."""
        try:
            lease = self._request("GET", None, self.clock() + self.lease_duration)
        except NotFound:
            return self._create()
        except KubeError as exc:
            log.info("could not read the Lease", extra={"error": str(exc)})
            return self._retry_wait(exc)
        now = self.clock()
        holder, version = _holder(lease), _version(lease)
        if version != self._observed_version:
            if holder and holder != _holder(self._lease) and holder != self.identity:
                log.info("the Lease is held by another replica", extra={"holder": holder})
            self._observed_version, self._observed_at = version, now
        self._lease = lease
        spec = lease.get("spec") or {}
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return self._retry_wait()
        sent = self.clock()
        deadline = sent + self.lease_duration
        try:
            taken = self._request("PUT", self._claim(lease), deadline)
        except Conflict:  # the holder renewed, or another follower was faster
            return self._retry_wait()
        except KubeError as exc:
            log.info("could not take the Lease", extra={"error": str(exc)})
            return self._retry_wait(exc)
        return self._won(taken, sent, deadline)

    def _create(self) -> float | None:
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self.name, "namespace": self.namespace},
        }
        body = self._claim(body)
        sent = self.clock()
        deadline = sent + self.lease_duration
        try:
            created = self._request("POST", body, deadline)
        except AlreadyExists:
            return 0.0  # created by another replica meanwhile: read it now
        except KubeError as exc:
            log.info("could not create the Lease", extra={"error": str(exc)})
            return self._retry_wait(exc)
        return self._won(created, sent, deadline)

    def _claim(self, lease: dict[str, Any]) -> dict[str, Any]:
        """``lease`` with this replica as holder, renewed now."""
        lease = copy.deepcopy(lease)
        spec = dict(lease.get("spec") or {})
        now = format_micro_time(self.wall_clock())
        previous = spec.get("holderIdentity")
        if previous != self.identity:
            spec["acquireTime"] = now
            if previous:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = math.ceil(self.lease_duration)
        spec["renewTime"] = now
        lease["spec"] = spec
        return lease

    def _won(self, lease: dict[str, Any], sent: float, deadline: float) -> float | None:
        answered = self.clock()
        if answered >= deadline:  # paused meanwhile: nothing says the Lease is still ours
            return 0.0
        with self._lock:
            self._record(lease, sent, answered)
            self.leading.set()
        return None

    def _record(self, lease: dict[str, Any], sent: float, answered: float) -> None:
        self._lease = lease
        self._observed_version, self._observed_at = _version(lease), answered
        self.last_renewed, self._answered = sent, answered

    # renewing

    def _renew_loop(self) -> str | None:
        """Renew until lost (the reason) or stopping (None)."""
        while True:
            assert self.last_renewed is not None
            pause = self.last_renewed + self.retry_period - self.clock()
            if pause > 0 and self._wait(pause):
                return None
            if self._stopping.is_set():
                return None
            reason = self._renew(self._answered + self.renew_deadline)
            if reason is not None:
                return None if self._stopping.is_set() else reason

    def _renew(self, deadline: float) -> str | None:
        """Renew before ``deadline``: None when renewed, else why not."""
        error = ""
        while True:
            sent = self.clock()
            if sent >= deadline:
                return f"not renewed within the renew deadline ({self.renew_deadline:g}s){error}"
            assert self._lease is not None
            try:
                try:
                    lease = self._request("PUT", self._claim(self._lease), deadline)
                except Conflict:
                    current = self._request("GET", None, deadline)
                    if _holder(current) != self.identity:
                        return f"the Lease is held by {_holder(current) or 'nobody'}"
                    self._lease = current  # our own renewal landed, its answer did not
                    continue
            except NotFound:
                return "the Lease was deleted"
            except KubeError as exc:
                error = f"; last error: {exc}"
                wait = exc.retry_after if exc.retry_after is not None else self.retry_period
                if self.clock() + wait >= deadline:
                    return f"no time left to retry before the renew deadline{error}"
                if self._wait(wait):
                    return "stopping"
                continue
            answered = self.clock()
            if answered >= deadline:
                return "the renewal was answered after the renew deadline (was the process paused?)"
            with self._lock:
                self._record(lease, sent, answered)
            return None
