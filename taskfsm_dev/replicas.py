"""Several ``taskfsm run --buckets B`` replicas against one control plane, and what tests and
the benchmark ask of them (docs/operations.md, "Running several replicas").

:func:`start_replicas` starts N replicas as separate processes (:class:`ControllerProcess`),
each with its own identity and log, sharing the bucket Leases in one namespace;
:func:`bucket_holders` reads who holds each bucket Lease; :func:`wait_balanced` waits until
every bucket is held by exactly one replica and each holds its fair share;
:func:`reconciles` parses the per-reconcile debug lines of a replica's log (key, bucket,
time) that show who reconciled what.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from taskfsm.kube.buckets import bucket_lease_name
from taskfsm.kube.rest import LEASES, Rest
from taskfsm_dev.process import ControllerProcess

FAST_TIMINGS = (5.0, 3.0, 1.0)
"""(lease duration, renew deadline, retry period) short enough for tests."""


def replica_args(
    buckets: int, timings: tuple[float, float, float] = FAST_TIMINGS, *, log_level: str = "DEBUG"
) -> list[str]:
    """The ``taskfsm run`` flags of a bucketed replica: JSON logs (DEBUG: one line per
    reconcile, see :func:`reconciles`) and the given Lease timings."""
    lease, renew, retry = timings
    return [
        f"--buckets={buckets}",
        f"--leader-election-lease-duration={lease}",
        f"--leader-election-renew-deadline={renew}",
        f"--leader-election-retry-period={retry}",
        "--log-format=json",
        f"--log-level={log_level}",
    ]


def start_replicas(
    kubeconfig: str | Path | None,
    count: int,
    *,
    buckets: int,
    lease_namespace: str,
    namespace: str | None = None,
    timings: tuple[float, float, float] = FAST_TIMINGS,
    prefix: str = "replica",
    first: int = 0,
    args: Sequence[str] = (),
    log_dir: str | Path | None = None,
    wait_ready: bool = True,
    start: Callable[..., ControllerProcess] | None = None,
) -> list[ControllerProcess]:
    """Start ``count`` replicas named ``<prefix>-<first>`` … (also their identities), all with
    ``--buckets buckets`` and their Leases in ``lease_namespace``; returns once every one
    answers ``/readyz`` (with ``wait_ready``). ``start`` builds and starts one process from
    :class:`ControllerProcess` keyword options (the e2e ``start_controller`` fixture, which
    runs them as the installed controller and stops them after the test; ``kubeconfig`` None
    keeps its identity); by default they are started here with ``kubeconfig`` and the caller
    stops them (:meth:`ControllerProcess.ensure_stopped`)."""

    def default_start(*, wait_ready: bool = True, **options: Any) -> ControllerProcess:
        assert kubeconfig is not None, "without start, a kubeconfig is needed"
        return ControllerProcess(kubeconfig, log_dir=log_dir, **options).start(
            wait_ready=wait_ready
        )

    launch = start or default_start
    flags = [*replica_args(buckets, timings), *args]
    procs = []
    for i in range(first, first + count):
        name = f"{prefix}-{i}"
        options: dict[str, Any] = {
            "leader_elect": True,
            "lease_namespace": lease_namespace,
            "identity": name,
            "name": name,
            "args": flags,
            "wait_ready": False,
        }
        if start is not None and kubeconfig is not None:
            options["kubeconfig"] = kubeconfig
        if namespace is not None:
            options["namespace"] = namespace
        procs.append(launch(**options))
    if wait_ready:
        for proc in procs:
            proc.wait_ready(120)
    return procs


def bucket_holders(rest: Rest, namespace: str, buckets: int) -> list[str]:
    """The ``holderIdentity`` of each bucket Lease ("" when it has none or does not exist),
    from one LIST."""
    leases = {lease["metadata"]["name"]: lease for lease in rest.list(LEASES, namespace)["items"]}
    return [
        str(
            ((leases.get(bucket_lease_name(i, buckets)) or {}).get("spec") or {}).get(
                "holderIdentity"
            )
            or ""
        )
        for i in range(buckets)
    ]


def acquired_at(rest: Rest, namespace: str, buckets: int, indices: Sequence[int]) -> float:
    """The latest ``acquireTime`` (seconds since the epoch) of the bucket Leases ``indices``: when
    their current holders took them, as the holders wrote it (no test polling delay in it)."""
    leases = {lease["metadata"]["name"]: lease for lease in rest.list(LEASES, namespace)["items"]}
    return max(
        datetime.fromisoformat(
            leases[bucket_lease_name(i, buckets)]["spec"]["acquireTime"].replace("Z", "+00:00")
        ).timestamp()
        for i in indices
    )


def held_by(proc: ControllerProcess) -> float | None:
    """The replica's ``taskfsm_buckets_held``; None when it does not answer."""
    if not proc.running:
        return None
    try:
        return proc.metric("taskfsm_buckets_held")
    except OSError:
        return None


def balanced(rest: Rest, namespace: str, buckets: int, procs: Sequence[ControllerProcess]) -> bool:
    """Every bucket Lease held by one of ``procs`` (by identity = name), each holding its fair
    share or one less, and each replica's own gauge agreeing with the Leases."""
    holders = bucket_holders(rest, namespace, buckets)
    names = {p.name for p in procs}
    if any(h not in names for h in holders):
        return False
    share = math.ceil(buckets / len(procs))
    for proc in procs:
        mine = holders.count(proc.name)
        if not share - 1 <= mine <= share or held_by(proc) != mine:
            return False
    return True


def wait_balanced(
    rest: Rest,
    namespace: str,
    buckets: int,
    procs: Sequence[ControllerProcess],
    timeout: float,
) -> float:
    """Wait until :func:`balanced`; returns the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if balanced(rest, namespace, buckets, procs):
            return time.monotonic() - started
        time.sleep(0.2)
    holders = bucket_holders(rest, namespace, buckets)
    raise AssertionError(
        f"buckets not balanced over {[p.name for p in procs]} after "
        f"{timeout:.0f}s: holders {holders}"
    )


@dataclass(frozen=True)
class Reconcile:
    """One reconcile as a replica's JSON log shows it."""

    replica: str
    controller: str
    key: str
    bucket: int | None
    at: float
    """Wall-clock seconds (the log's UTC timestamp)."""


def _log_records(proc: ControllerProcess) -> list[dict[str, Any]]:
    records = []
    for line in proc.log_text().splitlines():
        if not line.startswith("{"):
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def _timestamp(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00")).timestamp()


def reconciles(proc: ControllerProcess) -> list[Reconcile]:
    """Every reconcile the replica logged (needs ``--log-level=DEBUG --log-format=json``)."""
    return [
        Reconcile(
            proc.name,
            str(r.get("controller")),
            str(r.get("key")),
            r.get("bucket"),
            _timestamp(r),
        )
        for r in _log_records(proc)
        if r.get("event") == "reconcile"
    ]


def holdings(proc: ControllerProcess) -> dict[int, list[tuple[float, float]]]:
    """Per bucket, the wall-clock intervals during which the replica's log says it held it
    (from ``acquired a bucket`` to ``released a bucket`` / ``lost a bucket``; still open: to
    now while it runs, else to the last line it logged, e.g. when it was killed)."""
    intervals: dict[int, list[tuple[float, float]]] = {}
    since: dict[int, float] = {}
    records = _log_records(proc)
    end = time.time() if proc.running or not records else _timestamp(records[-1])
    for record in records:
        event, bucket = record.get("event"), record.get("bucket")
        if not isinstance(bucket, int):
            continue
        if event == "acquired a bucket":
            since[bucket] = _timestamp(record)
        elif event in ("released a bucket", "lost a bucket") and bucket in since:
            intervals.setdefault(bucket, []).append((since.pop(bucket), _timestamp(record)))
    for bucket, start in since.items():
        intervals.setdefault(bucket, []).append((start, end))
    return intervals


def ownership_problems(procs: Sequence[ControllerProcess], tolerance: float = 0.25) -> list[str]:
    """What the replicas' logs show against the bucket rule (empty: none): two replicas holding
    one bucket at once, or a bucketed reconcile by a replica outside its holding of that
    bucket. ``tolerance``: seconds a reconcile may come before the ``acquired a bucket`` line
    (the holder works from the moment its Lease is taken; the line is logged just after)."""
    problems = []
    by_bucket: dict[int, list[tuple[float, float, str]]] = {}
    for proc in procs:
        held = holdings(proc)
        for bucket, intervals in held.items():
            by_bucket.setdefault(bucket, []).extend((a, b, proc.name) for a, b in intervals)
        for r in reconciles(proc):
            if r.bucket is None or r.controller == "mediaprocessingentity":
                continue
            spans = held.get(r.bucket, [])
            if not any(a - tolerance <= r.at <= b + tolerance for a, b in spans):
                problems.append(
                    f"{r.replica} reconciled {r.key} (bucket {r.bucket}) at {r.at:.3f} "
                    f"outside its holdings {spans}"
                )
    for bucket, named in sorted(by_bucket.items()):
        for a_start, a_end, a_name in named:
            for b_start, b_end, b_name in named:
                if a_name < b_name and a_start < b_end and b_start < a_end:
                    problems.append(
                        f"bucket {bucket}: held by {a_name} ({a_start:.3f}-{a_end:.3f}) and "
                        f"{b_name} ({b_start:.3f}-{b_end:.3f}) at once"
                    )
    return problems
