"""Lease-held buckets: several active replicas share the keys, each through Leases of its own.

One leader doing all the work caps a cluster at what one Python process reconciles (about one
core). With ``--buckets B`` the keys (``namespace/name`` of Tasks and Workflows) are split into
``B`` buckets by a stable hash, and each bucket is owned through its own ``coordination.k8s.io``
Lease, ``taskfsm-bucket-<i>-of-<B>``: every replica is active for the buckets it holds, and a
dead replica's buckets move to the others when their Leases expire (docs/operations.md, "Running
several replicas"). Kubernetes Leases are the only coordination; there is no other store.

The pieces: :mod:`taskfsm.kube.bucket_keys` (the bucket of a key, Lease names, the bucket a
thread works for), :mod:`taskfsm.kube.bucket_plan` (the fair-share decision, pure), and here
:class:`BucketElector` (the coordinator: membership, campaigns, releases, the write gate).

* **Bucket of a key.** :func:`bucket_of`: 32-bit FNV-1a of the UTF-8 key, modulo ``B``. The same
  in every process and every release (Python's ``hash()`` of a string is salted per process, so
  two replicas would disagree).
* **Each bucket Lease** is held with :class:`taskfsm.kube.leader.LeaderElector`, unchanged: the
  same acquisition (a Lease standing still for its duration is taken), renewal (renew deadline
  < lease duration) and write gate (a write needs a renewal *sent* less than the renew deadline
  ago), so everything docs/operations.md "Leader election" says of the one Lease holds for each
  bucket. Unlike the single leader, a replica that loses a bucket does not exit: it stops
  working on that bucket and may campaign for it again later.
* **Membership.** Every replica renews a Lease of its own, ``taskfsm-replica-<hash of its
  identity>``, each retry period. A replica counts as live while its membership Lease keeps
  changing (seen with a new resourceVersion within its ``leaseDurationSeconds``, on this
  replica's monotonic clock, as the elector judges bucket Leases) and it holds no bucket Lease
  that has expired (a replica whose bucket Leases stand still is dead or cut off, whatever its
  membership says). Expired membership Leases are deleted (resourceVersion precondition), so
  crashed replicas do not pile up; a graceful stop deletes its own.
* **Fair share.** Each retry period (and at the moment a Lease of another replica would
  expire, if sooner) a coordinator thread lists the Leases of the namespace (one LIST) and
  computes :func:`plan`: the share is ``ceil(B / live replicas)``; it campaigns for
  free or expired buckets while it holds fewer, and releases its surplus (clears the holder, so
  another replica takes it on its next attempt) when it holds more, e.g. after a scale-up.
  Replicas prefer buckets in different orders (a hash of identity and bucket), so they rarely
  race for the same one; a race is settled by the Lease's resourceVersion. While a bucket Lease
  of another ``--buckets`` value is held and fresh, no bucket is campaigned for: during a
  rollout that changes ``B`` the new replicas wait until the old ones have released theirs.
* **Per-bucket write gate.** The reconcile worker sets the bucket of the key it works on with
  :func:`acting_in` (a context variable, so per thread); :meth:`BucketElector.write_guard`,
  installed on every :class:`taskfsm.kube.rest.Rest` of the controller, refuses a write unless
  this replica holds that bucket's Lease as freshly as the single leader must hold its Lease. A
  write outside any bucket is refused too (every write of the controller belongs to a key).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from taskfsm.api.timestamps import format_micro_time
from taskfsm.kube import jitter
from taskfsm.kube.bucket_keys import (
    BUCKET_LEASE_PREFIX,
    MEMBER_LEASE_PREFIX,
    acting_in,
    bucket_lease_name,
    bucket_of,
    current_bucket,
    member_lease_name,
    preference,
)
from taskfsm.kube.bucket_plan import LeaseView, Plan, plan
from taskfsm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound, NotLeader
from taskfsm.kube.leader import JITTER, LeaderElector
from taskfsm.kube.rest import LEASES, Rest

log = logging.getLogger(__name__)


__all__ = [
    "BUCKET_LEASE_PREFIX",
    "JITTER",
    "MEMBER_LEASE_PREFIX",
    "BucketElector",
    "LeaseView",
    "Plan",
    "acting_in",
    "bucket_lease_name",
    "bucket_of",
    "current_bucket",
    "member_lease_name",
    "plan",
    "preference",
]

# -- the elector ----------------------------------------------------------------------------------


class BucketElector:
    """Hold a fair share of the ``buckets`` Leases in ``namespace`` as ``identity``.

    Args:
        rest: the Leases' cluster; its own :class:`Rest`, without a write guard.
        on_acquired: called with a bucket once this replica holds it (from an elector thread).
        on_given_up: called with a bucket and ``"released"`` (surplus, or a graceful stop) or
            ``"lost"`` (not renewed within the renew deadline, or taken).
        lease_duration, renew_deadline, retry_period: as for :class:`LeaderElector`.
    """

    def __init__(
        self,
        rest: Rest,
        *,
        namespace: str,
        buckets: int,
        identity: str,
        on_acquired: Callable[[int], None],
        on_given_up: Callable[[int, str], None],
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if buckets < 1:
            raise ValueError(f"buckets must be at least 1, got {buckets}")
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                "bucket election needs lease duration > renew deadline > retry period > 0, got "
                f"{lease_duration}, {renew_deadline}, {retry_period}"
            )
        self.rest = rest
        self.namespace, self.buckets, self.identity = namespace, buckets, identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self._on_acquired, self._on_given_up = on_acquired, on_given_up
        self._lock = threading.Lock()
        self._electors: dict[int, LeaderElector] = {}
        """One elector per bucket this replica holds or campaigns for."""
        self._seen: dict[str, tuple[str, float]] = {}
        """resourceVersion of each Lease listed, and when it was first seen."""
        self._member: dict[str, Any] | None = None
        """This replica's membership Lease as last written."""
        self._stopping = threading.Event()
        self.last_plan: Plan | None = None
        self._next_expiry: float | None = None
        """When (``clock``) the first Lease held by another replica expires unless renewed."""
        self._thread = threading.Thread(target=self._run, name="bucket-election", daemon=True)

    @property
    def member_name(self) -> str:
        return member_lease_name(self.identity)

    # -- what the rest of the process asks ---------------------------------------------------

    def start(self) -> BucketElector:
        self._thread.start()
        return self

    def holds(self, bucket: int) -> bool:
        """This replica holds ``bucket``'s Lease and renewed it less than the renew deadline
        ago (the condition its writes need, so work stops before another can take it)."""
        with self._lock:
            elector = self._electors.get(bucket)
        return elector is not None and elector.holds_lease()

    def leads(self, bucket: int) -> bool:
        """This replica won ``bucket``'s Lease and has not lost or given it up, though its
        last renewal may be late (:meth:`holds` may be False for a moment): keys of it are
        kept, not dropped."""
        with self._lock:
            elector = self._electors.get(bucket)
        return elector is not None and elector.leading.is_set()

    def held(self) -> list[int]:
        """The buckets this replica holds now."""
        with self._lock:
            electors = dict(self._electors)
        return sorted(i for i, e in electors.items() if e.holds_lease())

    def write_guard(self, method: str, resource: str) -> float:
        """A :data:`taskfsm.kube.rest.WriteGuard` for the bucket this thread acts in
        (:func:`acting_in`): seconds for which writing stays allowed, else
        :class:`~taskfsm.kube.errors.NotLeader`."""
        bucket = current_bucket()
        if bucket is None:
            raise NotLeader(
                f"not sending {method} {resource}: the write belongs to no bucket "
                f"(with --buckets {self.buckets} every write is made for a key's bucket)"
            )
        with self._lock:
            elector = self._electors.get(bucket)
        if elector is None:
            raise NotLeader(
                f"not sending {method} {resource}: this replica does not hold bucket {bucket} "
                f"(Lease {self.namespace}/{bucket_lease_name(bucket, self.buckets)})"
            )
        return elector.write_guard(method, resource)

    def release(self) -> None:
        """Graceful stop: stop campaigning, give every held bucket up at once (so the other
        replicas take them on their next attempt), delete the membership Lease."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.lease_duration)
        with self._lock:
            electors, self._electors = dict(self._electors), {}
        releasing = []
        for bucket, elector in sorted(electors.items()):
            was_held = elector.leading.is_set()
            thread = threading.Thread(target=elector.release, name=f"release-bucket-{bucket}")
            thread.start()
            releasing.append((bucket, was_held, thread))
        for bucket, was_held, thread in releasing:
            thread.join()
            if was_held:
                log.info("released a bucket", extra={"bucket": bucket})
                self._on_given_up(bucket, "released")
        try:
            self.rest.request(
                "DELETE",
                LEASES,
                LEASES.path(self.namespace, self.member_name),
                body={"apiVersion": "v1", "kind": "DeleteOptions"},
                deadline=self.clock() + self.renew_deadline,
            )
        except KubeError as exc:
            log.info("could not delete the membership Lease", extra={"error": str(exc)})

    # -- the coordinator thread ------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._round()
            except Exception:  # a bug: log it, the next round tries again
                log.exception("bucket election round failed")
            wait = self.retry_period * (1 + JITTER * jitter.uniform(0.0, 1.0))
            if self._next_expiry is not None:
                # A Lease of another replica expires before the next round: look at that
                # moment, so a dead replica's buckets move a lease duration after they were
                # first seen standing still, not up to a retry period later.
                wait = min(wait, max(0.05, self._next_expiry - self.clock() + 0.05))
            if self._stopping.wait(wait):
                return

    def _round(self) -> None:
        self._renew_membership()
        try:
            listed = self.rest.request(
                "GET",
                LEASES,
                LEASES.path(self.namespace),
                verb="LIST",
                deadline=self.clock() + self.lease_duration,
            )
        except KubeError as exc:
            log.info("could not list the Leases", extra={"error": str(exc)})
            return
        views = self._observe(listed.get("items") or [])
        now = self.clock()
        self._next_expiry = min(
            (
                v.first_seen + v.duration
                for v in views.values()
                if v.holder and v.holder != self.identity and not v.expired(now)
            ),
            default=None,
        )
        with self._lock:
            if self._stopping.is_set():
                return
            electors = dict(self._electors)
        held = {i for i, e in electors.items() if e.leading.is_set()}
        campaigning = set(electors) - held
        decided = plan(
            identity=self.identity,
            buckets=self.buckets,
            views=views,
            held=held,
            campaigning=campaigning,
            now=self.clock(),
        )
        if self.last_plan is None or (decided.live, decided.share) != (
            self.last_plan.live,
            self.last_plan.share,
        ):
            log.info(
                "bucket share",
                extra={"live_replicas": len(decided.live), "share": decided.share},
            )
        if decided.foreign and (self.last_plan is None or not self.last_plan.foreign):
            log.warning(
                "bucket Leases of another --buckets value are held: taking no bucket until "
                "they are gone (every replica must run the same --buckets)",
                extra={"leases": list(decided.foreign)},
            )
        self.last_plan = decided
        for bucket in decided.abandon:
            self._give_up(bucket, electors[bucket])
        for bucket in decided.release:
            log.info(
                "releasing a bucket above the fair share",
                extra={"bucket": bucket, "share": decided.share},
            )
            self._give_up(bucket, electors[bucket])
        for bucket in decided.acquire:
            self._campaign(bucket, views.get(bucket_lease_name(bucket, self.buckets)))
        for name in decided.stale_members:
            self._delete_member(name, views[name])

    def _observe(self, items: list[dict[str, Any]]) -> dict[str, LeaseView]:
        """The listed Leases of interest as :class:`LeaseView` s, tracking when each
        resourceVersion was first seen."""
        now = self.clock()
        views: dict[str, LeaseView] = {}
        names = set()
        for lease in items:
            meta = lease.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name.startswith((BUCKET_LEASE_PREFIX, MEMBER_LEASE_PREFIX)):
                continue
            names.add(name)
            version = str(meta.get("resourceVersion") or "")
            seen = self._seen.get(name)
            if seen is None or seen[0] != version:
                seen = self._seen[name] = (version, now)
            spec = lease.get("spec") or {}
            views[name] = LeaseView(
                holder=str(spec.get("holderIdentity") or ""),
                version=version,
                first_seen=seen[1],
                duration=float(spec.get("leaseDurationSeconds") or self.lease_duration),
            )
        for name in set(self._seen) - names:
            del self._seen[name]
        return views

    def _campaign(self, bucket: int, view: LeaseView | None) -> None:
        def acquired() -> None:
            with self._lock:
                current = self._electors.get(bucket) is elector and not self._stopping.is_set()
            if current and elector.leading.is_set():
                log.info("acquired a bucket", extra={"bucket": bucket})
                self._on_acquired(bucket)

        def lost() -> None:
            with self._lock:
                current = self._electors.get(bucket) is elector
                if current:
                    del self._electors[bucket]
            if current:
                log.warning("lost a bucket", extra={"bucket": bucket})
                self._on_given_up(bucket, "lost")

        elector = LeaderElector(
            self.rest,
            namespace=self.namespace,
            name=bucket_lease_name(bucket, self.buckets),
            identity=self.identity,
            on_started=acquired,
            on_stopped=lost,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            clock=self.clock,
            observed=None if view is None else (view.version, view.first_seen),
        )
        with self._lock:
            if self._stopping.is_set():
                return
            self._electors[bucket] = elector
        elector.start()

    def _give_up(self, bucket: int, elector: LeaderElector) -> None:
        with self._lock:
            if self._electors.get(bucket) is not elector:
                return
            del self._electors[bucket]
        was_held = elector.leading.is_set()
        elector.release()
        if was_held:
            log.info("released a bucket", extra={"bucket": bucket})
            self._on_given_up(bucket, "released")

    # -- membership ------------------------------------------------------------------------------

    def _member_body(self) -> dict[str, Any]:
        now = format_micro_time(datetime.now(UTC))
        lease = dict(self._member or {})
        metadata = dict(lease.get("metadata") or {})
        metadata.update(name=self.member_name, namespace=self.namespace)
        spec = dict(lease.get("spec") or {})
        spec.setdefault("acquireTime", now)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=math.ceil(self.lease_duration),
            renewTime=now,
        )
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": metadata,
            "spec": spec,
        }

    def _renew_membership(self) -> None:
        """Create or renew this replica's membership Lease (best effort: a replica whose
        membership cannot be written is counted out by the others, which is safe)."""
        path = LEASES.path(self.namespace, self.member_name)
        deadline = self.clock() + self.renew_deadline
        for _ in range(3):
            try:
                if self._member is None:
                    try:
                        self._member = self.rest.request(
                            "POST",
                            LEASES,
                            LEASES.path(self.namespace),
                            body=self._member_body(),
                            deadline=deadline,
                        )
                    except AlreadyExists:
                        self._member = self.rest.request("GET", LEASES, path, deadline=deadline)
                        continue
                else:
                    self._member = self.rest.request(
                        "PUT", LEASES, path, body=self._member_body(), deadline=deadline
                    )
                return
            except NotFound:
                self._member = None  # deleted as stale while this replica was cut off
            except Conflict:
                try:
                    self._member = self.rest.request("GET", LEASES, path, deadline=deadline)
                except NotFound:
                    self._member = None
                except KubeError as exc:
                    log.info("could not renew the membership Lease", extra={"error": str(exc)})
                    return
            except KubeError as exc:
                log.info("could not renew the membership Lease", extra={"error": str(exc)})
                return

    def _delete_member(self, name: str, view: LeaseView) -> None:
        try:
            self.rest.request(
                "DELETE",
                LEASES,
                LEASES.path(self.namespace, name),
                body={
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "preconditions": {"resourceVersion": view.version},
                },
                deadline=self.clock() + self.renew_deadline,
            )
            log.info("deleted an expired membership Lease", extra={"holder": view.holder})
        except (NotFound, Conflict):
            pass  # gone already, or renewed meanwhile
        except KubeError as exc:
            log.info("could not delete a membership Lease", extra={"error": str(exc)})
