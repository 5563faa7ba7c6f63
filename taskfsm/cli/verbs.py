"""The user verbs: ``diagram``, ``crds``, ``explain``, ``list``, ``get``, ``logs``, ``wait``,
``ui``, ``completion`` and ``render-job``. Each is a thin wrapper over ``taskfsm.tools`` (or
``machines.diagrams``), imported when the verb runs, so ``--help`` and completion load nothing
else.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from taskfsm.cli.access import add_kube_flags, api_client, namespace_of, rest_of

OUTPUTS = ("wide", "json", "yaml", "name")
"""What ``-o`` takes (taskfsm.tools.tasks.OUTPUTS; repeated so ``--help`` imports nothing)."""


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


def _duration(text: str) -> float:
    """``--timeout``: seconds (``90``), or with kubectl's units (``90s``, ``5m``, ``1h``)."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30, 90s, 5m)") from None


def _complete_tasks(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """Task names of the namespace the command line names (argcomplete completer); after
    ``workflow/``, Workflow names."""
    try:
        from taskfsm.kube.resources import TASKS, WORKFLOWS

        workflow = _is_workflow(prefix)[0]
        kind, before = (WORKFLOWS, prefix[: prefix.index("/") + 1]) if workflow else (TASKS, "")
        found = rest_of(parsed_args).list(kind, namespace_of(parsed_args), limit=500)
        names = [before + t["metadata"]["name"] for t in found.get("items") or []]
    except (Exception, SystemExit):  # completion must never print a traceback into the shell
        return []
    return [name for name in names if name.startswith(prefix)]


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

    namespace = namespace_of(args)
    assert namespace is not None
    return explain.main(
        api_client(args), namespace=namespace, name=args.task, diagram_format=args.diagram
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

    namespace = namespace_of(args)
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
            rest_of(args),
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
    return views.watch(rest_of(args), view) if args.watch else views.show_once(rest_of(args), view)


def cmd_get(args: argparse.Namespace) -> int:
    from taskfsm.api import constants as c
    from taskfsm.tools import tasks, views

    namespace = namespace_of(args)
    assert namespace is not None
    named = [tasks.split_kind(name) for name in args.tasks]
    workflows = [name for kind, name in named if kind == c.KIND_WORKFLOW]
    task_names = [name for kind, name in named if kind != c.KIND_WORKFLOW]
    if not workflows and not args.watch:
        return tasks.get_main(rest_of(args), namespace, task_names, args.output)
    view = views.Get(
        namespace,
        args.output,
        {c.KIND_TASK: None, **({c.KIND_WORKFLOW: None} if workflows else {})},
        tasks=task_names,
        workflows=workflows,
    )
    if args.watch:
        return views.watch(rest_of(args), view)
    return views.show_once(rest_of(args), view, single=len(args.tasks) == 1)


def _is_workflow(name: str) -> tuple[bool, str]:
    """(whether ``name`` is ``workflow/NAME``, NAME or the Task name)."""
    from taskfsm.api import constants as c
    from taskfsm.tools.tasks import split_kind

    kind, bare = split_kind(name)
    return kind == c.KIND_WORKFLOW, bare


def cmd_logs(args: argparse.Namespace) -> int:
    from taskfsm.tools import logs, workflows

    namespace = namespace_of(args)
    assert namespace is not None
    workflow, name = _is_workflow(args.task)
    try:
        if workflow:
            if args.follow:
                raise SystemExit(
                    "taskfsm logs: -f follows one Task's log; leave it out for workflow/NAME"
                )
            return workflows.logs_main(
                rest_of(args), namespace, name, tail=args.tail, container=args.container
            )
        return logs.logs_main(
            rest_of(args),
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

    namespace = namespace_of(args)
    assert namespace is not None
    try:
        spec = tasks.WaitSpec(args.wait_for)
    except ValueError as exc:
        raise SystemExit(f"taskfsm wait: {exc}") from None
    workflow, name = _is_workflow(args.task)
    resource = WORKFLOWS if workflow else TASKS
    return tasks.wait_main(rest_of(args), namespace, name, spec, args.timeout, res=resource)


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        from taskfsm.tools.ui import server
    except ImportError as exc:
        _needs_client_extra("ui", exc)

    return server.main(
        rest_of(args), namespace_of(args), port=args.port, context=args.context or ""
    )


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


def add_verb_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the user verbs to the subcommands ``sub``."""
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
    add_kube_flags(explain)
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
    add_kube_flags(list_)
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
    add_kube_flags(get)
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
    add_kube_flags(logs)
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
    add_kube_flags(wait)
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
    add_kube_flags(ui)
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
