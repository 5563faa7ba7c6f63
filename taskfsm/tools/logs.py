"""``taskfsm logs TASK``: the logs of a Task's Job pods, wherever the Job runs.

The Job is the one ``status.jobRef`` records, in the cluster of the Task's MediaProcessingEntity
(:mod:`taskfsm.tools.job_location`: the main cluster, or a remote one reached through its kubeconfig
Secret with the user's credentials). Its pods are those labelled with the Job's UID, oldest
first; each pod's containers are shown in turn, with a ``==> pod/container <==`` header when
there is more than one. ``--tail N`` limits each container to its last N lines.

With ``-f`` the command follows, as ``kubectl logs -f`` does: it waits (watching, never polling)
for the Task to get a Job and the Job to get a pod, then streams the newest pod's log until that
container ends. Reading logs needs ``get`` on ``pods/log`` in the Job's namespace; a refusal or
a log that is gone is one line on stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import PODS, Rest
from taskfsm.tools import tasks as task_tools
from taskfsm.tools.job_location import job_site


class Sink(Protocol):
    """Where logs go: ``sys.stdout.buffer``, or a wrapper of it (``logs workflow/NAME``)."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
FOLLOW_READ_TIMEOUT = 3600.0
"""Seconds a followed log may stay silent before the connection counts as dead."""


def job_pods(rest: Rest, namespace: str, job_ref: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of the Job ``job_ref`` (by its UID label, else its name label), oldest first."""
    selector = (
        f"{JOB_UID_LABEL}={job_ref['uid']}"
        if job_ref.get("uid")
        else f"batch.kubernetes.io/job-name={job_ref.get('name')}"
    )
    pods = rest.list(PODS, namespace, label_selector=selector).get("items") or []
    return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")


def read_log(
    rest: Rest,
    namespace: str,
    pod: str,
    container: str | None = None,
    *,
    follow: bool = False,
    tail: int | None = None,
) -> Iterator[bytes]:
    """The log of one container as chunks of bytes (raises ``KubeError`` on a refusal)."""
    query = {
        "container": container,
        "follow": "true" if follow else None,
        "tailLines": str(tail) if tail is not None and tail >= 0 else None,
    }
    read = FOLLOW_READ_TIMEOUT if follow else rest.timeout[1]
    stream = rest.request(
        "GET",
        PODS,
        PODS.path(namespace, pod, "log"),
        query=query,
        stream=True,
        timeout=(rest.timeout[0], read),
        accept="*/*",
    )
    try:
        yield from stream.stream(8192, decode_content=True)
    finally:
        stream.release_conn()


def logs_main(
    main: Rest,
    namespace: str,
    name: str,
    *,
    follow: bool = False,
    tail: int | None = None,
    container: str | None = None,
    out: Sink | None = None,
    timeout: float = 0.0,
) -> int:
    """``taskfsm logs``; ``timeout`` (0: none) bounds the waits of ``-f`` for a Job and pod."""
    sink = out or sys.stdout.buffer
    deadline = time.monotonic() + timeout if timeout > 0 else None
    try:
        task = main.get(TASKS, namespace, name)
    except NotFound:
        return _fail(f'Task "{name}" not found in namespace {namespace}')
    if not (task.get("status") or {}).get("jobRef") and follow:
        task = _wait_task(main, namespace, name, task, deadline)
    job_ref = (task.get("status") or {}).get("jobRef") or {}
    if not job_ref:
        phase = (task.get("status") or {}).get("phase") or "New"
        return _fail(f"Task {name} has no Job (phase {phase})")
    site = job_site(main, task)
    if site.rest is None:
        return _fail(f"Job {job_ref.get('name')} on {site.where}: {site.problem}")
    try:
        pods = job_pods(site.rest, site.namespace, job_ref)
        if follow:
            pod = _wait_pod(site.rest, site.namespace, job_ref, pods, deadline)
            if pod is None:
                return _fail(f"Job {job_ref.get('name')} has no pod yet")
            return _show(site.rest, site.namespace, [pod], container, True, tail, sink)
    except KubeError as exc:
        return _fail(f"could not read the pods of Job {job_ref.get('name')}: {exc}")
    if not pods:
        return _fail(
            f"Job {site.namespace}/{job_ref.get('name')} on {site.where} has no pods "
            "(not started yet, or removed with the finished Job)"
        )
    return _show(site.rest, site.namespace, pods, container, False, tail, sink)


def _show(
    rest: Rest,
    namespace: str,
    pods: list[dict[str, Any]],
    container: str | None,
    follow: bool,
    tail: int | None,
    sink: Sink,
) -> int:
    code = 0
    targets = [
        (pod["metadata"]["name"], name)
        for pod in pods
        for name in ([container] if container else _containers(pod))
    ]
    for pod_name, name in targets:
        if len(targets) > 1:
            sink.write(f"==> {pod_name}/{name} <==\n".encode())
        attempts = 0
        while True:
            try:
                for chunk in read_log(rest, namespace, pod_name, name, follow=follow, tail=tail):
                    sink.write(chunk)
                    sink.flush()
                break
            except KubeError as exc:
                # A container that has not started yet answers 400 "waiting to start".
                if follow and exc.status == 400 and "waiting" in str(exc) and attempts < 120:
                    attempts += 1
                    time.sleep(0.5)
                    continue
                print(f"error: logs of {pod_name}/{name}: {exc}", file=sys.stderr)
                code = 1
                break
    sink.flush()
    return code


def _containers(pod: dict[str, Any]) -> list[str]:
    return [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]


def _wait_task(
    main: Rest, namespace: str, name: str, task: dict[str, Any], deadline: float | None
) -> dict[str, Any]:
    """Watch the Task until it records a Job or ends; the last version seen."""

    def done(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return bool(status.get("jobRef")) or status.get("phase") in task_tools.TERMINAL

    return _watch_until(
        lambda version, seconds: task_tools.watch_one(main, namespace, name, version, seconds),
        task,
        done,
        deadline,
    )


def _wait_pod(
    rest: Rest,
    namespace: str,
    job_ref: dict[str, Any],
    pods: list[dict[str, Any]],
    deadline: float | None,
) -> dict[str, Any] | None:
    """The newest pod of the Job once it left Pending (watching the Job's pods), or None."""

    def started(pod: dict[str, Any]) -> bool:
        return ((pod.get("status") or {}).get("phase") or "Pending") != "Pending"

    newest = pods[-1] if pods else None
    if newest is not None and started(newest):
        return newest
    selector = f"{JOB_UID_LABEL}={job_ref.get('uid')}"
    listed = rest.list(PODS, namespace, label_selector=selector)
    version = (listed.get("metadata") or {}).get("resourceVersion")
    while deadline is None or time.monotonic() < deadline:
        seconds = 60.0 if deadline is None else max(1.0, deadline - time.monotonic())
        stream = rest.watch(
            PODS,
            namespace,
            timeout_seconds=int(seconds),
            read_timeout=seconds + 30,
            labelSelector=selector,
            resourceVersion=version,
        )
        try:
            for kind, pod in task_tools.watch_events(stream):
                version = pod["metadata"].get("resourceVersion") or version
                if kind != "DELETED" and started(pod):
                    return pod
        finally:
            stream.release_conn()
    return None


def _watch_until(
    watch: Callable[[str | None, float], Iterator[tuple[str, dict[str, Any]]]],
    obj: dict[str, Any],
    done: Callable[[dict[str, Any]], bool],
    deadline: float | None,
) -> dict[str, Any]:
    version = obj["metadata"].get("resourceVersion")
    while not done(obj) and (deadline is None or time.monotonic() < deadline):
        seconds = 60.0 if deadline is None else max(1.0, deadline - time.monotonic())
        for kind, event in watch(version, seconds):
            if kind == "DELETED":
                return obj
            obj, version = event, event["metadata"].get("resourceVersion") or version
            if done(obj):
                break
    return obj


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1
