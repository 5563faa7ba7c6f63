"""A simulated kubelet: moves Job pods through Running to Succeeded or Failed.

The local control plane has no nodes, scheduler or kubelet, so Job pods would stay Pending for
ever. This component watches pods that belong to Jobs and, by a policy the test (or the demo)
chooses, writes their status through the ``pods/status`` subresource exactly as a kubelet would:
once every Secret the pod mounts exists (a kubelet cannot mount a missing Secret), first
``Running`` with a running container state, then ``Succeeded`` (exit code 0) or ``Failed``
(non-zero exit code). The real Job controller in kube-controller-manager then counts the pods and
sets the Job's ``Complete``/``Failed`` conditions. Kubernetes' own Job integration tests do the
same.

Policies:

* :func:`annotation_policy` (the default) reads pod annotations, so a Function's pod template can
  say how its pods behave: ``kubelet.taskfsm.dev/run-seconds`` (float, default 0),
  ``kubelet.taskfsm.dev/exit-code`` (int, default 0), ``kubelet.taskfsm.dev/never-start: "true"``,
  ``kubelet.taskfsm.dev/termination-reason`` (default ``Completed`` for exit code 0, else
  ``Error``, as a kubelet writes) and ``kubelet.taskfsm.dev/termination-message`` (what a
  container wrote to its ``terminationMessagePath``; default none).
* any callable ``pod dict -> PodOutcome``.

With ``logs=True`` the kubelet also binds the pods it starts to a Node of its own and serves
their container logs (:mod:`taskfsm_dev.podlogs`), so ``kubectl logs`` and ``taskfsm logs``
work on the local control plane; the ``kubelet.taskfsm.dev/log`` annotation holds the text.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from taskfsm.api.timestamps import format_time
from taskfsm.kube.client import ApiClient
from taskfsm.kube.errors import KubeError, NotFound, Unavailable
from taskfsm.kube.informer import Informer
from taskfsm.kube.rest import PODS, SECRETS, Rest
from taskfsm_dev.podlogs import LogServer

log = logging.getLogger(__name__)

ANNOTATION_RUN_SECONDS = "kubelet.taskfsm.dev/run-seconds"
ANNOTATION_EXIT_CODE = "kubelet.taskfsm.dev/exit-code"
ANNOTATION_NEVER_START = "kubelet.taskfsm.dev/never-start"
ANNOTATION_TERMINATION_REASON = "kubelet.taskfsm.dev/termination-reason"
ANNOTATION_TERMINATION_MESSAGE = "kubelet.taskfsm.dev/termination-message"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


@dataclass(frozen=True)
class PodOutcome:
    """What the simulated kubelet does with one pod.

    Attributes:
        run_seconds: seconds between ``Running`` and the terminal phase.
        exit_code: the main containers' exit code; 0 → ``Succeeded``, else ``Failed``.
        start: False keeps the pod ``Pending`` for ever (an image that never pulls).
        reason: the terminated containers' ``reason``; ``None``: ``Completed`` or ``Error``.
        message: the terminated containers' ``message`` (their termination message), if any.
    """

    run_seconds: float = 0.0
    exit_code: int = 0
    start: bool = True
    reason: str | None = None
    message: str | None = None


Policy = Callable[[dict[str, Any]], PodOutcome]


def annotation_policy(default: PodOutcome = PodOutcome()) -> Policy:
    """A policy reading the ``kubelet.taskfsm.dev/*`` pod annotations, else ``default``."""

    def policy(pod: dict[str, Any]) -> PodOutcome:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ANNOTATION_NEVER_START) == "true":
            return PodOutcome(start=False)
        return PodOutcome(
            run_seconds=float(annotations.get(ANNOTATION_RUN_SECONDS, default.run_seconds)),
            exit_code=int(annotations.get(ANNOTATION_EXIT_CODE, default.exit_code)),
            reason=annotations.get(ANNOTATION_TERMINATION_REASON, default.reason),
            message=annotations.get(ANNOTATION_TERMINATION_MESSAGE, default.message),
        )

    return policy


class SimulatedKubelet:
    """Watches Job pods in one namespace (or all) and plays them out by ``policy``.

    Use as a context manager or call :meth:`start`/:meth:`stop`. ``handled`` counts the pods that
    reached a terminal phase through this kubelet.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        namespace: str | None = None,
        policy: Policy | None = None,
        logs: bool = False,
    ) -> None:
        self._rest = Rest(api_client)
        self.log_server = LogServer(self._rest) if logs else None
        self._namespace = namespace
        self._policy = policy or annotation_policy()
        self._stop = threading.Event()
        self._seen: set[str] = set()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timers_cv = threading.Condition()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self.handled = 0
        #: pod name → Secrets it waits for (a pod never starts before its Secrets exist)
        self.waiting_for_secrets: dict[str, list[str]] = {}

    def __enter__(self) -> SimulatedKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> SimulatedKubelet:
        if self.log_server is not None:
            self.log_server.start()
        for target, name in ((self._watch_loop, "watch"), (self._timer_loop, "timers")):
            thread = threading.Thread(target=target, name=f"sim-kubelet-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._timers_cv:
            self._timers_cv.notify_all()
        for thread in self._threads:
            thread.join(timeout=10)
        if self.log_server is not None:
            self.log_server.stop()

    # -- watching --------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        informer = Informer(
            self._rest,
            PODS,
            namespace=self._namespace,
            label_selector=JOB_NAME_LABEL,
            watch_timeout=30,
        )
        informer.add_handler(self._on_pod_event)
        informer.start()
        self._stop.wait()
        informer.stop()

    def _on_pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        if kind != "DELETED":
            self._observe(pod)

    def _observe(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if uid in self._seen or meta.get("deletionTimestamp"):
            return
        if ((pod.get("status") or {}).get("phase") or "Pending") != "Pending":
            return
        self._seen.add(uid)
        outcome = self._policy(pod)
        if not outcome.start:
            return
        self._schedule(0.0, lambda: self._try_start(pod, outcome))

    def _try_start(self, pod: dict[str, Any], outcome: PodOutcome) -> None:
        """Start the pod once every Secret it mounts exists, as a kubelet does (F9b)."""
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        missing = [
            secret for secret in secret_volumes(pod) if not self._secret_exists(namespace, secret)
        ]
        if missing:
            self.waiting_for_secrets[name] = missing
            self._schedule(0.5, lambda: self._try_start(pod, outcome))
            return
        self.waiting_for_secrets.pop(name, None)
        if self.log_server is not None:
            self.log_server.bind(pod)
        self._set_running(pod)
        if self.log_server is not None:
            self.log_server.started(pod, outcome.run_seconds, outcome.exit_code)
        self._schedule(outcome.run_seconds, lambda: self._set_terminated(pod, outcome))

    def _secret_exists(self, namespace: str, name: str) -> bool:
        try:
            self._rest.get(SECRETS, namespace, name)
        except NotFound:
            return False
        return True

    # -- timers ----------------------------------------------------------------------------------

    def _schedule(self, delay: float, action: Callable[[], None]) -> None:
        with self._timers_cv:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._seq), action))
            self._timers_cv.notify()

    def _timer_loop(self) -> None:
        while not self._stop.is_set():
            with self._timers_cv:
                while not self._timers and not self._stop.is_set():
                    self._timers_cv.wait()
                if self._stop.is_set():
                    return
                due, _, action = self._timers[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._timers_cv.wait(wait)
                    continue
                heapq.heappop(self._timers)
            try:
                action()
            except NotFound:
                pass  # the pod went away: nothing to play out
            except Unavailable as exc:
                # The API server is restarting or unreachable: a kubelet retries its status
                # updates, so a pod is never stuck because one write was lost.
                log.warning("simulated kubelet: API unavailable, retrying in 1 s: %s", exc)
                self._schedule(1.0, action)
            except KubeError as exc:
                log.warning("simulated kubelet: status write failed: %s", exc)

    # -- status writes ---------------------------------------------------------------------------

    def _patch_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self._rest.patch(
            PODS, meta["namespace"], meta["name"], {"status": status}, subresource="status"
        )

    def _set_running(self, pod: dict[str, Any]) -> None:
        now = _now()
        self._patch_status(
            pod,
            {
                "phase": "Running",
                "startTime": now,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [
                    _container_status(c, {"running": {"startedAt": now}}, ready=True)
                    for c in pod["spec"]["containers"]
                ],
            },
        )

    def _set_terminated(self, pod: dict[str, Any], outcome: PodOutcome) -> None:
        status = terminated_status(
            pod, outcome.exit_code, reason=outcome.reason, message=outcome.message
        )
        if self.log_server is not None:
            self.log_server.ended(pod)
        self._patch_status(pod, status)
        self.handled += 1


def terminated_status(
    pod: dict[str, Any], exit_code: int, *, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """The pod ``status`` of a kubelet whose containers all exited with ``exit_code`` just now:
    ``state.terminated`` with ``exitCode``, ``reason`` (``Completed`` for 0, else ``Error``,
    unless given) and, when given, the termination ``message``."""
    now = _now()
    terminated: dict[str, Any] = {
        "exitCode": exit_code,
        "reason": reason or ("Completed" if exit_code == 0 else "Error"),
        "startedAt": now,
        "finishedAt": now,
    }
    if message:
        terminated["message"] = message
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
        "containerStatuses": [
            _container_status(c, {"terminated": terminated}, ready=False)
            for c in pod["spec"]["containers"]
        ],
    }


def secret_volumes(pod: dict[str, Any]) -> list[str]:
    """Names of the Secrets the pod must have before it can start (non-optional volumes)."""
    return [
        v["secret"]["secretName"]
        for v in pod["spec"].get("volumes") or []
        if (v.get("secret") or {}).get("secretName") and not v["secret"].get("optional")
    ]


def _container_status(
    container: dict[str, Any], state: dict[str, Any], *, ready: bool
) -> dict[str, Any]:
    return {
        "name": container["name"],
        "image": container.get("image") or "unknown",
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "started": ready,
        "state": state,
    }


def _now() -> str:
    return format_time(datetime.now(UTC))
