"""What ``taskfsm ui`` knows of the cluster: the Tasks and Workflows of its namespace (or all), kept
by watches (the controller's own list-then-watch loop, :class:`taskfsm.kube.informer.Informer`,
with the user's credentials), counted per state as events arrive, and the moves between states
seen in the last :data:`RECENT_SECONDS`.

Counts are kept per chart (``task``, ``workflow``) and view: ``phases`` (the user view: every
object in its phase's state) and ``lifecycle`` (the full chart: an object being deleted counts
in ``deleting``). A move is recorded when a watch event shows an object in another state than
the last event did; an object's first appearance (the initial list, a new object) is not a move.

The cache keeps what the pages show of each object (:func:`slim`): metadata without
managedFields, the Task's or Workflow's references and human-readable name, and its status;
10,000 Tasks stay small (``make bench`` measures it). Listeners (the server's event streams)
are called on the watch threads after every change and must only hand the news on.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from taskfsm.kube.informer import ADDED, DELETED, Informer
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import Rest
from taskfsm.kube.transforms import default_transform
from taskfsm.tools import tasks as task_tools
from taskfsm.tools.ui import charts

RECENT_SECONDS = 300.0
"""How long a move stays emphasised on the overview."""
RECENT_LIST = 30
"""How many of the latest moves the overview lists."""

_META_KEYS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
)
_SPEC_KEYS = ("workflowRef", "humanReadable", "jobFailurePolicy", "functionRef")


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the UI's cache keeps of a Task or Workflow (module docstring)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    out = {
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in _META_KEYS if k in meta},
        "spec": {k: spec[k] for k in _SPEC_KEYS if k in spec},
        "status": obj.get("status") or {},
    }
    return default_transform(out)


@dataclass(frozen=True)
class Move:
    """An object seen in ``target`` after ``source`` (state ids of ``chart``)."""

    at: float
    wall: float
    chart: str
    namespace: str
    name: str
    source: str
    target: str
    source_phase: str
    target_phase: str


class LiveModel:
    """The watches and counts of one ``taskfsm ui`` (module docstring)."""

    def __init__(
        self,
        rest: Rest,
        namespace: str | None,
        *,
        recent_seconds: float = RECENT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rest = rest
        self.namespace = namespace
        self.recent_seconds = recent_seconds
        self.clock = clock
        self.informers = {
            "task": Informer(rest, TASKS, namespace=namespace, transform=slim, name="ui-tasks"),
            "workflow": Informer(
                rest, WORKFLOWS, namespace=namespace, transform=slim, name="ui-workflows"
            ),
        }
        tasks = self.informers["task"]
        tasks.index("state", lambda t: charts.state_of("task", t))
        tasks.index("phase", lambda t: charts.state_of("task", t, view="phases"))
        tasks.index("workflow", _workflow_key)
        self._lock = threading.Lock()
        self._states: dict[tuple[str, str], tuple[str, str]] = {}
        self._counts: dict[str, dict[str, Counter[str]]] = {
            chart: {view: Counter() for view in charts.VIEWS} for chart in charts.CHARTS
        }
        self._moves: deque[Move] = deque()
        self.version = 0
        self._listeners: list[Callable[[], None]] = []
        for chart, informer in self.informers.items():
            informer.add_handler(functools.partial(self._on_chart_event, chart))

    def start(self) -> LiveModel:
        for informer in self.informers.values():
            informer.start()
        return self

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()

    def synced(self) -> bool:
        return all(i.wait_synced(0) for i in self.informers.values())

    def add_listener(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    # -- events ----------------------------------------------------------------------------------

    def _on_chart_event(self, chart: str, kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (chart, f"{meta.get('namespace') or ''}/{meta['name']}")
        with self._lock:
            before = self._states.pop(key, None)
            if before is not None:
                self._counts[chart]["lifecycle"][before[0]] -= 1
                self._counts[chart]["phases"][before[1]] -= 1
            if kind != DELETED:
                after = (
                    charts.state_of(chart, obj),
                    charts.state_of(chart, obj, view="phases"),
                )
                self._states[key] = after
                self._counts[chart]["lifecycle"][after[0]] += 1
                self._counts[chart]["phases"][after[1]] += 1
                if before is not None and before[0] != after[0] and kind != ADDED:
                    self._moves.append(
                        Move(
                            self.clock(),
                            time.time(),
                            chart,
                            meta.get("namespace") or "",
                            meta["name"],
                            before[0],
                            after[0],
                            before[1],
                            after[1],
                        )
                    )
            self.version += 1
        for listener in list(self._listeners):
            listener()

    # -- what the pages read ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Counts per chart, view and state; the edges emphasised per view (edge title → moves
        in the last :attr:`recent_seconds`); the latest moves; whether the first lists are in."""
        now = self.clock()
        with self._lock:
            while self._moves and now - self._moves[0].at > self.recent_seconds:
                self._moves.popleft()
            moves = list(self._moves)
            counts = {
                chart: {view: {s: n for s, n in c.items() if n} for view, c in views.items()}
                for chart, views in self._counts.items()
            }
            version = self.version
        recent: dict[str, dict[str, dict[str, int]]] = {
            chart: {view: {} for view in charts.VIEWS} for chart in charts.CHARTS
        }
        for move in moves:
            for view, (a, b) in (
                ("lifecycle", (move.source, move.target)),
                ("phases", (move.source_phase, move.target_phase)),
            ):
                for title in charts.path_moves(move.chart, view, [a, b]):
                    edges = recent[move.chart][view]
                    edges[title] = edges.get(title, 0) + 1
        return {
            "version": version,
            "synced": self.synced(),
            "counts": counts,
            "recent": recent,
            "moves": [
                {
                    "at": move.wall,
                    "chart": move.chart,
                    "namespace": move.namespace,
                    "name": move.name,
                    "from": _label(move.chart, move.source),
                    "to": _label(move.chart, move.target),
                    "fromState": move.source,
                    "toState": move.target,
                }
                for move in moves[-RECENT_LIST:]
            ],
        }

    def tasks_in(self, chart: str, view: str, state: str) -> list[dict[str, Any]]:
        """The objects of ``chart`` in ``state`` of ``view``, sorted by namespace and name."""
        informer = self.informers[chart]
        if chart == "task":
            found = informer.by_index("state" if view == "lifecycle" else "phase", state)
        else:
            found = [o for o in informer.list() if charts.state_of(chart, o, view=view) == state]
        return sorted(found, key=lambda o: (o["metadata"].get("namespace"), o["metadata"]["name"]))

    def tasks_of_workflow(self, namespace: str, name: str) -> list[dict[str, Any]]:
        found = self.informers["task"].by_index("workflow", f"{namespace}/{name}")
        return sorted(found, key=lambda o: o["metadata"]["name"])


def _label(chart: str, state: str) -> str:
    """A state as the move list names it: its phase (``New`` before the first), or
    ``Deleting``."""
    for phase, state_id in charts.CHARTS[chart].phase_states.items():
        if state_id == state:
            return phase or "New"
    return state.replace("_", " ").capitalize()


def _workflow_key(task: dict[str, Any]) -> str | None:
    name = ((task.get("spec") or {}).get("workflowRef") or {}).get("name")
    return f"{task['metadata'].get('namespace')}/{name}" if name else None


def task_row(task: dict[str, Any]) -> dict[str, str]:
    """A Task as the state and Workflow pages list it."""
    meta, spec = task["metadata"], task.get("spec") or {}
    status = task.get("status") or {}
    return {
        "namespace": meta.get("namespace") or "",
        "name": meta["name"],
        "phase": status.get("phase") or "",
        "reason": task_tools.task_reason(task),
        "workflow": (spec.get("workflowRef") or {}).get("name") or "",
        "mpe": (status.get("mediaProcessingEntityRef") or {}).get("name") or "",
        "age": task_tools.age(meta.get("creationTimestamp")),
        "created": meta.get("creationTimestamp") or "",
        "humanName": (spec.get("humanReadable") or {}).get("name") or "",
        "deleting": "yes" if meta.get("deletionTimestamp") else "",
    }
