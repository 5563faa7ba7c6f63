"""Fault-injection helpers: a crashable ``taskfsm run`` process, a ledger of every child the
controller ever made, and the lifecycle invariants a run must end with (``tests/faults``).

* :class:`CrashableController` — :class:`taskfsm_dev.process.ControllerProcess` with extra
  environment for one start, so a test can set ``TASKFSM_CRASH_AFTER`` (``tests.support.crashpoints``)
  for one life of the process and restart it without;
* :class:`ChildLedger` — watches Jobs and Secrets of a namespace (on its own connection, not the
  controller's) and remembers every UID it ever saw per Task, so "exactly one Job per Task" also
  catches a duplicate that was created and deleted again in between two checks;
* :class:`Fleet` — creates Tasks with a known expected outcome (one Workflow per Task, so the
  Workflow controller's termination of a failed Workflow cannot change another Task's phase),
  remembers which were deleted, and lists every invariant violation:

  - a kept Task is in its expected terminal phase; it has exactly one Job, ever; ``status.jobRef``
    names it; the Secret of the same name exists and is owned by that Job alone; the Job carries
    no ``job-protection`` finalizer any more;
  - a deleted Task is gone, and so are its Jobs and Secrets (no finalizer keeps them), also when
    it was removed outright (finalizers stripped) while the controller was down or cut off;
  - a Task whose Job was removed outright before its outcome was recorded ends Failed with reason
    JobLost and no Job (a Task UID never gets a second Job). The one exception is the window
    docs/lifecycle.md names under D18b: a Job removed before ``status.jobRef`` named it, by a
    controller that never saw it, may be made once more (one more Job per such removal);
  - no task-labelled Job or Secret exists without its Task (by name and UID), and no Secret with
    task labels outlives its Job.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.kube.informer import ADDED, Informer
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import JOBS, NAMESPACES, SECRETS, Rest
from taskfsm.manifests.jobs import job_name
from taskfsm_dev import objects
from taskfsm_dev.process import ControllerProcess
from tests.support import crashpoints

CRASH_ENV = crashpoints.ENV
CRASH_EXIT = 137
TERMINAL = ("Succeeded", "Failed")
FAST_WATCH_ARGS = (
    "--watch-timeout=15",
    "--watch-read-margin=5",
    "--shutdown-timeout=5",
    "--resync-period=20",
)
"""``taskfsm run`` flags for tests: short watches and resyncs, a quick graceful stop."""


class CrashableController(ControllerProcess):
    """A ``taskfsm run`` process whose environment can change between starts.

    ``start(env={"TASKFSM_CRASH_AFTER": "create jobs"})`` runs one life with that crash point;
    a later ``start()`` runs without it. ``lives`` counts the starts.
    """

    lives = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The same `taskfsm run`, with crash points behind the REST observer (tests only).
        module = self.cmd.index("-m") + 1
        self.cmd[module] = "tests.support.crashpoints"

    def start(
        self,
        *,
        wait_ready: bool = True,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
    ) -> CrashableController:
        if self.lives:
            self.fresh_ports()  # a crashed life's ports must not make the next fail
        full = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        full.pop("KUBECONFIG", None)
        if not (env or {}).get(CRASH_ENV):
            full.pop(CRASH_ENV, None)
        self.lives += 1
        self._spawn(full, f"[life {self.lives}] ")
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code once the process ended, or None if it still runs after ``timeout`` s."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class ChildLedger:
    """Every Job and Secret ever seen in ``namespace``, by the Task named in its labels."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        rest = Rest(api_client)
        self._jobs = Informer(
            rest, JOBS, namespace=namespace, label_selector=c.LABEL_TASK_NAME, watch_timeout=30
        )
        self._secrets = Informer(
            rest, SECRETS, namespace=namespace, label_selector=c.LABEL_TASK_NAME, watch_timeout=30
        )
        self._lock = threading.Lock()
        self.job_uids: dict[str, set[str]] = {}
        self.secret_uids: dict[str, set[str]] = {}
        self._tasks = Informer(rest, TASKS, namespace=namespace, watch_timeout=30)
        self.history: dict[str, list[str]] = {}
        """Per Task and Job name, one line per watch event (phase, finalizers, deletion), for
        explaining a violation."""
        self._jobs.add_handler(lambda kind, obj: self._note(self.job_uids, kind, obj))
        self._secrets.add_handler(lambda kind, obj: self._note(self.secret_uids, kind, obj))
        self._tasks.add_handler(self._trace)
        self._jobs.add_handler(self._trace)

    def _note(self, into: dict[str, set[str]], kind: str, obj: dict[str, Any]) -> None:
        if kind != ADDED:
            return
        meta = obj.get("metadata") or {}
        task = (meta.get("labels") or {}).get(c.LABEL_TASK_NAME, "")
        with self._lock:
            into.setdefault(task, set()).add(meta.get("uid") or "")

    def _trace(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        if obj.get("kind") == "Job" or "batch" in str(obj.get("apiVersion")):
            owner = f"job:{(meta.get('labels') or {}).get(c.LABEL_TASK_NAME, '')}"
            what = f"uid={meta.get('uid', '')[:8]} conditions={[x.get('type') for x in status.get('conditions') or []]}"
        else:
            owner = meta.get("name", "")
            what = f"phase={status.get('phase')!r} jobRef={(status.get('jobRef') or {}).get('uid', '')[:8]} message={status.get('message')!r}"
        line = (
            f"{time.strftime('%H:%M:%S')} {kind} rv={meta.get('resourceVersion')} {what} "
            f"finalizers={meta.get('finalizers')} deleting={bool(meta.get('deletionTimestamp'))}"
        )
        with self._lock:
            self.history.setdefault(owner, []).append(line)

    def explain(self, task: str) -> str:
        """The recorded events of Task ``task`` and its Jobs."""
        with self._lock:
            lines = [*self.history.get(task, []), *self.history.get(f"job:{task}", [])]
        return f"--- {task} ---\n" + "\n".join(sorted(lines))

    def __enter__(self) -> ChildLedger:
        for informer in (self._jobs, self._secrets, self._tasks):
            informer.start()
        if not all(inf.wait_synced(30) for inf in (self._jobs, self._secrets, self._tasks)):
            raise TimeoutError("child ledger did not sync")
        return self

    def __exit__(self, *exc: object) -> None:
        for informer in (self._jobs, self._secrets, self._tasks):
            informer.stop()

    def jobs_of(self, task: str) -> set[str]:
        with self._lock:
            return set(self.job_uids.get(task, set()))


@dataclass
class Expectation:
    name: str
    phase: str
    """The terminal phase the Task must reach (unless deleted)."""
    deleted: bool = False
    job_removed: bool = False
    """Its Job was removed outright (finalizer stripped); it must not come back."""
    lost_allowed: bool = False
    """The Job went before the outcome was recorded: Failed with reason JobLost is right too."""
    unrecorded_removals: int = 0
    """Jobs removed outright before ``status.jobRef`` named them: the documented window of D18b
    (docs/lifecycle.md) where a controller that did not see the Job (a restart, a lost answer to
    the create) may make it again. Each allows one more Job over the Task's life, never more."""


@dataclass
class Fleet:
    """Tasks with known outcomes in one namespace, and the invariants they must end with."""

    api_client: client.ApiClient
    namespace: str
    mpe: str = "local"
    expectations: dict[str, Expectation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rest = Rest(self.api_client)

    # -- setup -----------------------------------------------------------------------------------

    def setup(self) -> Fleet:
        """A local MediaProcessingEntity and two Functions: ``ok`` (exit 0), ``fail`` (exit 1)."""
        from taskfsm.kube.resources import BY_KIND

        for obj in (
            objects.local_mpe(self.mpe),
            objects.function("ok", exit_code=0),
            objects.function("fail", exit_code=1),
        ):
            self.rest.create(BY_KIND[obj["kind"]], self.namespace, obj)
        return self

    def add(self, name: str, *, fail: bool = False, function: str | None = None) -> None:
        """Create Task ``name`` in its own Workflow; it must end Failed when ``fail``.
        ``function`` runs another Function (created by the caller) instead of ``ok``/``fail``."""
        from taskfsm.kube.resources import WORKFLOWS

        self.rest.create(WORKFLOWS, self.namespace, objects.workflow(f"wf-{name}"))
        self.expectations[name] = Expectation(name, "Failed" if fail else "Succeeded")
        function = function or ("fail" if fail else "ok")
        task = objects.task(
            name, workflow_name=f"wf-{name}", function_name=function, mpe_name=self.mpe
        )
        self.rest.create(TASKS, self.namespace, task)

    def delete(self, name: str) -> None:
        self.expectations[name].deleted = True
        with contextlib.suppress(NotFound):
            self.rest.delete(TASKS, self.namespace, name)

    def remove_outright(self, name: str) -> None:
        """Delete Task ``name`` and strip its finalizers: it is gone, whatever the controller did."""
        self.expectations[name].deleted = True
        try:
            self.rest.patch(TASKS, self.namespace, name, {"metadata": {"finalizers": None}})
            self.rest.delete(TASKS, self.namespace, name)
        except NotFound:
            pass

    def remove_job_outright(self, name: str) -> bool:
        """Strip and delete the Jobs of Task ``name``; False when it had none. A Task not yet
        terminal may then end Failed (JobLost) instead of its expected phase."""
        exp = self.expectations[name]
        status = (self.tasks().get(name) or {}).get("status") or {}
        phase = status.get("phase") or ""
        recorded = (status.get("jobRef") or {}).get("uid")
        found = self.children()[0].get(name, [])
        for job in found:
            meta = job["metadata"]
            try:
                self.rest.patch(
                    JOBS, meta["namespace"], meta["name"], {"metadata": {"finalizers": None}}
                )
                self.rest.delete(JOBS, meta["namespace"], meta["name"], propagation="Background")
            except NotFound:
                pass
        if found and recorded in {job["metadata"]["uid"] for job in found}:
            exp.job_removed = True
        elif found:  # not yet in status.jobRef: lost (JobLost) or, unseen, made again
            exp.unrecorded_removals += 1
        if found:
            exp.lost_allowed = exp.lost_allowed or phase not in TERMINAL
        return bool(found)

    def delete_all(self) -> None:
        for name, exp in self.expectations.items():
            if not exp.deleted:
                self.delete(name)

    # -- reading ---------------------------------------------------------------------------------

    def tasks(self) -> dict[str, dict[str, Any]]:
        items = self.rest.list(TASKS, self.namespace)["items"]
        return {t["metadata"]["name"]: t for t in items}

    def children(self) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
        """(Jobs by Task name, labelled Secrets by name) as they are now."""
        jobs: dict[str, list[dict[str, Any]]] = {}
        for job in self.rest.list(JOBS, self.namespace, label_selector=c.LABEL_TASK_NAME)["items"]:
            jobs.setdefault(job["metadata"]["labels"][c.LABEL_TASK_NAME], []).append(job)
        secrets = {
            s["metadata"]["name"]: s
            for s in self.rest.list(SECRETS, self.namespace, label_selector=c.LABEL_TASK_NAME)[
                "items"
            ]
        }
        return jobs, secrets

    def events_of(self, name: str) -> str:
        """The Events about Task ``name`` (reason: note), oldest first."""
        from taskfsm.kube.rest import EVENTS

        items = [
            e
            for e in self.rest.list(EVENTS, self.namespace)["items"]
            if (e.get("regarding") or {}).get("name") == name
        ]
        items.sort(
            key=lambda e: (
                e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp") or ""
            )
        )
        return "\n".join(f"  event {e.get('reason')}: {e.get('note')}" for e in items)

    def settled(self) -> bool:
        """Every kept Task terminal, every deleted one gone (cheap check before :meth:`violations`)."""
        tasks = self.tasks()
        for name, exp in self.expectations.items():
            task = tasks.get(name)
            if exp.deleted:
                if task is not None:
                    return False
            elif task is None or ((task.get("status") or {}).get("phase") or "") not in TERMINAL:
                return False
        return True

    def violations(self, ledger: ChildLedger | None = None) -> list[str]:
        """Every broken invariant, readable (empty: all hold)."""
        problems: list[str] = []
        tasks = self.tasks()
        jobs, secrets = self.children()
        job_uids = {j["metadata"]["uid"] for group in jobs.values() for j in group}
        for name, exp in sorted(self.expectations.items()):
            task = tasks.get(name)
            mine = jobs.get(name, [])
            ever = ledger.jobs_of(name) if ledger is not None else set()
            if len(ever) > 1 + exp.unrecorded_removals:
                problems.append(f"{name}: {len(ever)} Jobs were created over its life")
            if exp.deleted:
                if task is not None:
                    problems.append(
                        f"{name}: deleted but still there (finalizers {task['metadata'].get('finalizers')})"
                    )
                for job in mine:
                    problems.append(
                        f"{name}: deleted but Job {job['metadata']['name']} remains "
                        f"(finalizers {job['metadata'].get('finalizers')})"
                    )
                continue
            if task is None:
                problems.append(f"{name}: vanished without being deleted")
                continue
            status = task.get("status") or {}
            phase = status.get("phase") or ""
            reasons = {
                x.get("reason") for x in status.get("conditions") or [] if x.get("type") == "Failed"
            }
            lost = phase == "Failed" and "JobLost" in reasons
            if phase != exp.phase and not (exp.lost_allowed and lost):
                problems.append(
                    f"{name}: phase {phase!r}, expected {exp.phase!r} (message {status.get('message')!r})"
                )
            if lost and not exp.lost_allowed:
                problems.append(f"{name}: Failed with JobLost, but nobody removed its Job")
            if c.FINALIZER_TASK_PROTECTION not in (task["metadata"].get("finalizers") or []):
                problems.append(f"{name}: no task-protection finalizer while it exists")
            if exp.job_removed or (lost and exp.unrecorded_removals):
                for job in mine:
                    problems.append(
                        f"{name}: its Job was removed, yet Job {job['metadata']['name']} exists"
                    )
                continue
            if len(mine) != 1:
                problems.append(f"{name}: {len(mine)} Jobs exist")
                continue
            job = mine[0]
            uid = job["metadata"]["uid"]
            if (status.get("jobRef") or {}).get("uid") != uid:
                problems.append(f"{name}: jobRef {status.get('jobRef')} does not name Job {uid}")
            if c.FINALIZER_JOB_PROTECTION in (job["metadata"].get("finalizers") or []):
                problems.append(
                    f"{name}: Job {job['metadata']['name']} still has the job-protection finalizer"
                )
            secret = secrets.get(job["metadata"]["name"])
            if secret is None:
                problems.append(f"{name}: no Secret {job['metadata']['name']}")
            else:
                owners = [o.get("uid") for o in secret["metadata"].get("ownerReferences") or []]
                if owners != [uid]:
                    problems.append(f"{name}: Secret owners {owners} are not exactly its Job {uid}")
        for sname, secret in sorted(secrets.items()):
            owners = {o.get("uid") for o in secret["metadata"].get("ownerReferences") or []}
            if not owners & job_uids:
                problems.append(f"leaked Secret {sname} (owners {sorted(owners)})")
        # No task-labelled child without its Task, by name and UID (the name carries its hash).
        children = [*(j for group in jobs.values() for j in group), *secrets.values()]
        for child in children:
            meta = child["metadata"]
            owner = tasks.get((meta.get("labels") or {}).get(c.LABEL_TASK_NAME, ""))
            if owner is None or meta["name"] != job_name(owner):
                problems.append(
                    f"orphaned {child.get('kind') or 'child'} {meta['name']} (its Task is gone)"
                )
        return problems

    def wait_settled(
        self, timeout: float, ledger: ChildLedger | None = None, interval: float = 0.5
    ) -> list[str]:
        """Poll until there are no violations or ``timeout`` s passed; return the last violations.

        Garbage collection and the last status writes trail the phases a little, so a check is
        only final once it stays clean or time is up.
        """
        deadline = time.monotonic() + timeout
        problems: list[str] = ["not checked"]
        while True:
            if self.settled():
                problems = self.violations(ledger)
                if not problems:
                    return []
            if time.monotonic() >= deadline:
                return problems if problems != ["not checked"] else self._unsettled()
            time.sleep(interval)

    def _unsettled(self) -> list[str]:
        tasks = self.tasks()
        out = []
        for name, exp in sorted(self.expectations.items()):
            task = tasks.get(name)
            if exp.deleted and task is not None:
                out.append(
                    f"{name}: deleted but still there (finalizers {task['metadata'].get('finalizers')}, "
                    f"message {(task.get('status') or {}).get('message')!r})"
                )
            elif not exp.deleted:
                status = (task or {}).get("status") or {}
                if task is None or (status.get("phase") or "") not in TERMINAL:
                    out.append(
                        f"{name}: not terminal (phase {status.get('phase')!r}, message {status.get('message')!r})"
                    )
        return out or self.violations()


def kubeconfig_via(control_plane: Any, server: str, path: Path, *, token: str) -> Path:
    """Write a kubeconfig of the control plane with ``server`` (e.g. a proxy) and the bearer
    ``token`` (the installed controller's) to ``path``."""
    import yaml

    config = control_plane.kubeconfig_dict()
    config["clusters"][0]["cluster"]["server"] = server
    config["users"][0]["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))
    return path


def summary_line(**figures: Any) -> str:
    return "chaos summary: " + ", ".join(f"{k}={v}" for k, v in figures.items())


class SideNamespace:
    """A namespace of its own, with a local MediaProcessingEntity, a Function, a Workflow and a
    few Tasks, that the chaos run deletes whole at a random moment (docs/operations.md,
    "Deleting a namespace"): afterwards it must be gone and no task-labelled Job or Secret of it
    may exist anywhere."""

    def __init__(self, api_client: client.ApiClient, name: str) -> None:
        from taskfsm_dev.kubelet import SimulatedKubelet

        self.api_client = api_client
        self.name = name
        self.rest = Rest(api_client)
        self.deleted_at: float | None = None
        client.CoreV1Api(api_client).create_namespace({"metadata": {"name": name}})
        self.kubelet = SimulatedKubelet(api_client, namespace=name).__enter__()

    def populate(self, tasks: int, rng: Any) -> None:
        from taskfsm.kube.resources import BY_KIND

        for obj in (
            objects.local_mpe("local", default=True),
            objects.function("slow", run_seconds=rng.uniform(0.5, 30.0)),
            objects.workflow("wf"),
        ):
            self.rest.create(BY_KIND[obj["kind"]], self.name, obj)
        for i in range(tasks):
            self.rest.create(
                TASKS, self.name, objects.task(f"s{i}", workflow_name="wf", function_name="slow")
            )

    def delete(self) -> None:
        self.deleted_at = time.monotonic()
        client.CoreV1Api(self.api_client).delete_namespace(
            self.name, propagation_policy="Background"
        )

    def gone(self) -> bool:
        try:
            self.rest.get(NAMESPACES, None, self.name)
        except NotFound:
            return True
        return False

    def children(self) -> list[str]:
        """Task-labelled Jobs and Secrets of this namespace's Tasks, in any namespace."""
        selector = f"{c.LABEL_TASK_NAMESPACE}={self.name}"
        return [
            f"{res.kind} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
            for res in (JOBS, SECRETS)
            for obj in self.rest.list(res, None, label_selector=selector)["items"]
        ]

    def close(self) -> None:
        self.kubelet.__exit__(None, None, None)
