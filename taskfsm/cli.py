# PYTHON_ARGCOMPLETE_OK
"""The ``taskfsm`` command line: thin wrappers over the library (``taskfsm --help``).

Commands: ``run`` (the controller), ``diagram`` (render the lifecycle), ``crds`` (print the
CRDs), ``list``/``get``/``logs``/``wait`` (Tasks, as ``argo`` and ``tkn`` show theirs, and Workflows
as ``workflow/NAME``; ``list``/``get`` ``-w`` keep printing what changes: docs/cli.md),
``explain`` (a Task's state, with the lifecycle diagram), ``ui`` (the lifecycle with the
cluster's Tasks on it, in a local web page), ``render-job`` (the Job and Secret a Task would
produce, offline), ``completion`` (shell completion code). The demo is a development command of
the checkout (``make demo``, :mod:`taskfsm_dev.demo`): it needs a local control plane.

The user-facing verbs take kubectl's flags and rules (``--kubeconfig``, ``--context``, ``-n``
defaulting to the kubeconfig context's namespace, ``-A``, ``-o``;
:mod:`taskfsm.kube.user_access`), so ``taskfsm list`` and ``kubectl taskfsm list`` (the
``kubectl-taskfsm`` plugin) show the same Tasks as ``kubectl get tasks``.

Shell completion uses argcomplete (PyPI): it completes from this parser, so the flags never drift
from the completion code, and it completes Task names from the cluster, which argparse alone
cannot do and a completion script generated once (shtab) cannot either. ``taskfsm completion
bash|zsh|fish`` prints the code to source; ``kubectl taskfsm <TAB>`` is served by the
``kubectl_complete-taskfsm`` executable kubectl looks for (:func:`kubectl_complete`). The
``PYTHON_ARGCOMPLETE_OK`` marker above lets argcomplete's global activation find this module.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from taskfsm import __version__, defaults
from taskfsm.api.duration import SECOND, parse_go_duration

OUTPUTS = ("wide", "json", "yaml", "name")
"""What ``-o`` takes (taskfsm.tools.tasks.OUTPUTS; repeated so ``--help`` imports nothing)."""

if TYPE_CHECKING:
    from taskfsm.kube.client import ApiClient
    from taskfsm.kube.rest import Rest


def _add_kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig file of the main cluster (default: $KUBECONFIG, ~/.kube/config, "
        "else in-cluster)",
    )
    parser.add_argument(
        "--context", help="kubeconfig context to use (default: the current context)"
    )


def _add_namespace_flags(parser: argparse.ArgumentParser, *, all_namespaces: bool) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        help="namespace (default: the kubeconfig context's namespace, else default)",
    )
    if all_namespaces:
        parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def _add_task_argument(parser: argparse.ArgumentParser, name: str = "task", **options: Any) -> None:
    action = parser.add_argument(name, **{"help": "Task name", **options})
    action.completer = _complete_tasks  # type: ignore[attr-defined]  # argcomplete's hook


def _api_client(args: argparse.Namespace) -> ApiClient:
    from taskfsm.kube.user_access import ConfigException, NoClusterAccess, user_client

    try:
        return user_client(args.kubeconfig, args.context)
    except NoClusterAccess as exc:
        raise SystemExit(f"taskfsm: {exc}") from None
    except ConfigException as exc:
        raise SystemExit(f"taskfsm: the kubeconfig cannot be used: {exc}") from None


def _namespace(args: argparse.Namespace) -> str | None:
    """``-n``, else None with ``-A``, else the kubeconfig context's namespace."""
    from taskfsm.kube.user_access import user_namespace

    if getattr(args, "all_namespaces", False):
        return None
    return str(args.namespace or user_namespace(args.kubeconfig, args.context))


def _duration(text: str) -> float:
    """``--timeout``: seconds (``90``), or with kubectl's units (``90s``, ``5m``, ``1h``)."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30, 90s, 5m)") from None


def _seconds(text: str) -> float:
    """A ``taskfsm run`` duration flag: seconds (``90``, ``1.5``) or a Go duration (``15s``,
    ``2m``, ``1h30m``, ``500ms``), as the Go controller's flags take them."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_go_duration(text) / SECOND
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} ({exc}); seconds (90) or a Go duration (15s, 2m, 1h30m)"
        ) from None


def _whole_seconds(text: str) -> int:
    """Like :func:`_seconds`, for flags of whole seconds (``--job-ttl-seconds``)."""
    value = _seconds(text)
    if value != int(value):
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}")
    return int(value)


def _ttl(text: str) -> float:
    """``--finished-ttl``: like :func:`_seconds` (``3600``, ``90m``, ``168h``), never negative
    (0 keeps forever)."""
    seconds = _seconds(text)
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"not a duration of 0 or more: {text!r}")
    return seconds


def _rest(args: argparse.Namespace) -> Rest:
    from taskfsm.kube.rest import Rest

    return Rest(_api_client(args))


def _complete_tasks(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """Task names of the namespace the command line names (argcomplete completer); after
    ``workflow/``, Workflow names."""
    try:
        from taskfsm.kube.resources import TASKS, WORKFLOWS

        workflow = _is_workflow(prefix)[0]
        kind, before = (WORKFLOWS, prefix[: prefix.index("/") + 1]) if workflow else (TASKS, "")
        found = _rest(parsed_args).list(kind, _namespace(parsed_args), limit=500)
        names = [before + t["metadata"]["name"] for t in found.get("items") or []]
    except (Exception, SystemExit):  # completion must never print a traceback into the shell
        return []
    return [name for name in names if name.startswith(prefix)]


def exit_after_stop(code: int) -> NoReturn:
    """End the process with ``code`` once the controller has stopped, skipping interpreter
    finalization.

    Some daemon threads cannot be stopped at once (a watch read waits until its timeout; a
    request in flight until its deadline). Finalizing the interpreter while such threads still
    run can abort the process (SIGABRT, exit -6) instead of exiting with ``code``: a graceful
    stop seen as a crash by Kubernetes and by tests. Log handlers and stdio are flushed first, so
    nothing written before the stop is lost.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to save
            stream.flush()
    os._exit(code)


def _namespace_weights(text: str) -> tuple[tuple[str, int], ...]:
    """``--namespace-weights``: ``ns=weight,...`` as pairs; exits naming a malformed entry."""
    pairs: list[tuple[str, int]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        namespace, sep, weight = item.partition("=")
        if not sep or not namespace or not weight.strip().isdigit() or int(weight) < 1:
            raise SystemExit(
                f"taskfsm: --namespace-weights: {item!r} is not namespace=weight with a weight "
                "of at least 1"
            )
        pairs.append((namespace.strip(), int(weight)))
    return tuple(pairs)


def cmd_run(args: argparse.Namespace) -> NoReturn:
    """Run until SIGTERM/SIGINT (exit 0 after a graceful stop) or a lost Lease (exit 1).

    Ends the process itself (:func:`exit_after_stop`); a fatal signal prints every thread's
    traceback to stderr (:mod:`faulthandler`).
    """
    from taskfsm.api.config import WorkflowManagerConfiguration
    from taskfsm.api.errors import InvalidObjectError
    from taskfsm.kube.kubeconfig import KubeconfigPolicy
    from taskfsm.manager import logs, memory
    from taskfsm.manager.controller import Controller, Settings

    faulthandler.enable()
    memory.limit_arenas()  # before any thread starts (taskfsm/manager/memory.py)
    logs.configure(level=args.log_level, json=args.log_format == "json")
    try:
        config = WorkflowManagerConfiguration.load(args.config) if args.config else None
    except (OSError, InvalidObjectError) as exc:  # one line, never the file's content
        raise SystemExit(f"taskfsm: --config: {exc}") from None
    if not (
        args.leader_election_lease_duration
        > args.leader_election_renew_deadline
        > args.leader_election_retry_period
        > 0
    ):
        raise SystemExit(
            "taskfsm: leader election needs --leader-election-lease-duration > "
            "--leader-election-renew-deadline > --leader-election-retry-period > 0"
        )
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not args.kubeconfig
    leader_elect = args.leader_elect if args.leader_elect is not None else in_cluster
    controllers = _controllers(args.controllers)
    if args.max_in_flight_per_namespace < 0:
        raise SystemExit(
            "taskfsm: --max-in-flight-per-namespace must be at least 0, got "
            f"{args.max_in_flight_per_namespace}"
        )
    if args.buckets < 1:
        raise SystemExit(f"taskfsm: --buckets must be at least 1, got {args.buckets}")
    if args.buckets > 1 and not leader_elect:
        raise SystemExit(
            "taskfsm: --buckets above 1 needs leader election (--leader-elect): the buckets are "
            "Leases"
        )
    settings = Settings(
        workers=args.workers,
        queue_fairness=args.queue_fairness,
        namespace_weights=_namespace_weights(args.namespace_weights or ""),
        max_in_flight_per_namespace=args.max_in_flight_per_namespace,
        namespace=args.namespace,
        metrics_address=args.metrics_bind_address or None,
        health_address=args.health_probe_bind_address or None,
        leader_election=leader_elect,
        lease_namespace=args.leader_election_namespace
        or os.environ.get("POD_NAMESPACE", defaults.LEASE_NAMESPACE),
        lease_name=args.leader_election_id,
        resync_seconds=args.resync_period,
        watch_timeout=args.watch_timeout,
        read_margin=args.watch_read_margin,
        watch_max_backoff=args.watch_max_backoff,
        shutdown_timeout=args.shutdown_timeout,
        cache_sync_timeout=args.cache_sync_timeout,
        identity=args.leader_election_identity or "",
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
        nats=config.nats if config is not None else None,
        orphan_sweep_seconds=args.orphan_sweep_period,
        cleanup_timeout=args.cleanup_timeout,
        job_ttl_seconds=args.job_ttl_seconds,
        finished_ttl=args.finished_ttl,
        api_error_max_backoff=args.api_error_max_backoff,
        buckets=args.buckets,
        controllers=controllers,
        job_pods_refused_timeout=args.job_pods_refused_timeout,
        metrics_secure=args.metrics_secure,
        metrics_cert_dir=args.metrics_cert_dir or None,
        metrics_tenant_labels=args.metrics_tenant_labels,
        kubeconfig_policy=KubeconfigPolicy(
            allow_exec=args.allow_kubeconfig_exec,
            allow_insecure=args.allow_kubeconfig_insecure,
            allow_proxy=args.allow_kubeconfig_proxy,
        ),
    )
    if config is not None:  # without --config, the Settings default applies
        settings = dataclasses.replace(
            settings,
            workflow_termination_waiting=config.workflow_termination_waiting.total_seconds(),
        )
    controller = Controller(_api_client(args), settings)
    # The handler only asks for the stop; the main thread performs it (bounded, see Settings).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.request_stop())
    try:
        controller.start()
    except TimeoutError as exc:
        print(f"taskfsm: {exc}", file=sys.stderr)
        controller.stop()
        exit_after_stop(1)
    # Free heap goes back to the system whenever the work has drained (the start-up pass over
    # every Task first): taskfsm/manager/memory.py.
    memory.settle_after_start([controller.queue, controller.workflow_queue, controller.mpe_queue])
    print(
        f"taskfsm: controller running (workers={settings.workers}, "
        f"leader election={'on' if leader_elect else 'off'}, buckets={settings.buckets}, "
        f"controllers={','.join(sorted(controllers))})",
        file=sys.stderr,
    )
    controller.wait()
    print("taskfsm: stopping", file=sys.stderr)
    controller.stop()
    exit_after_stop(1 if controller.lost_leadership.is_set() else 0)


def _controllers(text: str) -> frozenset[str]:
    """``--controllers``: comma-separated names of taskfsm.manager.controller.CONTROLLERS."""
    from taskfsm.manager.controller import CONTROLLERS

    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(CONTROLLERS))
    if unknown or not names:
        raise SystemExit(
            f"taskfsm: --controllers: unknown controller(s) {', '.join(unknown) or '(none given)'}"
            f"; choose from {', '.join(CONTROLLERS)}"
        )
    return frozenset(names)


CLIENT_EXTRA = "taskfsm[client]"
"""The extra that holds what only the command-line tools need (graphviz for ``diagram``, aiohttp
for ``ui``, argcomplete for completion); the controller image installs without it (aiohttp comes
with the Kubernetes client all the same)."""


def _needs_client_extra(command: str, exc: ImportError) -> NoReturn:
    raise SystemExit(
        f"taskfsm {command}: needs {exc.name or 'a package'} from the client extra: "
        f"pip install '{CLIENT_EXTRA}'"
    ) from None


def cmd_diagram(args: argparse.Namespace) -> int:
    try:
        from machines.diagrams import render
    except ImportError as exc:
        _needs_client_extra("diagram", exc)

    argv = ["--chart", args.chart] if args.chart else []
    if args.check:
        argv.append("--check")
    if args.highlight or args.output:
        argv += [
            "--highlight",
            args.highlight or "",
            "--format",
            args.format or "svg",
            "--output",
            args.output or "-",
        ]
    return render.main(argv)


def cmd_crds(_args: argparse.Namespace) -> int:
    from taskfsm.api.crdgen import crd_documents, render

    print("---\n".join(render(doc) for doc in crd_documents()), end="")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from taskfsm.tools import explain

    namespace = _namespace(args)
    assert namespace is not None
    return explain.main(
        _api_client(args), namespace=namespace, name=args.task, diagram_format=args.diagram
    )


LIST_KINDS = {
    "tasks": "Task",
    "task": "Task",
    "workflows": "Workflow",
    "workflow": "Workflow",
    "wf": "Workflow",
}
"""What ``list`` takes as its optional first word (the kind), as ``kubectl get`` takes a
resource type."""


def cmd_list(args: argparse.Namespace) -> int:
    from taskfsm.api import constants as c
    from taskfsm.tools import tasks, views

    namespace = _namespace(args)
    if LIST_KINDS[args.kind] == c.KIND_WORKFLOW:
        if args.workflow:
            raise SystemExit("taskfsm list workflows: --workflow selects Tasks; use -l or --phase")
        view: views.View = views.WorkflowList(
            namespace,
            args.output,
            {c.KIND_WORKFLOW: args.selector, c.KIND_TASK: None},
            phase=args.phase,
        )
    elif not args.watch:
        return tasks.list_main(
            _rest(args),
            namespace,
            args.output,
            workflow=args.workflow,
            phase=args.phase,
            label_selector=args.selector,
        )
    else:
        view = views.TaskList(
            namespace,
            args.output,
            {c.KIND_TASK: args.selector},
            workflow=args.workflow,
            phase=args.phase,
        )
    return views.watch(_rest(args), view) if args.watch else views.show_once(_rest(args), view)


def cmd_get(args: argparse.Namespace) -> int:
    from taskfsm.api import constants as c
    from taskfsm.tools import tasks, views

    namespace = _namespace(args)
    assert namespace is not None
    named = [tasks.split_kind(name) for name in args.tasks]
    workflows = [name for kind, name in named if kind == c.KIND_WORKFLOW]
    task_names = [name for kind, name in named if kind != c.KIND_WORKFLOW]
    if not workflows and not args.watch:
        return tasks.get_main(_rest(args), namespace, task_names, args.output)
    view = views.Get(
        namespace,
        args.output,
        {c.KIND_TASK: None, **({c.KIND_WORKFLOW: None} if workflows else {})},
        tasks=task_names,
        workflows=workflows,
    )
    if args.watch:
        return views.watch(_rest(args), view)
    return views.show_once(_rest(args), view, single=len(args.tasks) == 1)


def _is_workflow(name: str) -> tuple[bool, str]:
    """(whether ``name`` is ``workflow/NAME``, NAME or the Task name)."""
    from taskfsm.api import constants as c
    from taskfsm.tools.tasks import split_kind

    kind, bare = split_kind(name)
    return kind == c.KIND_WORKFLOW, bare


def cmd_logs(args: argparse.Namespace) -> int:
    from taskfsm.tools import logs, workflows

    namespace = _namespace(args)
    assert namespace is not None
    workflow, name = _is_workflow(args.task)
    try:
        if workflow:
            if args.follow:
                raise SystemExit(
                    "taskfsm logs: -f follows one Task's log; leave it out for workflow/NAME"
                )
            return workflows.logs_main(
                _rest(args), namespace, name, tail=args.tail, container=args.container
            )
        return logs.logs_main(
            _rest(args),
            namespace,
            name,
            follow=args.follow,
            tail=args.tail,
            container=args.container,
        )
    except KeyboardInterrupt:
        return 130


def cmd_wait(args: argparse.Namespace) -> int:
    from taskfsm.kube.resources import TASKS, WORKFLOWS
    from taskfsm.tools import tasks

    namespace = _namespace(args)
    assert namespace is not None
    try:
        spec = tasks.WaitSpec(args.wait_for)
    except ValueError as exc:
        raise SystemExit(f"taskfsm wait: {exc}") from None
    workflow, name = _is_workflow(args.task)
    resource = WORKFLOWS if workflow else TASKS
    return tasks.wait_main(_rest(args), namespace, name, spec, args.timeout, res=resource)


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        from taskfsm.tools.ui import server
    except ImportError as exc:
        _needs_client_extra("ui", exc)

    return server.main(_rest(args), _namespace(args), port=args.port, context=args.context or "")


def cmd_completion(args: argparse.Namespace) -> int:
    try:
        from argcomplete.shell_integration import shellcode
    except ImportError as exc:
        _needs_client_extra("completion", exc)

    print(shellcode(["taskfsm", "kubectl-taskfsm"], shell=args.shell), end="")
    return 0


def cmd_render_job(args: argparse.Namespace) -> int:
    from taskfsm.tools import render_job

    return render_job.main(args)


PLUGIN = "kubectl-taskfsm"
"""The kubectl plugin's executable (``kubectl taskfsm ...``): the same CLI under another name."""


def program_name(argv0: str) -> str:
    """What usage and help call the program: ``kubectl taskfsm`` when run as the kubectl plugin
    (kubectl passes the plugin's path as ``argv[0]``), else ``taskfsm``."""
    return "kubectl taskfsm" if os.path.basename(argv0) == PLUGIN else "taskfsm"


def build_parser(prog: str = "taskfsm") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="taskfsm: the nagare media engine Task controller, and its tools.",
    )
    parser.add_argument("--version", action="version", version=f"taskfsm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run the Task controller",
        description="Run the Task controller against a cluster.",
    )
    _add_kube_flags(run)
    run.add_argument(
        "--config",
        help="WorkflowManagerConfiguration file: NATS url, username and password (copied into "
        "every Task's helper data) and workflowTerminationWaitingDuration (20s when not given) "
        "(default: none)",
    )
    run.add_argument(
        "--namespace",
        help="watch the Tasks (and the other namespaced kinds) of this namespace only "
        "(default: all namespaces)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=defaults.WORKERS,
        help="concurrent Task reconciles; one Task is never reconciled twice at once (default 4)",
    )
    run.add_argument(
        "--queue-fairness",
        choices=defaults.QUEUE_FAIRNESS_CHOICES,
        default=defaults.QUEUE_FAIRNESS,
        help="order of the Task and Workflow work queues: namespace serves the namespaces round "
        "robin, so one tenant's flood does not delay another's Tasks; fifo is one queue for "
        "every key (default namespace)",
    )
    run.add_argument(
        "--namespace-weights",
        help="comma-separated namespace=weight: Tasks a namespace is served per turn of the "
        "round robin, e.g. media-live=4,batch=1; a namespace not named weighs 1 (default none)",
    )
    run.add_argument(
        "--max-in-flight-per-namespace",
        type=int,
        default=defaults.MAX_IN_FLIGHT_PER_NAMESPACE,
        help="Tasks of one namespace reconciled at once, at most, so one namespace never holds "
        "every worker; 0: no cap (default 0)",
    )
    run.add_argument(
        "--metrics-bind-address",
        default=defaults.METRICS_ADDRESS,
        help="host:port of Prometheus /metrics; '' disables (default :8080)",
    )
    run.add_argument(
        "--health-probe-bind-address",
        default=defaults.HEALTH_ADDRESS,
        help="host:port of /healthz and /readyz; '' disables (default :8081)",
    )
    run.add_argument(
        "--leader-elect",
        dest="leader_elect",
        action="store_true",
        default=None,
        help="Lease-based leader election (default: on in a Pod without --kubeconfig, "
        "off otherwise)",
    )
    run.add_argument(
        "--no-leader-elect",
        "--local",
        dest="leader_elect",
        action="store_false",
        help="no leader election: run exactly one such replica",
    )
    run.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: $POD_NAMESPACE, else default)",
    )
    run.add_argument(
        "--leader-election-id",
        default=defaults.LEASE_NAME,
        help="name of the Lease (default taskfsm-task-controller)",
    )
    run.add_argument(
        "--leader-election-identity",
        help="this replica's Lease holderIdentity (default: host name and a random suffix)",
    )
    run.add_argument(
        "--leader-election-lease-duration",
        type=_seconds,
        default=defaults.LEASE_DURATION,
        help="seconds a follower waits for a Lease not renewed before taking it (default 15)",
    )
    run.add_argument(
        "--leader-election-renew-deadline",
        type=_seconds,
        default=defaults.RENEW_DEADLINE,
        help="seconds a leader keeps trying to renew before it gives up and exits; writes need a "
        "renewal sent less than this long ago (default 10)",
    )
    run.add_argument(
        "--leader-election-retry-period",
        type=_seconds,
        default=defaults.RETRY_PERIOD,
        help="seconds between renewals and between acquisition attempts (default 2)",
    )
    run.add_argument(
        "--resync-period",
        type=_seconds,
        default=defaults.RESYNC_SECONDS,
        help="seconds after which a Task with a Job (or waiting for one) is reconciled again "
        "without any event (default 300)",
    )
    run.add_argument(
        "--job-ttl-seconds",
        type=_whole_seconds,
        default=defaults.JOB_TTL_SECONDS,
        help="ttlSecondsAfterFinished of every Job (overrides the Function's template): how long "
        "a finished Job and its logs stay (default 86400)",
    )
    run.add_argument(
        "--finished-ttl",
        type=_ttl,
        default=defaults.FINISHED_TTL,
        help="how long a Succeeded or Failed Workflow (deleted with its Tasks), and a finished "
        "Task whose Workflow does not exist, are kept after their endTime before they are "
        "deleted: seconds or a duration (90m, 168h); 0 keeps them forever (default 0)",
    )
    run.add_argument(
        "--cleanup-timeout",
        type=_seconds,
        default=defaults.CLEANUP_TIMEOUT,
        help="seconds a deleting Task waits for an unreachable MediaProcessingEntity to clean up "
        "its Job before leaving it behind with a Warning Event JobAbandoned (default 120)",
    )
    run.add_argument(
        "--orphan-sweep-period",
        type=_seconds,
        default=defaults.ORPHAN_SWEEP_SECONDS,
        help="seconds between searches for Jobs and Secrets whose Task is gone; they are also "
        "found on every reconcile of their Task's key (default 60)",
    )
    run.add_argument(
        "--api-error-max-backoff",
        type=_seconds,
        default=defaults.API_ERROR_MAX_BACKOFF,
        help="cap in seconds on the retry backoff of a reconcile that failed because the API "
        "was unreachable or refused; errors of the object itself back off up to ~16 min "
        "(default 30)",
    )
    run.add_argument(
        "--watch-timeout",
        type=_seconds,
        default=defaults.WATCH_TIMEOUT,
        help="server-side duration in seconds of one watch request, each jittered down to "
        "80-100%% (default 240)",
    )
    run.add_argument(
        "--watch-read-margin",
        type=_seconds,
        default=defaults.WATCH_READ_MARGIN,
        help="seconds past the watch timeout before a silent connection counts as dead "
        "(default 30)",
    )
    run.add_argument(
        "--watch-max-backoff",
        type=_seconds,
        default=defaults.WATCH_MAX_BACKOFF,
        help="cap in seconds on the wait before retrying a failing list or watch, jittered "
        "0.5-1.5x (default 30)",
    )
    run.add_argument(
        "--shutdown-timeout",
        type=_seconds,
        default=defaults.SHUTDOWN_TIMEOUT,
        help="seconds in-flight reconciles get on SIGTERM (default 30)",
    )
    run.add_argument(
        "--cache-sync-timeout",
        type=_seconds,
        default=defaults.CACHE_SYNC_TIMEOUT,
        help="seconds to wait for the first lists before exiting with 1 (default 120)",
    )
    run.add_argument(
        "--buckets",
        type=int,
        default=defaults.BUCKETS,
        help="split the Tasks and Workflows into this many buckets, each owned through a Lease "
        "taskfsm-bucket-<i>-of-<B>, so the replicas share the work; 1: one leader does "
        "everything. Above 1 it needs --leader-elect; every replica must run the same value, "
        "and at least as many buckets as replicas keep every replica busy (default 1)",
    )
    run.add_argument(
        "--controllers",
        default=",".join(defaults.CONTROLLERS),
        help="comma-separated controllers to run: task (Tasks, their Jobs, the orphan sweep), "
        "workflow (Workflow phases; leave it out beside another Workflow controller), mpe (the "
        "MediaProcessingEntity finalizer and Ready/Failed conditions); a controller left out "
        "writes nothing (default task,workflow,mpe)",
    )
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text, or json for one JSON object per line; every line of a reconcile carries key "
        "and reconcile_id (default text)",
    )
    run.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)"
    )
    run.add_argument(
        "--job-pods-refused-timeout",
        type=_seconds,
        default=defaults.JOB_PODS_REFUSED_TIMEOUT,
        help="seconds a Running Task waits while its Job's pods are refused (Pod Security, an "
        "admission policy, a quota; Ready=False JobPodsRefused meanwhile) before it fails; "
        "0 waits for ever (default 600)",
    )
    run.add_argument(
        "--metrics-secure",
        action="store_true",
        help="serve /metrics over HTTPS to callers whose bearer token the API server "
        "authenticates (TokenReview) and allows to get /metrics (SubjectAccessReview), as "
        "controller-runtime does; e.g. with --metrics-bind-address=:8443",
    )
    run.add_argument(
        "--metrics-cert-dir",
        help="directory with tls.crt and tls.key for --metrics-secure (reloaded when they change); "
        "without it a self-signed certificate is made at start",
    )
    run.add_argument(
        "--metrics-tenant-labels",
        action="store_true",
        help="let metric labels name tenants' remote API servers and Job namespaces (one "
        "taskfsm_watch_healthy series per MediaProcessingEntity Job watch, the remote host of "
        "rest_client_requests_total and rest_client_request_duration_seconds); without it they "
        "read jobs@main, jobs@remote and remote",
    )
    run.add_argument(
        "--allow-kubeconfig-exec",
        action="store_true",
        help="let ClusterMediaProcessingEntity kubeconfigs use exec and auth-provider credential "
        "plugins, which run inside the controller (never namespaced MediaProcessingEntities'; "
        "docs/security.md)",
    )
    run.add_argument(
        "--allow-kubeconfig-insecure",
        action="store_true",
        help="let ClusterMediaProcessingEntity kubeconfigs use insecure-skip-tls-verify and "
        "http:// servers (never namespaced MediaProcessingEntities')",
    )
    run.add_argument(
        "--allow-kubeconfig-proxy",
        action="store_true",
        help="let ClusterMediaProcessingEntity kubeconfigs use proxy-url (never namespaced "
        "MediaProcessingEntities')",
    )
    run.set_defaults(func=cmd_run)

    diagram = sub.add_parser(
        "diagram",
        help="render the Task and Workflow lifecycle diagrams (diagrams/, docs/*lifecycle.md)",
    )
    diagram.add_argument(
        "--chart", choices=("task", "workflow"), help="one chart only (default: both)"
    )
    diagram.add_argument(
        "--check", action="store_true", help="exit 1 if the committed diagrams are stale"
    )
    diagram.add_argument("--highlight", help="render one diagram with this state or phase marked")
    diagram.add_argument(
        "--format", choices=("mermaid", "dot", "svg", "png"), help="format for --highlight (svg)"
    )
    diagram.add_argument("--output", help="file for --highlight ('-' = stdout)")
    diagram.set_defaults(func=cmd_diagram)

    crds = sub.add_parser("crds", help="print the CustomResourceDefinitions as YAML")
    crds.set_defaults(func=cmd_crds)

    explain = sub.add_parser(
        "explain",
        help="show a Task's (or Workflow's) phase, conditions, refs, Job and lifecycle position",
    )
    _add_kube_flags(explain)
    _add_task_argument(explain, help="Task name, or workflow/NAME for a Workflow")
    _add_namespace_flags(explain, all_namespaces=False)
    explain.add_argument(
        "--diagram",
        choices=("text", "mermaid", "none"),
        default="text",
        help="how to show the lifecycle",
    )
    explain.set_defaults(func=cmd_explain)

    output_help = "output format: wide (more columns), json, yaml, name (default: a table)"
    watch_help = (
        "after the current view, print each row again when its object changes (a Kubernetes "
        "watch) until Ctrl-C"
    )
    list_ = sub.add_parser(
        "list",
        aliases=["ls"],
        help="list Tasks (phase, reason, Workflow, MPE, Job, age) or Workflows (phase, "
        "conditions, their Tasks by phase)",
    )
    _add_kube_flags(list_)
    _add_namespace_flags(list_, all_namespaces=True)
    list_.add_argument(
        "kind",
        nargs="?",
        default="tasks",
        choices=LIST_KINDS,
        help="tasks (the default) or workflows",
    )
    list_.add_argument("-o", "--output", choices=OUTPUTS, help=output_help)
    list_.add_argument("--workflow", help="only the Tasks of this Workflow")
    list_.add_argument(
        "--phase", help="only Tasks (or Workflows) in this phase (New: not reconciled yet)"
    )
    list_.add_argument("-l", "--selector", help="label selector, as kubectl's -l")
    list_.add_argument("-w", "--watch", action="store_true", help=watch_help)
    list_.set_defaults(func=cmd_list)

    get = sub.add_parser(
        "get",
        help="show Tasks by name, or a Workflow with its Tasks as workflow/NAME (-o json|yaml: "
        "the whole object)",
    )
    _add_kube_flags(get)
    _add_namespace_flags(get, all_namespaces=False)
    _add_task_argument(get, "tasks", nargs="+", help="Task names, or workflow/NAME")
    get.add_argument("-o", "--output", choices=OUTPUTS, help=output_help)
    get.add_argument("-w", "--watch", action="store_true", help=watch_help)
    get.set_defaults(func=cmd_get)

    logs = sub.add_parser(
        "logs",
        help="print the logs of a Task's Job pods (local or remote MediaProcessingEntity), or "
        "of each Task of workflow/NAME",
    )
    _add_kube_flags(logs)
    _add_namespace_flags(logs, all_namespaces=False)
    _add_task_argument(
        logs, help="Task name, or workflow/NAME (each Task's lines prefixed with [TASK])"
    )
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="wait for the Job and its pod, then stream the newest pod's log until it ends "
        "(a Task only)",
    )
    logs.add_argument("--tail", type=int, help="only the last N lines of each container")
    logs.add_argument("-c", "--container", help="one container (default: every container)")
    logs.set_defaults(func=cmd_logs)

    wait = sub.add_parser(
        "wait",
        help="wait until a Task (or workflow/NAME) is in a phase or has a condition (watching, "
        "not polling)",
    )
    _add_kube_flags(wait)
    _add_namespace_flags(wait, all_namespaces=False)
    _add_task_argument(wait, help="Task name, or workflow/NAME")
    wait.add_argument(
        "--for",
        dest="wait_for",
        default="phase=Succeeded",
        help="phase=PHASE, condition=TYPE[=STATUS] or delete (default phase=Succeeded); a "
        "Task or Workflow that ends in another terminal phase ends the wait with exit 1",
    )
    wait.add_argument(
        "--timeout",
        type=_duration,
        default=30.0,
        help="how long to wait: seconds, or as kubectl writes it (90s, 5m, 1h; default 30s)",
    )
    wait.set_defaults(func=cmd_wait)

    ui = sub.add_parser(
        "ui",
        help="a local read-only web page: the lifecycles with the cluster's Tasks on them, live",
        description="Serve a read-only page on 127.0.0.1 (a free port, printed; opens nothing): "
        "the Task and Workflow charts with each state's live count, the Tasks in a state, a "
        "Task's path, Events, Job, pods and log tail. Uses your kubeconfig and RBAC; Ctrl-C "
        "stops. docs/ui.md.",
    )
    _add_kube_flags(ui)
    _add_namespace_flags(ui, all_namespaces=True)
    ui.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    ui.set_defaults(func=cmd_ui)

    completion = sub.add_parser(
        "completion",
        help='print shell completion code: eval "$(taskfsm completion bash)"',
    )
    completion.add_argument("shell", choices=("bash", "zsh", "fish", "tcsh", "powershell"))
    completion.set_defaults(func=cmd_completion)

    render_job = sub.add_parser(
        "render-job",
        help="print the Job and Secret a Task would produce, from local YAML files (no cluster)",
    )
    render_job.add_argument(
        "files",
        nargs="+",
        help="YAML files with the Task, Function, Workflow and optionally TaskTemplate, "
        "MediaLocations, Secrets",
    )
    render_job.add_argument("--task", help="Task name when the files hold several")
    render_job.add_argument(
        "--namespace", default="default", help="namespace for objects without one"
    )
    render_job.add_argument(
        "--show-secrets", action="store_true", help="print the helper data unmasked"
    )
    render_job.set_defaults(func=cmd_render_job)
    for choice in sub._choices_actions:  # `taskfsm CMD --help` opens with the command's summary
        command = sub.choices[choice.dest]
        command.description = command.description or choice.help
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(program_name(sys.argv[0]))
    if "_ARGCOMPLETE" in os.environ:  # a shell asks for completions (argcomplete's protocol)
        try:
            import argcomplete
        except ImportError:  # no client extra (the controller image): nothing to offer
            return 1
        # Exits after answering; options only after a "-", as kubectl.
        argcomplete.autocomplete(parser, always_complete_options=False)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


def complete(words: Sequence[str]) -> list[str]:
    """What the shell would offer after ``taskfsm WORDS...``; the last word is the one being
    completed ("" for a new word)."""
    import io

    import argcomplete

    line = " ".join(["taskfsm", *words])
    env = {
        "_ARGCOMPLETE": "1",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_IFS": "\n",
        "_ARGCOMPLETE_SUPPRESS_SPACE": "1",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    out = io.StringIO()
    try:
        argcomplete.autocomplete(
            build_parser(),
            output_stream=out,
            exit_method=lambda _: None,
            always_complete_options=False,
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return [word.strip() for word in out.getvalue().split("\n") if word.strip()]


def kubectl_complete() -> int:
    """``kubectl_complete-taskfsm``: kubectl runs it with the words after ``kubectl taskfsm``
    (the last one being completed) and reads one completion per line, then ``:4`` (Cobra's
    "no file completion" directive)."""
    for word in complete(sys.argv[1:]):
        print(word)
    print(":4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
