"""Reading (and, where a test plays another component, writing) cluster state for assertions.

:class:`Probe` wraps one namespace of a cluster with plain-dict calls: the Jobs and Secrets a
Task made, the helper payload decoded from its Secret, Events about an object, the Job status a
test writes through ``jobs/status`` to play the Job controller. :class:`ClusterScoped` creates
cluster-scoped nagare objects (ClusterFunction, ClusterMediaProcessingEntity, ...) that outlive
namespaces, and removes them (finalizers included) when the test ends, so one test's cluster
default never leaks into the next.
"""

from __future__ import annotations

import base64
import contextlib
import json
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import BY_KIND, TASKS
from taskfsm.kube.rest import EVENTS, JOBS, PODS, SECRETS, Rest
from taskfsm_dev.waiting import wait_for


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions_of(obj: dict[str, Any]) -> dict[str, str]:
    """``{type: status}`` of an object's ``status.conditions``."""
    return {
        cond["type"]: cond["status"] for cond in (obj.get("status") or {}).get("conditions") or []
    }


def world(engine: Any, *functions: dict[str, Any]) -> None:
    """A Workflow ``wf``, the Functions (default: one ``f``) and a local MPE ``m``."""
    from taskfsm_dev import objects

    engine.create(objects.workflow("wf"))
    for function in functions or (objects.function("f"),):
        engine.create(function)
    engine.create(objects.local_mpe("m"))


def mpe_ready(engine: Any, name: str = "m") -> None:
    wait_for(
        lambda: (
            conditions_of(engine.get(c.KIND_MEDIA_PROCESSING_ENTITY, name)).get("Ready") == "True"
        ),
        timeout=30,
        what=f"MPE {name} Ready",
    )


def failed_reason(task: dict[str, Any]) -> str:
    """The reason of a Failed Task's ``Failed`` condition."""
    return next(
        x.get("reason") or "" for x in task["status"]["conditions"] if x["type"] == "Failed"
    )


def failed_message(task: dict[str, Any]) -> str:
    """The message of a Failed Task's ``Failed`` condition (why it failed)."""
    return next(
        x.get("message") or "" for x in task["status"]["conditions"] if x["type"] == "Failed"
    )


def warnings(probe: Probe, name: str) -> list[str]:
    """``reason: note`` of every Warning Event of Task ``name``."""
    return [
        f"{e.get('reason')}: {e.get('note')}"
        for e in probe.events(name)
        if e.get("type") == "Warning"
    ]


class Probe:
    """Plain-dict reads and test-side writes in one namespace."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.rest = Rest(api_client)
        self.namespace = namespace

    # -- MediaProcessingEntities ---------------------------------------------------------------

    def wait_mpe_ready(self, name: str, *, timeout: float = 60) -> None:
        """Wait until the namespace's MediaProcessingEntity ``name`` is Ready: the controller has
        seen it, so a selection made after this sees it too."""
        resource = BY_KIND[c.KIND_MEDIA_PROCESSING_ENTITY]

        def ready() -> bool:
            try:
                mpe = self.rest.get(resource, self.namespace, name)
            except NotFound:
                return False
            return conditions_of(mpe).get("Ready") == "True"

        wait_for(ready, timeout=timeout, what=f"MediaProcessingEntity {name} Ready")

    # -- Tasks -----------------------------------------------------------------------------------

    def task(self, name: str) -> dict[str, Any] | None:
        try:
            return self.rest.get(TASKS, self.namespace, name)
        except NotFound:
            return None

    def status(self, name: str) -> dict[str, Any]:
        return (self.task(name) or {}).get("status") or {}

    def phase(self, name: str) -> str:
        return self.status(name).get("phase") or ""

    def wait_phase(self, name: str, phase: str, *, timeout: float = 60) -> dict[str, Any]:
        """Wait until Task ``name`` is in ``phase``; return the Task."""

        def probe() -> dict[str, Any] | None:
            task = self.task(name)
            return task if task and (task.get("status") or {}).get("phase") == phase else None

        try:
            return wait_for(probe, timeout=timeout, what=f"Task {name} {phase}")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; Task status now: {self.status(name)!r}") from None

    def wait_message(self, name: str, fragment: str, *, timeout: float = 60) -> dict[str, Any]:
        """Wait until Task ``name``'s ``status.message`` contains ``fragment``; return the Task."""

        def probe() -> dict[str, Any] | None:
            task = self.task(name)
            message = ((task or {}).get("status") or {}).get("message") or ""
            return task if fragment in message else None

        try:
            return wait_for(probe, timeout=timeout, what=f"Task {name} message with {fragment!r}")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; Task status now: {self.status(name)!r}") from None

    def task_gone(self, name: str) -> bool:
        return self.task(name) is None

    def patch_task_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        return self.rest.patch(
            TASKS, self.namespace, name, {"status": status}, subresource="status"
        )

    # -- Jobs, Secrets, pods ---------------------------------------------------------------------

    def jobs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.rest.list(JOBS, namespace or self.namespace).get("items") or []

    def job(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.rest.get(JOBS, namespace or self.namespace, name)
        except NotFound:
            return None

    def secrets(self, namespace: str | None = None) -> list[dict[str, Any]]:
        items = self.rest.list(SECRETS, namespace or self.namespace).get("items") or []
        return [
            s for s in items if c.LABEL_TASK_NAME in ((s.get("metadata") or {}).get("labels") or {})
        ]

    def secret(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.rest.get(SECRETS, namespace or self.namespace, name)
        except NotFound:
            return None

    def payload(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The helper payload (``data.json``) of the Secret ``name``, decoded."""
        secret = self.secret(name, namespace)
        assert secret is not None, f"Secret {name} not found"
        return json.loads(base64.b64decode(secret["data"][c.TASK_DATA_FILE_NAME]))

    def pods(self, job_name: str, namespace: str | None = None) -> list[dict[str, Any]]:
        body = self.rest.list(
            PODS,
            namespace or self.namespace,
            label_selector=f"batch.kubernetes.io/job-name={job_name}",
        )
        return body.get("items") or []

    def set_job_status(
        self, name: str, status: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Write a Job's status through ``jobs/status`` (the test plays the Job controller)."""
        return self.rest.patch(
            JOBS, namespace or self.namespace, name, {"status": status}, subresource="status"
        )

    def delete_job(
        self, name: str, namespace: str | None = None, *, strip_finalizers: bool = True
    ) -> None:
        """Delete a Job (background propagation), removing its finalizers first if asked."""
        ns = namespace or self.namespace
        if strip_finalizers:
            with contextlib.suppress(NotFound):
                self.rest.patch(JOBS, ns, name, {"metadata": {"finalizers": None}})
        with contextlib.suppress(NotFound):
            self.rest.delete(JOBS, ns, name, propagation="Background")

    # -- Events ----------------------------------------------------------------------------------

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """events.k8s.io Events in the namespace, about the object ``name`` if given."""
        items = self.rest.list(EVENTS, self.namespace).get("items") or []
        return [e for e in items if name is None or (e.get("regarding") or {}).get("name") == name]

    def event_reasons(self, name: str) -> list[str]:
        return [e.get("reason") or "" for e in self.events(name)]

    def wait_event(self, name: str, reason: str, *, timeout: float = 30) -> None:
        """Wait until an Event with ``reason`` is about ``name``: the controller writes a pass's
        Events after its status, so status can show an outcome a moment before its Event."""
        wait_for(
            lambda: reason in self.event_reasons(name),
            timeout=timeout,
            what=lambda: f"Event {reason} about {name} (seen: {self.event_reasons(name)})",
        )


class ClusterScoped:
    """Creates cluster-scoped nagare objects; :meth:`cleanup` removes them, finalizers first."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.rest = Rest(api_client)
        self._created: list[tuple[str, str]] = []

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        res = BY_KIND[obj["kind"]]
        assert not res.namespaced, f"{obj['kind']} is namespaced"
        created = self.rest.create(res, None, obj)
        self._created.append((obj["kind"], obj["metadata"]["name"]))
        return {**created, "kind": obj["kind"]}

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return self.rest.get(BY_KIND[kind], None, name)

    def cleanup(self) -> None:
        for kind, name in reversed(self._created):
            res = BY_KIND[kind]
            with contextlib.suppress(KubeError):
                self.rest.delete(res, None, name)
            with contextlib.suppress(KubeError):
                self.rest.patch(res, None, name, {"metadata": {"finalizers": None}})
        self._created.clear()
