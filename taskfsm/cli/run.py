"""``taskfsm run``: its flags, and the controller process they configure.

:func:`add_run_command` declares the flags (docs/operations.md's flag table is generated from
them: :mod:`taskfsm.flagdoc`); :func:`cmd_run` turns them into
:class:`taskfsm.manager.settings.Settings`, refuses settings that cannot work together with the
one check the manager applies (:func:`taskfsm.manager.settings.check`), and runs the controller
until it is told to stop.
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
from typing import NoReturn

from taskfsm import defaults
from taskfsm.api.duration import SECOND, parse_go_duration
from taskfsm.cli.access import add_kube_flags, api_client


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


def parse_ttl(text: str) -> float:
    """``--finished-ttl``: like :func:`_seconds` (``3600``, ``90m``, ``168h``), never negative
    (0 keeps forever)."""
    seconds = _seconds(text)
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"not a duration of 0 or more: {text!r}")
    return seconds


SIGNAL_POLL_SECONDS = 1.0
"""How often the main thread wakes to run a pending signal handler (:func:`cmd_run`)."""


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


def parse_namespace_weights(text: str) -> tuple[tuple[str, int], ...]:
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
    from taskfsm.manager import memory, structured_logs
    from taskfsm.manager.manager import Manager, Settings
    from taskfsm.manager.settings import check

    faulthandler.enable()
    memory.limit_arenas()  # before any thread starts (taskfsm/manager/memory.py)
    structured_logs.configure(level=args.log_level, json=args.log_format == "json")
    try:
        config = WorkflowManagerConfiguration.load(args.config) if args.config else None
    except (OSError, InvalidObjectError) as exc:  # one line, never the file's content
        raise SystemExit(f"taskfsm: --config: {exc}") from None
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not args.kubeconfig
    leader_elect = args.leader_elect if args.leader_elect is not None else in_cluster
    controllers = parse_controllers(args.controllers)
    settings = Settings(
        workers=args.workers,
        queue_fairness=args.queue_fairness,
        namespace_weights=parse_namespace_weights(args.namespace_weights or ""),
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
        task_phase_events=args.task_phase_events,
        http_transport=args.http_transport,
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
    try:
        check(settings)  # the manager checks them too; here they end the process with a message
    except ValueError as exc:
        raise SystemExit(f"taskfsm: {exc}") from None
    controller = Manager(api_client(args), settings)
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
    # Wake every second: CPython runs a signal's handler only when the main thread runs Python
    # code, and a SIGTERM the kernel hands to another thread (one blocked in libcurl, say)
    # would otherwise wait until the main thread's lock wait ends by itself.
    while not controller.wait(SIGNAL_POLL_SECONDS):
        pass
    print("taskfsm: stopping", file=sys.stderr)
    controller.stop()
    exit_after_stop(1 if controller.lost_leadership.is_set() else 0)


def parse_controllers(text: str) -> frozenset[str]:
    """``--controllers``: the comma-separated names (:func:`taskfsm.manager.settings.check`
    refuses unknown ones)."""
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def add_run_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` and its flags to the subcommands ``sub``."""
    run = sub.add_parser(
        "run",
        help="run the Task controller",
        description="Run the Task controller against a cluster.",
    )
    add_kube_flags(run)
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
        type=parse_ttl,
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
        "--http-transport",
        choices=("libcurl", "urllib3"),
        default="libcurl",
        help="how ordinary API requests are sent: libcurl (a fifth of the CPU per request) "
        "where a cluster's client configuration allows it (no proxy, no TLS server name), else "
        "the Kubernetes client's urllib3 pool; urllib3: always the pool. Watches always take "
        "the pool (default libcurl)",
    )
    run.add_argument(
        "--task-phase-events",
        action="store_true",
        help="write a Normal Event for each phase change of a Task (JobPending, Running, "
        "Succeeded), two Event writes per Task; without it the Task's status says it "
        "(phase, conditions) and a Failed Task still gets its Warning Event",
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
