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
import os
import sys
from collections.abc import Sequence

from taskfsm import __version__
from taskfsm.cli.run import add_run_command
from taskfsm.cli.verbs import add_verb_commands

PLUGIN = "kubectl-taskfsm"
"""The kubectl plugin's executable (``kubectl taskfsm ...``): the same CLI under another name."""


def program_name(argv0: str) -> str:
    """What usage and help call the program: ``kubectl taskfsm`` when run as the kubectl plugin
    (kubectl passes the plugin's path as ``argv[0]``), else ``taskfsm``."""
    return "kubectl taskfsm" if os.path.basename(argv0) == PLUGIN else "taskfsm"


def build_parser(prog: str = "taskfsm") -> argparse.ArgumentParser:
    """The whole command line: ``run`` (:mod:`taskfsm.cli.run`) and the user verbs
    (:mod:`taskfsm.cli.verbs`)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="taskfsm: the nagare media engine Task controller, and its tools.",
    )
    parser.add_argument("--version", action="version", version=f"taskfsm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_command(sub)
    add_verb_commands(sub)
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
