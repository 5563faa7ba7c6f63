"""Lease-held buckets: several active replicas share the keys, each through Leases of its own.

One leader doing all the work caps a cluster at what one Python process reconciles (about one
core). With ``--buckets B`` the keys (``namespace/name`` of Tasks and Workflows) are split into
``B`` buckets by a stable hash, and each bucket is owned through its own ``coordination.k8s.io``
Lease, ``taskfsm-bucket-<i>-of-<B>``: every replica is active for the buckets it holds, and a
dead replica's buckets move to the others when their Leases expire (docs/operations.md, "Running
several replicas"). Kubernetes Leases are the only coordination; there is no other store.

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

import contextlib
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Set
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from taskfsm.kube import jitter
from taskfsm.kube.errors import AlreadyExists, Conflict, KubeError, NotFound, NotLeader
from taskfsm.kube.leader import JITTER, LeaderElector
from taskfsm.kube.rest import LEASES, Rest

log = logging.getLogger(__name__)

BUCKET_LEASE_PREFIX = "taskfsm-bucket-"
MEMBER_LEASE_PREFIX = "taskfsm-replica-"

_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193


def bucket_of(key: str, buckets: int) -> int:
    """The bucket of ``key`` (``namespace/name``) among ``buckets``: 32-bit FNV-1a, modulo."""
    value = _FNV_OFFSET
    for byte in key.encode():
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value % buckets


def bucket_lease_name(index: int, buckets: int) -> str:
    return f"{BUCKET_LEASE_PREFIX}{index}-of-{buckets}"


def member_lease_name(identity: str) -> str:
    """The membership Lease of ``identity`` (identities may hold characters a name may not)."""
    return MEMBER_LEASE_PREFIX + hashlib.sha256(identity.encode()).hexdigest()[:16]


def preference(identity: str, buckets: int) -> list[int]:
    """The order in which ``identity`` campaigns for buckets (and, reversed, gives them up)."""
    return sorted(range(buckets), key=lambda i: hashlib.sha256(f"{identity}/{i}".encode()).digest())


# -- the bucket a thread is working for ---------------------------------------------------------

_CURRENT: ContextVar[int | None] = ContextVar("taskfsm_bucket", default=None)


@contextlib.contextmanager
def acting_in(bucket: int | None) -> Iterator[None]:
    """Within the block, this thread's writes are gated by ``bucket``'s Lease (None: no bucket)."""
    token = _CURRENT.set(bucket)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_bucket() -> int | None:
    return _CURRENT.get()


# -- the fair-share decision (pure) ---------------------------------------------------------------


@dataclass(frozen=True)
class LeaseView:
    """A Lease as this replica has watched it."""

    holder: str
    version: str
    first_seen: float
    """Monotonic time at which this resourceVersion was first seen (answer time)."""
    duration: float
    """Its ``leaseDurationSeconds``."""

    def expired(self, now: float) -> bool:
        """Unchanged for its duration: its holder may not have renewed it for that long."""
        return now >= self.first_seen + self.duration


@dataclass(frozen=True)
class Plan:
    """What the coordinator does this round (:func:`plan`)."""

    live: frozenset[str]
    share: int
    acquire: tuple[int, ...] = ()
    """Buckets to start campaigning for."""
    abandon: tuple[int, ...] = ()
    """Campaigns to stop (the bucket was taken meanwhile, or the share is reached)."""
    release: tuple[int, ...] = ()
    """Held buckets above the share, to give up."""
    stale_members: tuple[str, ...] = ()
    """Names of expired membership Leases of other replicas, to delete."""
    foreign: tuple[str, ...] = ()
    """Bucket Leases of another ``--buckets`` value held by someone: while there are any, no
    bucket is campaigned for (those replicas would work on the same keys)."""


def plan(
    *,
    identity: str,
    buckets: int,
    views: Mapping[str, LeaseView],
    held: Set[int],
    campaigning: Set[int],
    now: float,
) -> Plan:
    """Decide from the Leases seen (``views`` by name) what this replica does this round."""
    bucket_views = {i: views.get(bucket_lease_name(i, buckets)) for i in range(buckets)}
    dead = {
        v.holder
        for v in bucket_views.values()
        if v is not None and v.holder and v.holder != identity and v.expired(now)
    }
    members = {
        v.holder
        for name, v in views.items()
        if name.startswith(MEMBER_LEASE_PREFIX) and v.holder and not v.expired(now)
    }
    live = frozenset((members - dead) | {identity})
    share = math.ceil(buckets / len(live))

    def available(i: int) -> bool:
        v = bucket_views[i]
        return v is None or not v.holder or v.holder == identity or v.expired(now)

    own_suffix = f"-of-{buckets}"
    foreign = sorted(
        name
        for name, v in views.items()
        if name.startswith(BUCKET_LEASE_PREFIX)
        and not name.endswith(own_suffix)
        and v.holder
        and not v.expired(now)
    )
    order = preference(identity, buckets)
    kept = [i for i in order if i in campaigning and available(i)]
    if foreign:  # replicas of another B are at work: take nothing new until they are gone
        kept = []
    abandon = [i for i in order if i in campaigning and i not in kept]
    room = share - len(held) - len(kept)
    if room < 0:
        abandon += kept[len(kept) + room :]
        kept = kept[: len(kept) + room]
    release = [i for i in reversed(order) if i in held][: max(0, len(held) - share)]
    acquire = [
        i for i in order if not foreign and i not in held and i not in campaigning and available(i)
    ]
    stale = [
        name
        for name, v in views.items()
        if name.startswith(MEMBER_LEASE_PREFIX) and v.holder != identity and v.expired(now)
    ]
    return Plan(
        live=live,
        share=share,
        acquire=tuple(acquire[: max(0, room)]),
        abandon=tuple(abandon),
        release=tuple(release),
        stale_members=tuple(sorted(stale)),
        foreign=tuple(foreign),
    )


# -- the elector ----------------------------------------------------------------------------------


def _micro_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        now = _micro_time(datetime.now(UTC))
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
