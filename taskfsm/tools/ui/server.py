"""The ``taskfsm ui`` web server: a local, read-only page of the lifecycles with the cluster's
Tasks and Workflows on them (docs/ui.md).

Built on aiohttp (already one of the Kubernetes client's dependencies): the watches run in
:class:`~taskfsm.tools.ui.live.LiveModel`'s threads, the server's event loop answers the page.

Pages (one HTML shell, ``static/index.html``; ``static/app.js`` draws each from the JSON API):

* ``/`` -- the overview: the Task and Workflow charts, user view or full chart, each state with
  its live count, the moves of the last minutes emphasised, live through ``/api/events``
  (server-sent events, sent when a watch event changed something, never by polling the API);
* ``/state/<chart>/<view>/<state>`` -- the Tasks (or Workflows) in one state, filterable;
* ``/task/<namespace>/<name>`` -- one Task: its path through the chart, status, conditions,
  Events, Job and pods (where the Job runs, :mod:`taskfsm.tools.job_location`), a log tail and the
  ``explain`` text, all from the same code as ``taskfsm explain`` and ``taskfsm logs``;
* ``/workflow/<namespace>/<name>`` -- one Workflow: its chart, its Tasks by state.

Safety: the server binds 127.0.0.1 only, answers GET only, and refuses requests whose ``Host``
is not its own address (a web page elsewhere cannot reach it through DNS rebinding). Every string
from the cluster travels as JSON and is put into the page as text (``textContent``), never as
HTML; a Content-Security-Policy allows only the server's own script and style, no inline script,
no other origin. The credentials are the user's kubeconfig's: the page can show nothing the
user could not ``kubectl get``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import orjson
from aiohttp import web

from taskfsm.kube.errors import KubeError, NotFound
from taskfsm.kube.resources import TASKS, WORKFLOWS
from taskfsm.kube.rest import JOBS, Rest
from taskfsm.tools import explain
from taskfsm.tools import logs as log_tools
from taskfsm.tools import tasks as task_tools
from taskfsm.tools.job_location import job_site
from taskfsm.tools.ui import charts
from taskfsm.tools.ui.live import LiveModel, task_row

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: only this server's own script, style and images."""

LOG_TAIL = 50
"""Lines of each container's log a Task page shows."""
HEARTBEAT_SECONDS = 15.0
"""An event stream sends the state at least this often (moves age out of the emphasis)."""
COALESCE_SECONDS = 0.25
"""An event stream waits this long after a change for more (a burst becomes one message)."""

_STATIC = {"app.js": "text/javascript", "style.css": "text/css"}

MODEL: web.AppKey[LiveModel] = web.AppKey("model", LiveModel)
META: web.AppKey[dict[str, Any]] = web.AppKey("meta", dict)
HOSTS: web.AppKey[set[str]] = web.AppKey("hosts", set)
STREAMS: web.AppKey[set[asyncio.Event]] = web.AppKey("streams", set)


def _static(name: str) -> bytes:
    return resources.files("taskfsm.tools.ui").joinpath("static").joinpath(name).read_bytes()


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


@web.middleware
async def _guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Own Host only, GET only, and the security headers on every answer."""
    hosts = request.app[HOSTS]
    if hosts and request.host not in hosts:
        return web.Response(status=421, text="wrong host")
    if request.method not in ("GET", "HEAD"):
        return web.Response(status=405, text="read-only")
    response = await handler(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


async def _page(_request: web.Request) -> web.Response:
    return web.Response(body=_static("index.html"), content_type="text/html", charset="utf-8")


async def _static_file(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in _STATIC:
        raise web.HTTPNotFound()
    return web.Response(body=_static(name), content_type=_STATIC[name], charset="utf-8")


async def _chart_svg(request: web.Request) -> web.Response:
    try:
        body = charts.svg(request.match_info["chart"], request.match_info["view"])
    except KeyError:
        raise web.HTTPNotFound() from None
    return web.Response(body=body, content_type="image/svg+xml")


async def _meta(request: web.Request) -> web.Response:
    return _json(request.app[META])


async def _events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``snapshot`` (LiveModel.snapshot) now, after every change (bursts
    coalesced) and at least every :data:`HEARTBEAT_SECONDS`."""
    model = request.app[MODEL]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    changed = asyncio.Event()
    request.app[STREAMS].add(changed)
    try:
        while True:
            changed.clear()
            snapshot = await asyncio.to_thread(model.snapshot)
            await response.write(b"event: snapshot\ndata: " + orjson.dumps(snapshot) + b"\n\n")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), HEARTBEAT_SECONDS)
            await asyncio.sleep(COALESCE_SECONDS)
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        request.app[STREAMS].discard(changed)
    return response


async def _state(request: web.Request) -> web.Response:
    chart, view, state = (request.match_info[k] for k in ("chart", "view", "state"))
    if chart not in charts.CHARTS or view not in charts.VIEWS:
        raise web.HTTPNotFound()
    model = request.app[MODEL]
    found = await asyncio.to_thread(model.tasks_in, chart, view, state)
    rows = [task_row(t) for t in found] if chart == "task" else [_workflow_row(w) for w in found]
    return _json({"chart": chart, "view": view, "state": state, "rows": rows})


async def _task(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    model = request.app[MODEL]
    try:
        facts = await asyncio.to_thread(task_facts, model.rest, namespace, name)
    except NotFound:
        return _json({"error": f"Task {namespace}/{name} not found"}, 404)
    except KubeError as exc:
        return _json({"error": f"could not read Task {namespace}/{name}: {exc}"}, 502)
    return _json(facts)


async def _workflow(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    model = request.app[MODEL]
    try:
        facts = await asyncio.to_thread(workflow_facts, model, namespace, name)
    except NotFound:
        return _json({"error": f"Workflow {namespace}/{name} not found"}, 404)
    except KubeError as exc:
        return _json({"error": f"could not read Workflow {namespace}/{name}: {exc}"}, 502)
    return _json(facts)


# -- facts ------------------------------------------------------------------------------------


def task_facts(rest: Rest, namespace: str, name: str) -> dict[str, Any]:
    """Everything the Task page shows (read fresh, with the user's credentials)."""
    task = rest.get(TASKS, namespace, name)
    try:
        events: list[dict[str, Any]] | None = explain.task_events(rest, task)
        events_error = ""
    except KubeError as exc:
        events, events_error = None, str(exc)
    path = explain.phase_path(task, events)
    phase_states = charts.CHARTS["task"].phase_states
    states = [phase_states.get(p, phase_states[""]) for p in path]
    full = [*states, charts.DELETING] if task["metadata"].get("deletionTimestamp") else states
    status = task.get("status") or {}
    return {
        "task": task_row(task),
        "status": {
            k: status.get(k)
            for k in ("phase", "message", "queuedTime", "startTime", "endTime")
            if status.get(k)
        },
        "refs": {
            label: explain.ref_text(status[key])  # the same text as explain
            for label, key in (
                ("MediaProcessingEntity", "mediaProcessingEntityRef"),
                ("Function", "functionRef"),
            )
            if status.get(key)
        },
        "labels": task["metadata"].get("labels") or {},
        "humanReadable": (task.get("spec") or {}).get("humanReadable") or {},
        "conditions": status.get("conditions") or [],
        "path": [p or "New" for p in path],
        "pathStates": {"phases": states, "lifecycle": full},
        "pathEdges": {
            "phases": charts.path_moves("task", "phases", states),
            "lifecycle": charts.path_moves("task", "lifecycle", full),
        },
        "current": {"phases": states[-1], "lifecycle": full[-1]},
        "events": [list(explain.event_row(e)) for e in (events or [])[-explain.RECENT_EVENTS :]],
        "eventsError": events_error,
        "job": _job_facts(rest, task),
        "explain": explain.task_lines(rest, task, "none"),
    }


def _job_facts(rest: Rest, task: dict[str, Any]) -> dict[str, Any]:
    ref = (task.get("status") or {}).get("jobRef") or {}
    if not ref:
        return {"name": "", "note": "no Job recorded yet"}
    site = job_site(rest, task)
    facts: dict[str, Any] = {
        "name": ref.get("name") or "",
        "namespace": site.namespace,
        "where": site.where,
        "note": site.problem,
        "pods": [],
        "logs": [],
    }
    if site.rest is None:
        return facts
    try:
        job = site.rest.get(JOBS, site.namespace, ref["name"])
        job_status = job.get("status") or {}
        facts["counts"] = {k: job_status.get(k, 0) for k in ("active", "succeeded", "failed")}
        facts["conditions"] = [
            c["type"] for c in job_status.get("conditions") or [] if c.get("status") == "True"
        ]
    except NotFound:
        facts["note"] = "not found (deleted, or removed after ttlSecondsAfterFinished)"
        return facts
    except KubeError as exc:
        facts["note"] = f"could not read it: {exc}"
        return facts
    try:
        pods = log_tools.job_pods(site.rest, site.namespace, ref)
    except KubeError as exc:
        facts["note"] = f"could not read its pods: {exc}"
        return facts
    for pod in pods:
        pod_status = pod.get("status") or {}
        containers = []
        for container in pod_status.get("containerStatuses") or []:
            state = container.get("state") or {}
            (what, detail), *_ = list(state.items()) or [("waiting", {})]
            containers.append(
                {
                    "name": container.get("name") or "",
                    "state": what,
                    "exitCode": (detail or {}).get("exitCode"),
                    "reason": (detail or {}).get("reason") or "",
                }
            )
        facts["pods"].append(
            {
                "name": pod["metadata"]["name"],
                "phase": pod_status.get("phase") or "",
                "node": (pod.get("spec") or {}).get("nodeName") or "",
                "containers": containers,
            }
        )
    if pods:
        newest = pods[-1]
        for container in (newest.get("spec") or {}).get("containers") or []:
            try:
                text = b"".join(
                    log_tools.read_log(
                        site.rest,
                        site.namespace,
                        newest["metadata"]["name"],
                        container["name"],
                        tail=LOG_TAIL,
                    )
                ).decode(errors="replace")
            except KubeError as exc:
                text = f"(could not read the log: {exc})"
            facts["logs"].append(
                {"pod": newest["metadata"]["name"], "container": container["name"], "text": text}
            )
    return facts


def _workflow_row(workflow: dict[str, Any]) -> dict[str, str]:
    meta, status = workflow["metadata"], workflow.get("status") or {}
    return {
        "namespace": meta.get("namespace") or "",
        "name": meta["name"],
        "phase": status.get("phase") or "",
        "reason": "",
        "workflow": meta["name"],
        "mpe": "",
        "age": task_tools.age(meta.get("creationTimestamp")),
        "created": meta.get("creationTimestamp") or "",
        "humanName": ((workflow.get("spec") or {}).get("humanReadable") or {}).get("name") or "",
        "deleting": "yes" if meta.get("deletionTimestamp") else "",
    }


def workflow_facts(model: LiveModel, namespace: str, name: str) -> dict[str, Any]:
    """Everything the Workflow page shows: the Workflow (read fresh), its Tasks (from the
    watch cache) by state."""
    workflow = model.rest.get(WORKFLOWS, namespace, name)
    tasks = model.tasks_of_workflow(namespace, name)
    counts: dict[str, dict[str, int]] = {view: {} for view in charts.VIEWS}
    for task in tasks:
        for view in charts.VIEWS:
            state = charts.state_of("task", task, view=view)
            counts[view][state] = counts[view].get(state, 0) + 1
    status = workflow.get("status") or {}
    return {
        "workflow": _workflow_row(workflow),
        "status": {
            k: status.get(k)
            for k in (
                "phase",
                "message",
                "queuedTime",
                "startTime",
                "endTime",
                "total",
                "active",
                "succeeded",
                "failed",
            )
            if status.get(k) is not None
        },
        "conditions": status.get("conditions") or [],
        "current": {
            view: charts.state_of("workflow", workflow, view=view) for view in charts.VIEWS
        },
        "taskCounts": counts,
        "tasks": [task_row(t) for t in tasks],
        "explain": explain.workflow_lines(model.rest, workflow, "none"),
    }


# -- the application --------------------------------------------------------------------------


def build_app(model: LiveModel, meta: dict[str, Any]) -> web.Application:
    """The aiohttp application over ``model``; ``meta`` is what ``/api/meta`` answers."""
    app = web.Application(middlewares=[_guard])
    app[MODEL] = model
    app[META] = {**meta, "charts": {name: charts.chart_info(name) for name in charts.CHARTS}}
    app[HOSTS] = set()
    app[STREAMS] = set()
    for path in (
        "/",
        "/state/{chart}/{view}/{state}",
        "/task/{namespace}/{name}",
        "/workflow/{namespace}/{name}",
    ):
        app.router.add_get(path, _page)
    app.router.add_get("/static/{name}", _static_file)
    app.router.add_get("/charts/{chart}-{view}.svg", _chart_svg)
    app.router.add_get("/api/meta", _meta)
    app.router.add_get("/api/events", _events)
    app.router.add_get("/api/state/{chart}/{view}/{state}", _state)
    app.router.add_get("/api/task/{namespace}/{name}", _task)
    app.router.add_get("/api/workflow/{namespace}/{name}", _workflow)
    return app


async def serve(
    model: LiveModel,
    meta: dict[str, Any],
    *,
    address: str = "127.0.0.1",
    port: int = 0,
    ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until ``stop`` is set (or the task is cancelled); ``ready`` gets the URL."""
    app = build_app(model, meta)
    loop = asyncio.get_running_loop()

    def notify() -> None:  # on a watch thread
        loop.call_soon_threadsafe(_wake, app[STREAMS])

    model.add_listener(notify)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, address, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    app[HOSTS].update({f"{address}:{bound}", f"localhost:{bound}"})
    url = f"http://{address}:{bound}/"
    if ready is not None:
        ready(url)
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()


def _wake(streams: set[asyncio.Event]) -> None:
    for event in streams:
        event.set()


def main(
    rest: Rest,
    namespace: str | None,
    *,
    port: int = 0,
    context: str = "",
) -> int:
    """``taskfsm ui``: start the watches, serve, print the URL; Ctrl-C (or SIGTERM) stops."""
    model = LiveModel(rest, namespace).start()
    meta = {"namespace": namespace, "context": context}

    def ready(url: str) -> None:
        where = f"namespace {namespace}" if namespace else "all namespaces"
        print(f"taskfsm ui: {url} ({where}; read-only; Ctrl-C stops)", flush=True)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(model, meta, port=port, ready=ready, stop=stop)

    try:
        asyncio.run(run())
    except OSError as exc:  # e.g. the port is taken
        print(f"taskfsm ui: {exc}", file=sys.stderr)
        return 1
    finally:
        model.stop()
    return 0


__all__ = ["CSP", "build_app", "main", "serve", "task_facts", "workflow_facts"]
