"""What ``taskfsm list`` and ``get`` show of Tasks and Workflows as tables, once or with
``--watch`` (``-w``) as kubectl does: the current view, then a row each time an object in it
changes, until Ctrl-C (exit 0).

A view (:class:`TaskList`, :class:`WorkflowList`, :class:`Get`) names the kinds it reads and
turns the objects into :class:`Line` rows: all of them for the first print, and those an event
changed afterwards (a Task's event also changes its Workflow's row: the Task counts).

The watch is the controller's own list-then-watch loop (:class:`taskfsm.kube.informer.Informer`,
one per kind, with the user's credentials): it lists, watches from the list's resourceVersion,
lists again at once on 410 Gone and backs off on other failures. Its events reach the main
thread through a queue; the main thread keeps the objects and prints. A row is printed again
only when one of its cells other than AGE changed; a deleted object's row reads ``Deleted`` in
its PHASE column. When the rows switch from one kind to the other, that kind's header is
printed again. With ``-o json|yaml|name`` every changed object of the view is printed whole
(or by name) instead.
"""

from __future__ import annotations

import functools
import queue
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from taskfsm.api import constants as c
from taskfsm.controllers.workflow.member_tasks import task_workflow_key
from taskfsm.kube.informer import DELETED, Informer
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import Resource, Rest
from taskfsm.tools import tasks as task_tools
from taskfsm.tools import workflows as workflow_tools

RESOURCES: dict[str, Resource] = {c.KIND_TASK: TASKS, c.KIND_WORKFLOW: WORKFLOWS}
SYNC_POLL = 0.5
"""Seconds between looks at whether the first lists are done (Ctrl-C is seen meanwhile)."""

Key = tuple[str, str, str]
"""(kind, namespace, name) of an object."""


def key_of(kind: str, obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return kind, meta.get("namespace") or "", meta["name"]


@dataclass
class Objects:
    """The objects a view reads, by kind and (namespace, name)."""

    by_kind: dict[str, dict[Key, dict[str, Any]]] = field(
        default_factory=lambda: {kind: {} for kind in RESOURCES}
    )

    def apply(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        store = self.by_kind[kind]
        if event == DELETED:
            store.pop(key_of(kind, obj), None)
        else:
            store[key_of(kind, obj)] = obj

    def all(self, kind: str) -> list[dict[str, Any]]:
        """The objects of ``kind``, sorted by namespace and name."""
        return [self.by_kind[kind][k] for k in sorted(self.by_kind[kind])]

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.by_kind[kind].get((kind, namespace, name))

    def workflow_of(self, task: dict[str, Any]) -> dict[str, Any] | None:
        namespace, _, name = (task_workflow_key(task) or "/").partition("/")
        return self.get(c.KIND_WORKFLOW, namespace, name)


@dataclass(frozen=True)
class Line:
    """One row of a table: ``kind`` names its table (and its header)."""

    kind: str
    key: Key
    cells: list[str]


@dataclass
class View:
    """What is shown: ``sources`` the kinds read, each with its label selector."""

    namespace: str | None
    output: str | None = None
    sources: dict[str, str | None] = field(default_factory=dict)

    @property
    def all_namespaces(self) -> bool:
        return self.namespace is None

    @property
    def wide(self) -> bool:
        return self.output == "wide"

    def header(self, kind: str) -> list[str]:
        if kind == c.KIND_TASK:
            return task_tools.header(wide=self.wide, all_namespaces=self.all_namespaces)
        return workflow_tools.header(wide=self.wide, all_namespaces=self.all_namespaces)

    def shown(self, objects: Objects) -> list[tuple[str, dict[str, Any]]]:
        """The objects in view as (kind, object), in the order they are printed."""
        raise NotImplementedError

    def changed(self, objects: Objects, kind: str, obj: dict[str, Any]) -> list[Line]:
        """The rows an event on ``obj`` changed (``objects`` already holds the change)."""
        raise NotImplementedError

    def missing(self, objects: Objects) -> list[str]:
        """Error lines for objects named but not found."""
        return []

    def selects(self, kind: str, obj: dict[str, Any]) -> bool:
        """Whether ``obj`` is printed whole with ``-o json|yaml|name``."""
        raise NotImplementedError

    def selected(self, objects: Objects) -> list[tuple[str, dict[str, Any]]]:
        return [(kind, obj) for kind, obj in self.shown(objects) if self.selects(kind, obj)]

    def lines(self, objects: Objects) -> list[Line]:
        return [self.line(objects, kind, obj) for kind, obj in self.shown(objects)]

    def line(
        self, objects: Objects, kind: str, obj: dict[str, Any], *, deleted: bool = False
    ) -> Line:
        now = datetime.now(UTC)
        if kind == c.KIND_TASK:
            cells = task_tools.row(obj, wide=self.wide, now=now)
        else:
            tasks = workflow_tools.tasks_of(obj, objects.all(c.KIND_TASK))
            cells = workflow_tools.row(obj, tasks, wide=self.wide, now=now)
        if deleted:
            cells[1] = "Deleted"
        if self.all_namespaces:
            cells.insert(0, obj["metadata"].get("namespace") or "")
        return Line(kind, key_of(kind, obj), cells)

    def event_lines(
        self, objects: Objects, kind: str, event: str, obj: dict[str, Any]
    ) -> list[Line]:
        """The rows to print for one watch event (after ``objects`` took it in)."""
        if event != DELETED:
            return self.changed(objects, kind, obj)
        lines = self.changed(objects, kind, obj)
        return [
            self.line(objects, kind, obj, deleted=True) if line.key == key_of(kind, obj) else line
            for line in lines
        ]


@dataclass
class TaskList(View):
    """``taskfsm list``: Tasks, filtered by Workflow name and phase."""

    workflow: str | None = None
    phase: str | None = None

    def matches(self, task: dict[str, Any]) -> bool:
        ref = ((task.get("spec") or {}).get("workflowRef") or {}).get("name")
        phase = (task.get("status") or {}).get("phase") or ""
        wanted = "" if self.phase == "New" else self.phase
        return (not self.workflow or ref == self.workflow) and (
            self.phase is None or phase == wanted
        )

    def shown(self, objects: Objects) -> list[tuple[str, dict[str, Any]]]:
        return [(c.KIND_TASK, t) for t in objects.all(c.KIND_TASK) if self.matches(t)]

    def selects(self, kind: str, obj: dict[str, Any]) -> bool:
        return kind == c.KIND_TASK and self.matches(obj)

    def changed(self, objects: Objects, kind: str, obj: dict[str, Any]) -> list[Line]:
        return [self.line(objects, kind, obj)] if self.matches(obj) else []


@dataclass
class WorkflowList(View):
    """``taskfsm list workflows``: Workflows (filtered by phase) with their Tasks counted."""

    phase: str | None = None

    def matches(self, workflow: dict[str, Any]) -> bool:
        phase = (workflow.get("status") or {}).get("phase") or ""
        return self.phase is None or phase == ("" if self.phase == "New" else self.phase)

    def shown(self, objects: Objects) -> list[tuple[str, dict[str, Any]]]:
        return [(c.KIND_WORKFLOW, w) for w in objects.all(c.KIND_WORKFLOW) if self.matches(w)]

    def selects(self, kind: str, obj: dict[str, Any]) -> bool:
        return kind == c.KIND_WORKFLOW and self.matches(obj)

    def changed(self, objects: Objects, kind: str, obj: dict[str, Any]) -> list[Line]:
        workflow = obj if kind == c.KIND_WORKFLOW else objects.workflow_of(obj)
        if workflow is None or not self.matches(workflow):
            return []
        return [self.line(objects, c.KIND_WORKFLOW, workflow)]


@dataclass
class Get(View):
    """``taskfsm get NAME...``: named Tasks, and named Workflows with each of their Tasks."""

    tasks: Sequence[str] = ()
    workflows: Sequence[str] = ()

    def _named_workflow(self, objects: Objects, task: dict[str, Any]) -> dict[str, Any] | None:
        workflow = objects.workflow_of(task)
        named = workflow is not None and workflow["metadata"]["name"] in self.workflows
        return workflow if named else None

    def shown(self, objects: Objects) -> list[tuple[str, dict[str, Any]]]:
        namespace = self.namespace or ""
        found = [objects.get(c.KIND_WORKFLOW, namespace, name) for name in self.workflows]
        workflows = [(c.KIND_WORKFLOW, w) for w in found if w is not None]
        tasks = [
            (c.KIND_TASK, t)
            for t in objects.all(c.KIND_TASK)
            if t["metadata"]["name"] in self.tasks or self._named_workflow(objects, t)
        ]
        return workflows + tasks

    def changed(self, objects: Objects, kind: str, obj: dict[str, Any]) -> list[Line]:
        if kind == c.KIND_WORKFLOW:
            named = obj["metadata"]["name"] in self.workflows
            return [self.line(objects, kind, obj)] if named else []
        workflow = self._named_workflow(objects, obj)
        lines = []
        if obj["metadata"]["name"] in self.tasks or workflow is not None:
            lines.append(self.line(objects, kind, obj))
        if workflow is not None:
            lines.append(self.line(objects, c.KIND_WORKFLOW, workflow))
        return lines

    def selects(self, kind: str, obj: dict[str, Any]) -> bool:
        """Only the objects named: ``get workflow/NAME -o json`` is the Workflow itself."""
        named = self.workflows if kind == c.KIND_WORKFLOW else self.tasks
        return obj["metadata"]["name"] in named

    def missing(self, objects: Objects) -> list[str]:
        namespace = self.namespace or ""
        return [
            f'Error: {kind} "{name}" not found in namespace {namespace}'
            for kind, names in ((c.KIND_TASK, self.tasks), (c.KIND_WORKFLOW, self.workflows))
            for name in names
            if objects.get(kind, namespace, name) is None
        ]


# -- printing ---------------------------------------------------------------------------------


class Printer:
    """Prints the view's tables once, then the rows events changed (module docstring)."""

    def __init__(self, view: View, out: TextIO | None = None) -> None:
        self.view = view
        self.out = out or sys.stdout
        self.widths: dict[str, list[int]] = {}
        self.printed: dict[Key, list[str]] = {}
        self.last_kind: str | None = None

    def first(self, objects: Objects, *, single: bool = False) -> None:
        """Each kind's rows under its header, a blank line between the tables."""
        lines = self.view.lines(objects)
        kinds = list(dict.fromkeys(line.kind for line in lines))
        for i, kind in enumerate(kinds):
            head = self.view.header(kind)
            rows = [line for line in lines if line.kind == kind]
            self.widths[kind] = task_tools.column_widths([head, *(r.cells for r in rows)])
            text = task_tools.format_table(head, [r.cells for r in rows])
            self.out.write(("\n" if i else "") + "".join(f"{t}\n" for t in text))
            for line in rows:
                self.printed[line.key] = self._signature(line)
            self.last_kind = kind
        self.out.flush()

    def event(self, objects: Objects, kind: str, event: str, obj: dict[str, Any]) -> None:
        """The rows whose cells (AGE aside) changed since they were last printed."""
        for line in self.view.event_lines(objects, kind, event, obj):
            signature = self._signature(line)
            if self.printed.get(line.key) == signature:
                continue
            self.printed[line.key] = signature
            head = self.view.header(line.kind)
            widths = self.widths.setdefault(line.kind, [len(cell) for cell in head])
            widths[:] = [max(w, len(cell)) for w, cell in zip(widths, line.cells, strict=True)]
            if line.kind != self.last_kind:
                self.out.write(task_tools.pad(head, widths) + "\n")
                self.last_kind = line.kind
            self.out.write(task_tools.pad(line.cells, widths) + "\n")
        self.out.flush()

    def _signature(self, line: Line) -> list[str]:
        age = self.view.header(line.kind).index("AGE")
        return line.cells[:age] + line.cells[age + 1 :]


class ObjectPrinter:
    """``-o json|yaml|name``: the objects in view, then each one an event changed."""

    def __init__(self, view: View, out: TextIO | None = None) -> None:
        self.view = view
        self.out = out or sys.stdout
        self.printed: dict[Key, str] = {}

    def first(self, objects: Objects, *, single: bool = False) -> None:
        """One object (``single``), else a ``v1`` ``List``; or their names."""
        shown = self.view.selected(objects)
        typed = [typed_object(kind, obj) for kind, obj in shown]
        task_tools.print_objects(typed, self.view.output, single=single, out=self.out)
        self.out.flush()
        for kind, obj in shown:
            self.printed[key_of(kind, obj)] = _version(obj)

    def event(self, objects: Objects, kind: str, event: str, obj: dict[str, Any]) -> None:
        """``obj`` when it is in view and its resourceVersion is new (kubectl's -w -o)."""
        if not self.view.selects(kind, obj) or self.printed.get(key_of(kind, obj)) == _version(obj):
            return
        self.printed[key_of(kind, obj)] = _version(obj)
        if self.view.output == "yaml":
            self.out.write("---\n")
        task_tools.print_objects(
            [typed_object(kind, obj)], self.view.output, single=True, out=self.out
        )
        self.out.flush()


def _version(obj: dict[str, Any]) -> str:
    return str(obj["metadata"].get("resourceVersion") or "")


def typed_object(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its apiVersion and kind first (list items come without them)."""
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": c.API_VERSION, "kind": kind, **rest}


# -- once, or watching ------------------------------------------------------------------------


def listed(rest: Rest, view: View) -> Objects:
    """The objects of the view's kinds, listed once (paged)."""
    objects = Objects()
    for kind, selector in view.sources.items():
        for obj in task_tools.list_all(rest, RESOURCES[kind], view.namespace, selector):
            objects.apply(kind, "ADDED", obj)
    return objects


def show(
    view: View, objects: Objects, *, single: bool = False, out: TextIO | None = None
) -> Printer | ObjectPrinter:
    """Print the view once (errors for named objects that do not exist on stderr); the printer,
    to print what changes next. ``single``: one object named, itself with ``-o json|yaml``."""
    for line in view.missing(objects):
        print(line, file=sys.stderr)
    shown = (
        view.selected(objects) if view.output in ("json", "yaml", "name") else view.shown(objects)
    )
    printer = (
        ObjectPrinter(view, out) if view.output in ("json", "yaml", "name") else Printer(view, out)
    )
    if not shown and not isinstance(view, Get) and view.output not in ("json", "yaml"):
        kinds = "Workflows" if isinstance(view, WorkflowList) else "Tasks"
        where = f"namespace {view.namespace}" if view.namespace else "any namespace"
        print(f"No {kinds} found in {where}.", file=sys.stderr)
    elif shown or view.output in ("json", "yaml"):
        printer.first(objects, single=single)
    return printer


def show_once(rest: Rest, view: View, *, single: bool = False) -> int:
    """``list``/``get`` without ``--watch``: 1 when a named object does not exist."""
    objects = listed(rest, view)
    show(view, objects, single=single)
    return 1 if view.missing(objects) else 0


def watch(rest: Rest, view: View, *, out: TextIO | None = None) -> int:
    """``--watch``: print the view, then its changed rows until Ctrl-C (0); 1 when the first
    list fails (its error on stderr) or no object named exists."""
    # Ctrl-C ends the watch even when the shell that started us ignored SIGINT (a background job
    # of a script does): Python keeps an inherited SIG_IGN and would never raise KeyboardInterrupt.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    events: queue.Queue[tuple[str, str, dict[str, Any]]] = queue.Queue()
    informers = []
    for kind, selector in view.sources.items():
        informer = Informer(
            rest,
            RESOURCES[kind],
            namespace=view.namespace,
            label_selector=selector,
            name=f"cli-{RESOURCES[kind].plural}",
        )
        informer.add_handler(functools.partial(_enqueue, events, kind))
        informers.append(informer)
    try:
        for informer in informers:
            informer.start()
        for informer in informers:
            while not informer.wait_synced(SYNC_POLL):
                if informer.failures:
                    print(f"Error: {informer.last_error}", file=sys.stderr)
                    return 1
        objects = Objects()
        while not events.empty():
            objects.apply(*events.get_nowait())
        printer = show(view, objects, out=out)
        if isinstance(view, Get) and not view.shown(objects):
            return 1
        while True:
            try:
                kind, event, obj = events.get(timeout=SYNC_POLL)
            except queue.Empty:
                continue
            objects.apply(kind, event, obj)
            printer.event(objects, kind, event, obj)
    except KeyboardInterrupt:
        return 0
    finally:
        for informer in informers:
            # Their threads are daemons: Ctrl-C ends the command at once, never after the joins.
            informer.stop(timeout=0.5)


def _enqueue(
    events: queue.Queue[tuple[str, str, dict[str, Any]]],
    kind: str,
    event: str,
    obj: dict[str, Any],
) -> None:
    events.put((kind, event, obj))
