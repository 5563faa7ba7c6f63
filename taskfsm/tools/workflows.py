"""Workflows in ``taskfsm list``, ``get``, ``wait`` and ``logs``, addressed as ``workflow/NAME``
(kubectl's TYPE/NAME; also ``workflows/`` and ``wf/``).

* A Workflow's row (:func:`row`): ``NAME PHASE REASON CONDITIONS TASKS PENDING RUNNING SUCCEEDED
  FAILED AGE``: the phase, the reason as a Task's (:func:`taskfsm.tools.tasks.task_reason`), the
  types of its conditions that are True, and its Tasks counted by phase (PENDING: not running
  yet, i.e. New, Initializing or JobPending); ``-o wide`` adds ``STARTED``, ``ENDED`` and
  ``MESSAGE``. A Task belongs to the Workflow its labels name, else the one its
  ``spec.workflowRef`` names (as the Workflow controller counts it).
* :func:`logs_main` prints the logs of each of the Workflow's Tasks' Jobs in turn (the Task
  logs path, :func:`taskfsm.tools.logs.logs_main`), every line prefixed with ``[TASK]``.

``wait workflow/NAME`` is :func:`taskfsm.tools.tasks.wait_main` on Workflows: both end in
Succeeded or Failed and never change again.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from taskfsm.api import constants as c
from taskfsm.controllers.workflow.member_tasks import task_workflow_key, workflow_key
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import Rest
from taskfsm.tools import logs as task_logs
from taskfsm.tools import tasks as task_tools

COLUMNS = (
    "NAME",
    "PHASE",
    "REASON",
    "CONDITIONS",
    "TASKS",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "AGE",
)
WIDE = ("STARTED", "ENDED", "MESSAGE")


def key(workflow: dict[str, Any]) -> str:
    """The key Tasks name their Workflow by (:func:`task_workflow_key`)."""
    meta = workflow["metadata"]
    return workflow_key(meta["namespace"], meta["name"])


def tasks_of(workflow: dict[str, Any], tasks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Those of ``tasks`` that belong to ``workflow``."""
    wanted = key(workflow)
    return [t for t in tasks if task_workflow_key(t) == wanted]


def counts(tasks: Iterable[dict[str, Any]]) -> list[str]:
    """``TASKS PENDING RUNNING SUCCEEDED FAILED``: the Tasks counted by phase."""
    phases = [(t.get("status") or {}).get("phase") or "" for t in tasks]
    pending = sum(p in c.TASK_PRE_RUNNING_PHASES for p in phases)
    by_phase = [phases.count(p) for p in (c.TaskPhase.RUNNING, c.TaskPhase.SUCCEEDED)]
    return [str(n) for n in (len(phases), pending, *by_phase, phases.count(c.TaskPhase.FAILED))]


def conditions(workflow: dict[str, Any]) -> str:
    """The types of the conditions that are True, as kubectl shows a Node's (``Ready``)."""
    true = [
        str(cond.get("type"))
        for cond in (workflow.get("status") or {}).get("conditions") or []
        if cond.get("status") == c.ConditionStatus.TRUE
    ]
    return ",".join(true) or "<none>"


def header(*, wide: bool, all_namespaces: bool) -> list[str]:
    """The column names of the Workflow table."""
    return [*(("NAMESPACE",) if all_namespaces else ()), *COLUMNS, *(WIDE if wide else ())]


def row(
    workflow: dict[str, Any],
    tasks: Iterable[dict[str, Any]],
    *,
    wide: bool = False,
    now: datetime | None = None,
) -> list[str]:
    """The table cells of one Workflow (without the namespace); ``tasks``: its Tasks."""
    meta, status = workflow["metadata"], workflow.get("status") or {}
    phase = status.get("phase") or "New"
    if meta.get("deletionTimestamp"):
        phase = f"{phase} (deleting)"
    cells = [
        meta["name"],
        phase,
        task_tools.task_reason(workflow),
        conditions(workflow),
        *counts(tasks),
        task_tools.age(meta.get("creationTimestamp"), now),
    ]
    if wide:
        cells += [
            status.get("startTime") or "",
            status.get("endTime") or "",
            " ".join((status.get("message") or "").split()),
        ]
    return cells


# -- logs -------------------------------------------------------------------------------------


class Prefixed:
    """A binary sink that writes every line to ``sink`` with ``prefix`` before it."""

    def __init__(self, sink: task_logs.Sink, prefix: str) -> None:
        self.sink = sink
        self.prefix = prefix.encode()
        self._partial = b""

    def write(self, data: bytes) -> int:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self.sink.write(self.prefix + line + b"\n")
        return len(data)

    def flush(self) -> None:
        """Write an unfinished last line (a log need not end with a newline)."""
        if self._partial:
            self.sink.write(self.prefix + self._partial + b"\n")
            self._partial = b""
        self.sink.flush()


def logs_main(
    rest: Rest,
    namespace: str,
    name: str,
    *,
    tail: int | None = None,
    container: str | None = None,
    out: task_logs.Sink | None = None,
) -> int:
    """``taskfsm logs workflow/NAME``: each Task's Job logs in turn, by Task name, every line
    prefixed ``[TASK] ``; 1 when the Workflow does not exist or a Task's logs could not be read
    (that Task's error line on stderr, the others are printed)."""
    sink = out or sys.stdout.buffer
    try:
        workflow = rest.get(WORKFLOWS, namespace, name)
    except NotFound:
        print(f'error: Workflow "{name}" not found in namespace {namespace}', file=sys.stderr)
        return 1
    tasks = tasks_of(workflow, task_tools.list_all(rest, TASKS, namespace))
    if not tasks:
        print(f"error: Workflow {name} has no Tasks", file=sys.stderr)
        return 1
    code = 0
    for task in tasks:
        task_name = task["metadata"]["name"]
        prefixed = Prefixed(sink, f"[{task_name}] ")
        found = task_logs.logs_main(
            rest, namespace, task_name, tail=tail, container=container, out=prefixed
        )
        prefixed.flush()
        code = max(code, found)
    return code
