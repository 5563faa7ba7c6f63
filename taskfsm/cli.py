"""The ``taskfsm`` command line: thin wrappers over the library (``taskfsm --help``).

Commands: ``run`` (the controller), ``demo`` (everything on a local control plane), ``diagram``
(render the lifecycle), ``crds`` (print the CRDs), ``explain`` (a Task's state, with the lifecycle
diagram), ``render-job`` (the Job and Secret a Task would produce, offline).
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
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from taskfsm import __version__

if TYPE_CHECKING:
    from taskfsm.kube.client import ApiClient


def _add_kube_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig file of the main cluster (default: $KUBECONFIG, ~/.kube/config, "
        "else in-cluster)",
    )
    parser.add_argument(
        "--context", help="kubeconfig context to use (default: the current context)"
    )


def _api_client(args: argparse.Namespace) -> ApiClient:
    from taskfsm.kube import client as kube_client
    from taskfsm.kube.client import ConfigException

    if (
        args.kubeconfig
        or os.environ.get("KUBECONFIG")
        or Path("~/.kube/config").expanduser().exists()
    ):
        return kube_client.from_kubeconfig(args.kubeconfig, context=args.context)
    try:
        return kube_client.in_cluster()
    except ConfigException:
        raise SystemExit(
            "no kubeconfig found and not running in a cluster: pass --kubeconfig"
        ) from None


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


def cmd_run(args: argparse.Namespace) -> NoReturn:
    """Run until SIGTERM/SIGINT (exit 0 after a graceful stop) or a lost Lease (exit 1).

    Ends the process itself (:func:`exit_after_stop`); a fatal signal prints every thread's
    traceback to stderr (:mod:`faulthandler`).
    """
    from taskfsm.api.config import WorkflowManagerConfiguration
    from taskfsm.manager import logs
    from taskfsm.manager.controller import Controller, Settings

    faulthandler.enable()
    logs.configure(level=args.log_level, json=args.log_format == "json")
    config = WorkflowManagerConfiguration.load(args.config) if args.config else None
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
    if args.buckets < 1:
        raise SystemExit(f"taskfsm: --buckets must be at least 1, got {args.buckets}")
    if args.buckets > 1 and not leader_elect:
        raise SystemExit(
            "taskfsm: --buckets above 1 needs leader election (--leader-elect): the buckets are "
            "Leases"
        )
    settings = Settings(
        workers=args.workers,
        namespace=args.namespace,
        metrics_address=args.metrics_bind_address or None,
        health_address=args.health_probe_bind_address or None,
        leader_election=leader_elect,
        lease_namespace=args.leader_election_namespace
        or os.environ.get("POD_NAMESPACE", "default"),
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
        api_error_max_backoff=args.api_error_max_backoff,
        buckets=args.buckets,
        controllers=controllers,
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


def cmd_demo(args: argparse.Namespace) -> NoReturn:
    """The embedded demo; ends the process itself like :func:`cmd_run`."""
    from taskfsm.tools import demo

    exit_after_stop(demo.main(output=Path(args.output), timeout=args.timeout, keep=args.keep))


def cmd_diagram(args: argparse.Namespace) -> int:
    from machines.diagrams import render

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

    return explain.main(
        _api_client(args), namespace=args.namespace, name=args.task, diagram_format=args.diagram
    )


def cmd_render_job(args: argparse.Namespace) -> int:
    from taskfsm.tools import render_job

    return render_job.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="taskfsm",
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
        default=4,
        help="concurrent Task reconciles; one Task is never reconciled twice at once (default 4)",
    )
    run.add_argument(
        "--metrics-bind-address",
        default=":8080",
        help="host:port of Prometheus /metrics; '' disables (default :8080)",
    )
    run.add_argument(
        "--health-probe-bind-address",
        default=":8081",
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
        default="taskfsm-task-controller",
        help="name of the Lease (default taskfsm-task-controller)",
    )
    run.add_argument(
        "--leader-election-identity",
        help="this replica's Lease holderIdentity (default: host name and a random suffix)",
    )
    run.add_argument(
        "--leader-election-lease-duration",
        type=float,
        default=15.0,
        help="seconds a follower waits for a Lease not renewed before taking it (default 15)",
    )
    run.add_argument(
        "--leader-election-renew-deadline",
        type=float,
        default=10.0,
        help="seconds a leader keeps trying to renew before it gives up and exits; writes need a "
        "renewal sent less than this long ago (default 10)",
    )
    run.add_argument(
        "--leader-election-retry-period",
        type=float,
        default=2.0,
        help="seconds between renewals and between acquisition attempts (default 2)",
    )
    run.add_argument(
        "--resync-period",
        type=float,
        default=300.0,
        help="seconds after which a Task with a Job (or waiting for one) is reconciled again "
        "without any event (default 300)",
    )
    run.add_argument(
        "--job-ttl-seconds",
        type=int,
        default=86400,
        help="ttlSecondsAfterFinished of every Job (overrides the Function's template): how long "
        "a finished Job and its logs stay (default 86400)",
    )
    run.add_argument(
        "--cleanup-timeout",
        type=float,
        default=120.0,
        help="seconds a deleting Task waits for an unreachable MediaProcessingEntity to clean up "
        "its Job before leaving it behind with a Warning Event JobAbandoned (default 120)",
    )
    run.add_argument(
        "--orphan-sweep-period",
        type=float,
        default=60.0,
        help="seconds between searches for Jobs and Secrets whose Task is gone; they are also "
        "found on every reconcile of their Task's key (default 60)",
    )
    run.add_argument(
        "--api-error-max-backoff",
        type=float,
        default=30.0,
        help="cap in seconds on the retry backoff of a reconcile that failed because the API "
        "was unreachable or refused; errors of the object itself back off up to ~16 min "
        "(default 30)",
    )
    run.add_argument(
        "--watch-timeout",
        type=float,
        default=240.0,
        help="server-side duration in seconds of one watch request, each jittered down to "
        "80-100%% (default 240)",
    )
    run.add_argument(
        "--watch-read-margin",
        type=float,
        default=30.0,
        help="seconds past the watch timeout before a silent connection counts as dead "
        "(default 30)",
    )
    run.add_argument(
        "--watch-max-backoff",
        type=float,
        default=30.0,
        help="cap in seconds on the wait before retrying a failing list or watch, jittered "
        "0.5-1.5x (default 30)",
    )
    run.add_argument(
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="seconds in-flight reconciles get on SIGTERM (default 30)",
    )
    run.add_argument(
        "--cache-sync-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for the first lists before exiting with 1 (default 120)",
    )
    run.add_argument(
        "--buckets",
        type=int,
        default=1,
        help="split the Tasks and Workflows into this many buckets, each owned through a Lease "
        "taskfsm-bucket-<i>-of-<B>, so the replicas share the work; 1: one leader does "
        "everything. Above 1 it needs --leader-elect; every replica must run the same value, "
        "and at least as many buckets as replicas keep every replica busy (default 1)",
    )
    run.add_argument(
        "--controllers",
        default="task,workflow,mpe",
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
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser(
        "demo", help="run everything on an embedded local control plane with sample Tasks"
    )
    demo.add_argument(
        "--output", default="demo-output", help="directory for the diagrams of the paths taken"
    )
    demo.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for all Tasks")
    demo.add_argument(
        "--keep", action="store_true", help="keep the control plane running until Ctrl-C"
    )
    demo.set_defaults(func=cmd_demo)

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
    explain.add_argument("task", help="Task name, or workflow/NAME for a Workflow")
    explain.add_argument("-n", "--namespace", default="default")
    explain.add_argument(
        "--diagram",
        choices=("text", "mermaid", "none"),
        default="text",
        help="how to show the lifecycle",
    )
    explain.set_defaults(func=cmd_explain)

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
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
