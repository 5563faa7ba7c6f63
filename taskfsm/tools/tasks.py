"""``taskfsm list``, ``get`` and ``wait``: Tasks as ``argo list`` / ``tkn taskrun list`` show
theirs, with the user's credentials.

* :func:`list_main` prints one row per Task (``NAME PHASE REASON WORKFLOW MPE JOB AGE``, with
  ``-A`` a ``NAMESPACE`` column first, ``-o wide`` adds ``FUNCTION``, ``STARTED``, ``ENDED`` and
  ``MESSAGE``), or a ``v1`` ``List`` with ``-o json|yaml`` (the objects as stored, as ``kubectl
  get -o json`` prints them);
* :func:`get_main` the same for named Tasks (``-o json|yaml``: the object itself); Workflows
  and ``--watch`` go through :mod:`taskfsm.tools.views`;
* :func:`wait_main` waits, through a watch, until a Task (or a Workflow) matches ``--for``
  (``phase=P``, ``condition=Type`` or ``condition=Type=Status``, or ``delete``), and exits early
  (1) when it reached a terminal phase other than the one waited for, since a terminal phase
  never changes again.

The reason column is :func:`task_reason`, the same text ``taskfsm ui`` shows: the terminal
condition's reason for Succeeded and Failed Tasks, ``JobSuspended`` for a Running Task whose Job
is held, and ``Error`` while the last pass ended with an error (``status.message`` set).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson
import yaml

from taskfsm.api import constants as c
from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import TASKS
from taskfsm.kube.rest import Resource, Rest

OUTPUTS = ("wide", "json", "yaml", "name")
"""What ``-o`` takes (no ``-o``: the table)."""

TERMINAL = c.TASK_TERMINAL_PHASES

_WORKFLOW_PREFIXES = ("workflow/", "workflows/", "wf/")
_TASK_PREFIXES = ("task/", "tasks/")
_COLUMNS = ("NAME", "PHASE", "REASON", "WORKFLOW", "MPE", "JOB", "AGE")
_WIDE = ("FUNCTION", "STARTED", "ENDED", "MESSAGE")


# -- the facts of a Task, shared with the UI --------------------------------------------------


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The Task's (or Workflow's) condition of ``type_``, or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def task_reason(task: dict[str, Any]) -> str:
    """One word for why a Task is where it is (module docstring); "" when nothing to say."""
    status = task.get("status") or {}
    phase = status.get("phase") or ""
    terminal_type = c.TASK_TERMINAL_CONDITIONS.get(phase)
    if terminal_type:
        return str((condition(task, terminal_type) or {}).get("reason") or "")
    if status.get("message"):
        return "Error"
    ready = condition(task, "Ready")
    if phase == c.TaskPhase.RUNNING and ready and ready.get("status") == "False":
        return str(ready.get("reason") or "")
    return ""


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """``kubectl``'s short age of an RFC 3339 ``timestamp``: ``45s``, ``3m20s``, ``2h5m``,
    ``4d3h``, ``30d``, ``2y10d``; ``<unknown>`` without one."""
    if not timestamp:
        return "<unknown>"
    then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    return f"{years}y{days % 365}d" if years < 8 and days % 365 else f"{years}y"


def row(task: dict[str, Any], *, wide: bool = False, now: datetime | None = None) -> list[str]:
    """The table cells of one Task (without the namespace)."""
    meta, spec = task["metadata"], task.get("spec") or {}
    status = task.get("status") or {}
    phase = status.get("phase") or ""
    if meta.get("deletionTimestamp"):
        phase = f"{phase or 'New'} (deleting)"
    cells = [
        meta["name"],
        phase or "New",
        task_reason(task),
        (spec.get("workflowRef") or {}).get("name") or "",
        (status.get("mediaProcessingEntityRef") or {}).get("name") or "",
        (status.get("jobRef") or {}).get("name") or "",
        age(meta.get("creationTimestamp"), now),
    ]
    if wide:
        cells += [
            (status.get("functionRef") or {}).get("name") or "",
            status.get("startTime") or "",
            status.get("endTime") or "",
            " ".join((status.get("message") or "").split()),
        ]
    return [cell or "<none>" if i in (3, 4, 5) else cell for i, cell in enumerate(cells)]


def header(*, wide: bool, all_namespaces: bool) -> list[str]:
    """The column names of the Task table."""
    return [*(("NAMESPACE",) if all_namespaces else ()), *_COLUMNS, *(_WIDE if wide else ())]


def table(tasks: Sequence[dict[str, Any]], *, wide: bool, all_namespaces: bool) -> list[str]:
    """The lines of the table (header first), columns padded as kubectl pads them."""
    now = datetime.now(UTC)
    rows = [
        [*((t["metadata"]["namespace"],) if all_namespaces else ()), *row(t, wide=wide, now=now)]
        for t in tasks
    ]
    return format_table(header(wide=wide, all_namespaces=all_namespaces), rows)


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    """The width of each column: its longest cell (the header is one of the rows)."""
    return [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]


def pad(cells: Sequence[str], widths: Sequence[int]) -> str:
    """One table line: cells padded to ``widths`` (a longer cell widens its column), three
    spaces apart, as kubectl pads them."""
    return "   ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def format_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a table: ``head`` then ``rows``, columns padded to their longest cell."""
    widths = column_widths([head, *rows])
    return [pad(r, widths) for r in [head, *rows]]


def dump(obj: Any, output: str) -> str:
    """``obj`` as JSON (indented like kubectl) or YAML."""
    if output == "json":
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True)


def print_tasks(
    tasks: Sequence[dict[str, Any]],
    output: str | None,
    *,
    all_namespaces: bool = False,
    single: bool = False,
    out: TextIO | None = None,
) -> None:
    """Print ``tasks`` as ``-o`` asks; ``single``: one object, not a ``List``."""
    stream = out or sys.stdout
    if output in ("json", "yaml", "name"):
        objs = [{"apiVersion": c.API_VERSION, "kind": c.KIND_TASK, **t} for t in tasks]
        print_objects(objs, output, single=single, out=stream)
    else:
        stream.writelines(
            line + "\n"
            for line in table(tasks, wide=output == "wide", all_namespaces=all_namespaces)
        )


def print_objects(
    objs: Sequence[dict[str, Any]],
    output: str | None,
    *,
    single: bool = False,
    out: TextIO | None = None,
) -> None:
    """``-o json|yaml`` (one object when ``single``, else a ``v1`` ``List``) or ``-o name`` of
    objects that carry their ``kind``."""
    stream = out or sys.stdout
    if output == "name":
        stream.writelines(f"{o['kind'].lower()}.{c.GROUP}/{o['metadata']['name']}\n" for o in objs)
    else:
        body = objs[0] if single and len(objs) == 1 else _list_object(list(objs))
        stream.write(dump(body, output or "yaml"))


def _list_object(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


# -- list / get -------------------------------------------------------------------------------


def list_tasks(
    rest: Rest,
    namespace: str | None,
    *,
    workflow: str | None = None,
    phase: str | None = None,
    label_selector: str | None = None,
) -> list[dict[str, Any]]:
    """The Tasks of ``namespace`` (None: all), filtered, sorted by namespace and name."""
    items = list_all(rest, TASKS, namespace, label_selector)
    if workflow:
        items = [
            t
            for t in items
            if ((t.get("spec") or {}).get("workflowRef") or {}).get("name") == workflow
        ]
    if phase:
        wanted = "" if phase == "New" else phase
        items = [t for t in items if ((t.get("status") or {}).get("phase") or "") == wanted]
    return items


def list_all(
    rest: Rest, res: Resource, namespace: str | None, label_selector: str | None = None
) -> list[dict[str, Any]]:
    """Every ``res`` object of ``namespace`` (None: all), sorted by namespace and name."""
    items: list[dict[str, Any]] = []
    token = None
    while True:  # paged, like the controller's lists: 10,000 Tasks are not one answer
        page = rest.list(
            res, namespace, label_selector=label_selector, limit=500, continue_token=token
        )
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            break
    items.sort(key=lambda t: (t["metadata"]["namespace"], t["metadata"]["name"]))
    return items


def split_kind(name: str) -> tuple[str | None, str]:
    """``workflow/NAME`` (also ``workflows/``, ``wf/``) or ``task/NAME`` (``tasks/``) as
    (kind, NAME), as kubectl's TYPE/NAME; a bare name has no kind (None)."""
    for prefix in _WORKFLOW_PREFIXES:
        if name.startswith(prefix):
            return c.KIND_WORKFLOW, name[len(prefix) :]
    for prefix in _TASK_PREFIXES:
        if name.startswith(prefix):
            return c.KIND_TASK, name[len(prefix) :]
    return None, name


def list_main(
    rest: Rest,
    namespace: str | None,
    output: str | None = None,
    *,
    workflow: str | None = None,
    phase: str | None = None,
    label_selector: str | None = None,
) -> int:
    """``taskfsm list``; ``namespace`` None lists every namespace (``-A``)."""
    tasks = list_tasks(
        rest, namespace, workflow=workflow, phase=phase, label_selector=label_selector
    )
    if not tasks and output not in ("json", "yaml"):
        where = f"namespace {namespace}" if namespace else "any namespace"
        print(f"No Tasks found in {where}.", file=sys.stderr)
        return 0
    print_tasks(tasks, output, all_namespaces=namespace is None)
    return 0


def get_main(rest: Rest, namespace: str, names: Sequence[str], output: str | None = None) -> int:
    """``taskfsm get TASK...``: 1 when one of them does not exist (the others are printed)."""
    found, code = [], 0
    for name in names:
        try:
            found.append(rest.get(TASKS, namespace, name))
        except NotFound:
            print(f'Error: Task "{name}" not found in namespace {namespace}', file=sys.stderr)
            code = 1
    if found:
        print_tasks(found, output, single=len(names) == 1)
    return code


# -- wait -------------------------------------------------------------------------------------


class WaitSpec:
    """A parsed ``--for``: ``phase=P``, ``condition=T``, ``condition=T=S`` or ``delete``."""

    def __init__(self, text: str) -> None:
        self.text = text
        what, _, value = text.partition("=")
        self.kind = what
        self.phase = self.condition = self.status = ""
        if what == "phase" and value:
            self.phase = value
        elif what == "condition" and value:
            self.condition, _, status = value.partition("=")
            self.status = status or "True"
        elif what != "delete" or value:
            raise ValueError(
                f"--for={text}: expected phase=PHASE, condition=TYPE[=STATUS] or delete"
            )

    def met(self, task: dict[str, Any] | None) -> bool:
        if self.kind == "delete":
            return task is None
        if task is None:
            return False
        if self.kind == "phase":
            return ((task.get("status") or {}).get("phase") or "") == self.phase
        cond = condition(task, self.condition)
        return cond is not None and cond.get("status") == self.status

    def hopeless(self, obj: dict[str, Any] | None, kind: str = c.KIND_TASK) -> str:
        """Why the wait can never succeed any more ("" while it can); ``kind``: what ``obj`` is
        (a Task, or a Workflow: both end in Succeeded or Failed, never to change again)."""
        if obj is None:
            return "" if self.kind == "delete" else f"the {kind} was deleted"
        phase = (obj.get("status") or {}).get("phase") or ""
        if self.kind == "phase" and phase in TERMINAL and phase != self.phase:
            return f"the {kind} ended {phase}"
        return ""


def wait_main(
    rest: Rest,
    namespace: str,
    name: str,
    spec: WaitSpec,
    timeout: float,
    *,
    quiet: bool = False,
    res: Resource = TASKS,
) -> int:
    """``taskfsm wait`` of a Task (or with ``res`` WORKFLOWS, ``wait workflow/NAME``): 0 when
    met, 1 on timeout or when it can no longer be met."""
    kind = res.kind
    deadline = time.monotonic() + timeout
    try:
        obj: dict[str, Any] | None = rest.get(res, namespace, name)
    except NotFound:
        if spec.kind != "delete":
            print(f'Error: {kind} "{name}" not found in namespace {namespace}', file=sys.stderr)
            return 1
        obj = None
    version = (obj or {}).get("metadata", {}).get("resourceVersion")
    while True:
        if spec.met(obj):
            if not quiet:
                print(f"{kind.lower()}.{c.GROUP}/{name} condition met ({spec.text})")
            return 0
        hopeless = spec.hopeless(obj, kind)
        if hopeless:
            print(f"Error: {name}: {hopeless}; --for={spec.text} cannot be met", file=sys.stderr)
            return 1
        left = deadline - time.monotonic()
        if left <= 0:
            phase = ((obj or {}).get("status") or {}).get("phase") or "New"
            print(
                f"Error: timed out waiting for --for={spec.text} on {kind} {name} (phase {phase})",
                file=sys.stderr,
            )
            return 1
        try:
            for event, found in watch_one(rest, namespace, name, version, left, res=res):
                version = found.get("metadata", {}).get("resourceVersion") or version
                obj = None if event == "DELETED" else found
                if spec.met(obj) or spec.hopeless(obj, kind):
                    break
        except KubeError:
            version = None  # e.g. 410 Gone: read afresh
        if version is None:
            try:
                obj = rest.get(res, namespace, name)
                version = obj["metadata"].get("resourceVersion")
            except NotFound:
                obj = None


def watch_one(
    rest: Rest,
    namespace: str,
    name: str,
    version: str | None,
    seconds: float,
    *,
    res: Resource = TASKS,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The watch events of one Task (or other ``res`` object) for at most ``seconds``
    (server-side timeout)."""
    stream = rest.watch(
        res,
        namespace,
        timeout_seconds=max(1, int(seconds)),
        read_timeout=seconds + 30,
        fieldSelector=f"metadata.name={name}",
        resourceVersion=version,
        allowWatchBookmarks="true",
    )
    try:
        yield from watch_events(stream)
    finally:
        stream.release_conn()


def watch_events(stream: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(type, object) of every event of an open watch response; raises on an ERROR event."""
    buffer = b""
    for chunk in stream.stream(65536, decode_content=True):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            event = orjson.loads(line)
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                raise KubeError(
                    status.get("message") or "watch error", status=status.get("code") or 0
                )
            if event.get("type") != "BOOKMARK":
                yield event["type"], event["object"]
