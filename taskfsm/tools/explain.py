"""``taskfsm explain``: where a Task or a Workflow is in its lifecycle, and why.

For a Task: phase, message, times, conditions, the chosen MediaProcessingEntity and Function,
its Job (looked up where it runs: the main cluster, or a remote MediaProcessingEntity's cluster
through its kubeconfig Secret, read with the caller's credentials; a caller who may not read that
Secret gets a line saying so, :mod:`taskfsm.tools.job_location`) with, when pods of the Job failed,
each failed container's exit code, reason and termination message (never log contents: the line
says which ``kubectl logs`` or ``taskfsm logs`` shows them), the Task's most recent Events
(what ``kubectl describe`` lists), and the lifecycle diagram with the current state
highlighted. Pods and Events are read with the caller's credentials; one that may not read them
gets a line saying so instead.

For a Workflow: phase, message, times, the Task counters, conditions, its Tasks with their phases
and jobFailurePolicy, and the Workflow lifecycle diagram.

``name`` may be ``task/<name>`` or ``workflow/<name>`` (also ``tasks/``, ``workflows/``,
``wf/``); a bare name is a Task if one exists, else a Workflow. Diagram formats: ``text`` (the
phases with the current one marked, and what can happen next from it), ``mermaid``
(``machines.diagrams.render.render("mermaid", highlight)``) or ``none``.

Everything here only reads; every output line is also returned by the ``*_lines`` functions,
which tests and the demo use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.workflow.member_tasks import labelled_workflow
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import EVENTS, JOBS, PODS, Rest
from taskfsm.tools.job_location import job_site
from taskfsm.tools.tasks import split_kind

_COUNTERS = ("total", "active", "succeeded", "failed")
RECENT_EVENTS = 10
"""How many of a Task's Events ``explain`` shows (the most recent ones)."""
MAX_FAILED_PODS = 5
"""How many failed pods of a Job ``explain`` describes (the most recent ones)."""
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
"""The label the Job controller puts on the pods of a Job: the Job's UID."""


def main(api_client: Any, namespace: str, name: str, diagram_format: str = "text") -> int:
    """Print the explanation of the Task or Workflow ``name``; 0 when found, 1 otherwise."""
    rest = Rest(api_client)
    kind, bare = split_kind(name)
    if kind in (None, c.KIND_TASK):
        task = _get(rest, TASKS, namespace, bare)
        if task is not None:
            _print(task_lines(rest, task, diagram_format))
            return 0
    if kind in (None, c.KIND_WORKFLOW):
        workflow = _get(rest, WORKFLOWS, namespace, bare)
        if workflow is not None:
            _print(workflow_lines(rest, workflow, diagram_format))
            return 0
    what = {None: "Task or Workflow", c.KIND_TASK: "Task", c.KIND_WORKFLOW: "Workflow"}[kind]
    print(f"no {what} {bare!r} in namespace {namespace!r}")
    return 1


def workflow_summary(api_client: Any, namespace: str) -> list[str]:
    """One line per Workflow of ``namespace`` (phase, counters) and one per Task under it."""
    rest = Rest(api_client)
    lines = []
    for workflow in sorted(_list(rest, WORKFLOWS, namespace), key=lambda w: w["metadata"]["name"]):
        status = workflow.get("status") or {}
        name = workflow["metadata"]["name"]
        lines.append(f"Workflow {name}: {status.get('phase') or '(new)'} ({_counter_text(status)})")
        for task in tasks_of(rest, workflow):
            tstatus = task.get("status") or {}
            lines.append(
                f"  Task {task['metadata']['name']}: {tstatus.get('phase') or '(new)'}"
                f" (jobFailurePolicy {_policy(task)})"
            )
    return lines


# -- Task ------------------------------------------------------------------------------------


def task_lines(rest: Rest, task: dict[str, Any], diagram_format: str = "text") -> list[str]:
    """The explanation of a Task, line by line."""
    meta, spec = task["metadata"], task.get("spec") or {}
    status = task.get("status") or {}
    phase = status.get("phase") or ""
    lines = [
        f"Task {meta['namespace']}/{meta['name']}",
        f"  Workflow:   {(spec.get('workflowRef') or {}).get('name', '?')}",
        f"  Phase:      {phase or '(unset: not reconciled yet)'}",
    ]
    if meta.get("deletionTimestamp"):
        lines.append(f"  Deleting:   since {meta['deletionTimestamp']}")
    if status.get("message"):
        lines.append(f"  Message:    {status['message']}")
    lines += _times(status)
    lines += _conditions(status)
    for label, key in (("MPE", "mediaProcessingEntityRef"), ("Function", "functionRef")):
        ref = status.get(key)
        lines.append(f"  {label + ':':<11} {ref_text(ref) if ref else '(not chosen yet)'}")
    lines += _job_lines(rest, task)
    lines += _event_lines(rest, task)
    lines += _diagram_lines(
        c.KIND_TASK, phase, diagram_format, deleting=bool(meta.get("deletionTimestamp"))
    )
    return lines


def _job_lines(rest: Rest, task: dict[str, Any]) -> list[str]:
    ref = (task.get("status") or {}).get("jobRef")
    if not ref:
        return ["  Job:        (none recorded)"]
    site = job_site(rest, task)
    namespace = site.namespace
    lines = [
        f"  Job:        {namespace}/{ref.get('name')} (uid {ref.get('uid') or '?'})",
        f"              on {site.where}",
    ]
    if site.rest is None:
        return [*lines, f"              cannot be read: {site.problem}"]
    try:
        job = site.rest.get(JOBS, namespace, ref["name"])
    except NotFound:
        return [
            *lines,
            "              not found there (deleted, or removed after ttlSecondsAfterFinished)",
        ]
    except KubeError as exc:
        return [*lines, f"              could not read it: {exc}"]
    job_status = job.get("status") or {}
    if job["metadata"].get("uid") != ref.get("uid"):
        lines.append(f"              the Job under that name has uid {job['metadata'].get('uid')}")
    counts = ", ".join(f"{k} {job_status.get(k, 0)}" for k in ("active", "succeeded", "failed"))
    lines.append(f"              pods: {counts}")
    true = [
        cond["type"] for cond in job_status.get("conditions") or [] if cond.get("status") == "True"
    ]
    lines.append(f"              conditions: {', '.join(true) or '(none True: still running)'}")
    if job["metadata"].get("deletionTimestamp"):
        lines.append("              being deleted")
    # The Job controller sets FailureTarget/Failed before it has counted the failed pods.
    if job_status.get("failed") or c.JOB_FAILED_CONDITIONS & set(true):
        meta = task["metadata"]
        hint = f"taskfsm logs -n {meta['namespace']} {meta['name']}" if site.remote else ""
        lines += _failed_pod_lines(site.rest, job, hint)
    return lines


def _failed_pod_lines(rest: Rest, job: dict[str, Any], logs_hint: str = "") -> list[str]:
    """Each failed pod of ``job`` (newest first): its reason, and for every container that
    terminated with a non-zero exit code: exit code, reason, termination message; then the
    command that shows its logs (``logs_hint`` for a Job kubectl cannot reach directly)."""
    meta = job["metadata"]
    try:
        pods = _list(rest, PODS, meta["namespace"], label_selector=f"{JOB_UID_LABEL}={meta['uid']}")
    except KubeError as exc:
        return [f"              failed pods: could not read them: {exc}"]
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
    if not failed:
        return ["              failed pods: (their pods are gone)"]
    failed.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "", reverse=True)
    lines = [f"              failed pods: {len(failed)}"]
    for pod in failed[:MAX_FAILED_PODS]:
        status = pod.get("status") or {}
        why = " ".join(x for x in (status.get("reason"), status.get("message")) if x)
        lines.append(f"                {pod['metadata']['name']}{'  ' + why if why else ''}")
        statuses = [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        for container in statuses:
            terminated = _last_failure(container)
            if terminated is None:
                continue
            text = f"exit code {terminated.get('exitCode')}"
            if terminated.get("reason"):
                text += f", reason {terminated['reason']}"
            if terminated.get("signal"):
                text += f", signal {terminated['signal']}"
            lines.append(f"                  container {container.get('name')}: {text}")
            message = (terminated.get("message") or "").strip()
            if message:
                lines += [f"                    message: {line}" for line in message.splitlines()]
        lines.append(
            f"                  logs: {logs_hint}"
            if logs_hint
            else f"                  logs: kubectl logs -n {meta['namespace']} "
            f"{pod['metadata']['name']} --all-containers"
        )
    if len(failed) > MAX_FAILED_PODS:
        lines.append(
            f"                ({len(failed) - MAX_FAILED_PODS} older failed pods not shown)"
        )
    return lines


def _last_failure(container: dict[str, Any]) -> dict[str, Any] | None:
    """The container's ``terminated`` state with a non-zero exit code: the current one, else
    the last one before a restart; ``None`` when it did not fail."""
    for key in ("state", "lastState"):
        terminated = (container.get(key) or {}).get("terminated")
        if terminated and terminated.get("exitCode"):
            return dict(terminated)
    return None


def task_events(rest: Rest, task: dict[str, Any]) -> list[dict[str, Any]]:
    """The Task's Events, oldest first (as ``kubectl describe`` lists them); raises
    ``KubeError`` when they cannot be read."""
    meta = task["metadata"]
    selector = f"regarding.kind={c.KIND_TASK},regarding.name={meta['name']}"
    if meta.get("uid"):
        selector += f",regarding.uid={meta['uid']}"
    events = _list(rest, EVENTS, meta["namespace"], field_selector=selector)
    events.sort(key=_event_order)
    return events


def event_row(event: dict[str, Any]) -> tuple[str, str, str, str]:
    """(time, type, reason, note) of an Event as explain shows it (repeats counted)."""
    count = (event.get("series") or {}).get("count") or event.get("deprecatedCount") or 1
    repeat = f" (x{count})" if count > 1 else ""
    note = " ".join((event.get("note") or "").split())
    return (
        _event_time(event) or "?",
        event.get("type") or "",
        event.get("reason") or "",
        note + repeat,
    )


def phase_path(task: dict[str, Any], events: list[dict[str, Any]] | None) -> list[str]:
    """The phases the Task went through, oldest first (``""``: new, before its first phase).

    A Task's phases only move forward (Initializing, JobPending, Running, then Succeeded or
    Failed), so the path is every phase known to have been visited, in that order. Known from
    what the status keeps -- ``queuedTime`` (Initializing), the ``Initialized`` condition
    (JobPending), ``startTime`` (Running) and the phase itself -- and from the controller's
    phase-change Events while they last (each note is the path of one reconcile,
    ``JobPending -> Running: ...``): Warnings always, Normal ones with ``--task-phase-events``;
    Events expire (one hour by default).
    """
    status = task.get("status") or {}
    phase = status.get("phase") or ""
    order = [p.value for p in c.TaskPhase]
    visited: set[str] = set()
    for event in events or []:
        note = (event.get("note") or "").split(":", 1)[0]
        if event.get("reason") not in {"", *order} or " -> " not in note:
            continue
        visited.update(name.strip() for name in note.split(" -> "))
    if phase:
        initialized: dict[str, Any] = next(
            (x for x in status.get("conditions") or [] if x.get("type") == "Initialized"), {}
        )
        visited.update({c.TaskPhase.INITIALIZING.value, phase})
        if initialized.get("status") == "True" or status.get("startTime"):
            visited.add(c.TaskPhase.JOB_PENDING.value)
        if status.get("startTime"):
            visited.add(c.TaskPhase.RUNNING.value)
    return ["", *(name for name in order if name in visited)]


def _event_lines(rest: Rest, task: dict[str, Any]) -> list[str]:
    """The Task's path and its most recent Events, oldest first."""
    try:
        events = task_events(rest, task)
    except KubeError as exc:
        path = phase_path(task, None)
        return [
            f"  Path:       {' -> '.join(p or '(new)' for p in path)} (from its status)",
            f"  Events:     could not read them: {exc}",
        ]
    path = phase_path(task, events)
    lines = [f"  Path:       {' -> '.join(p or '(new)' for p in path)}"]
    if not events:
        return [*lines, "  Events:     (none)"]
    shown = events[-RECENT_EVENTS:]
    lines.append(
        "  Events:"
        + (f" ({len(events) - len(shown)} older not shown)" if len(events) > len(shown) else "")
    )
    for event in shown:
        when, type_, reason, note = event_row(event)
        lines.append(f"    {when:<20} {type_:<8} {reason:<16} {note}")
    return lines


def _event_order(event: dict[str, Any]) -> tuple[str, int]:
    """Sort key: when the Event last happened (microseconds where written), then its
    resourceVersion (etcd's order of writes)."""
    version = (event.get("metadata") or {}).get("resourceVersion") or ""
    return _event_time(event, exact=True), int(version) if version.isdigit() else 0


def _event_time(event: dict[str, Any], *, exact: bool = False) -> str:
    """When the Event last happened, to the second (``exact``: as written): its series' last
    observation, else its eventTime, else the deprecated timestamps (Events written through
    core/v1)."""
    for value in (
        (event.get("series") or {}).get("lastObservedTime"),
        event.get("eventTime"),
        event.get("deprecatedLastTimestamp"),
        event.get("deprecatedFirstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        if value:
            return str(value) if exact else str(value)[:19] + "Z"
    return ""


# -- Workflow --------------------------------------------------------------------------------


def tasks_of(rest: Rest, workflow: dict[str, Any]) -> list[dict[str, Any]]:
    """The Workflow's Tasks: those carrying its two labels (counted) and those naming it in
    ``spec.workflowRef`` that the Task controller has not labelled yet, sorted by name."""
    meta = workflow["metadata"]
    found = {}
    for task in _list(rest, TASKS, meta["namespace"]):
        labelled = labelled_workflow(task) == f"{meta['namespace']}/{meta['name']}"
        named = ((task.get("spec") or {}).get("workflowRef") or {}).get("name") == meta["name"]
        if labelled or named:
            found[task["metadata"]["name"]] = task
    return [found[name] for name in sorted(found)]


def workflow_lines(rest: Rest, workflow: dict[str, Any], diagram_format: str = "text") -> list[str]:
    """The explanation of a Workflow, line by line."""
    meta = workflow["metadata"]
    status = workflow.get("status") or {}
    phase = status.get("phase") or ""
    lines = [
        f"Workflow {meta['namespace']}/{meta['name']}",
        f"  Phase:      {phase or '(unset: not reconciled yet)'}",
        f"  Tasks:      {_counter_text(status)}",
    ]
    if meta.get("deletionTimestamp"):
        lines.append(
            f"  Deleting:   since {meta['deletionTimestamp']}; waits until no Task is active"
        )
    if c.FINALIZER_WORKFLOW_PROTECTION not in (meta.get("finalizers") or []):
        lines.append("  Finalizer:  (not added yet)")
    if status.get("message"):
        lines.append(f"  Message:    {status['message']}")
    lines += _times(status)
    if phase == c.WorkflowPhase.AWAITING_COMPLETION:
        lines.append(
            "  Waiting:    succeeds once workflowTerminationWaitingDuration (default 20s) has "
            "passed since endTime without a new active Task"
        )
    lines += _conditions(status)
    tasks = tasks_of(rest, workflow)
    lines.append(f"  Its Tasks:  {len(tasks) or '(none)'}")
    for task in tasks:
        tstatus = task.get("status") or {}
        labelled = labelled_workflow(task) == f"{meta['namespace']}/{meta['name']}"
        counted = "" if labelled else "  (not counted yet)"
        message = f"  {tstatus['message']}" if tstatus.get("message") else ""
        lines.append(
            f"    {task['metadata']['name']:<24} {tstatus.get('phase') or '(new)':<13}"
            f" {_policy(task):<12}{counted}{message}"
        )
    lines += _diagram_lines(
        c.KIND_WORKFLOW, phase, diagram_format, deleting=bool(meta.get("deletionTimestamp"))
    )
    return lines


# -- shared ----------------------------------------------------------------------------------


def _diagram_lines(
    kind: str, phase: str, diagram_format: str, *, deleting: bool = False
) -> list[str]:
    if diagram_format == "none":
        return []
    from machines import chart_data
    from machines.diagrams import render
    from machines.diagrams.charts import TASK, WORKFLOW

    chart = WORKFLOW if kind == c.KIND_WORKFLOW else TASK
    highlight = "deleting" if deleting else chart.phase_states.get(phase, chart.phase_states[""])
    if diagram_format == "mermaid":
        return ["", render.render("mermaid", highlight, chart).decode().rstrip("\n")]
    names = [
        f"[{p or 'New'}]" if s == highlight else (p or "New") for p, s in chart.phase_states.items()
    ]
    marked = " -> ".join(names[:-2]) + " -> " + " | ".join(names[-2:])
    if deleting:
        marked += " ... [Deleting] -> Finalized"
    lines = [
        "",
        f"Lifecycle ({kind}): {marked}",
        "  Transitions from here (event [guards] / actions):",
    ]
    by_id = {s.id: s for s in chart_data.states(chart.machine)}
    scope = {highlight}
    parent = by_id[highlight].parent
    while parent is not None:
        scope.add(parent)
        parent = by_id[parent].parent
    for t in chart_data.transitions(chart.machine):
        if t.source in scope and t.event != "error.execution":
            target = "stays" if t.target is None else f"-> {by_id[t.target].name}"
            lines.append(f"    {t.label or '(eventless)'}  {target}")
    return lines


def _times(status: dict[str, Any]) -> list[str]:
    times = [(k, status.get(k)) for k in ("queuedTime", "startTime", "endTime")]
    return [f"  {k + ':':<11} {v}" for k, v in times if v]


def _conditions(status: dict[str, Any]) -> list[str]:
    conds = status.get("conditions") or []
    if not conds:
        return ["  Conditions: (none)"]
    lines = ["  Conditions:"]
    for cond in conds:
        extra = " ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
        lines.append(
            f"    {cond['type']:<12} {cond['status']:<6} "
            f"since {cond.get('lastTransitionTime', '?')}{'  ' + extra if extra else ''}"
        )
    return lines


def _counter_text(status: dict[str, Any]) -> str:
    if all(status.get(k) is None for k in _COUNTERS):
        return "not counted yet"
    return ", ".join(f"{k} {status.get(k) or 0}" for k in _COUNTERS)


def _policy(task: dict[str, Any]) -> str:
    policy = (task.get("spec") or {}).get("jobFailurePolicy") or {}
    return policy.get("defaultAction") or "FailWorkflow"


def ref_text(ref: dict[str, Any]) -> str:
    """A status reference as explain (and the UI's Task page) shows it: ``Kind ns/name``."""
    where = f"{ref['namespace']}/" if ref.get("namespace") else ""
    return f"{ref.get('kind', '?')} {where}{ref.get('name', '?')}"


def _get(rest: Rest, res: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return rest.get(res, namespace, name)
    except NotFound:
        return None


def _list(
    rest: Rest,
    res: Any,
    namespace: str,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> list[dict[str, Any]]:
    found = rest.list(res, namespace, label_selector=label_selector, field_selector=field_selector)
    return found.get("items") or []


def _print(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)
