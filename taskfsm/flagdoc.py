"""The flag table of ``taskfsm run`` in docs/operations.md ("Flags"), generated from the argparse
parser of taskfsm/cli/, so the table, ``taskfsm run --help`` and the code cannot disagree.

One row per option: its names, its default and its meaning, all from the parser. A help text ends
with its default in parentheses, ``(default 4)`` or ``(default: host name and a random suffix)``;
where the option has a default value of its own, the stated one must be that value (checked
here, so a changed default cannot leave an old one in the help or the docs).

    python -m taskfsm.flagdoc            # rewrite the table in docs/operations.md
    python -m taskfsm.flagdoc --check    # exit 1 when it is stale

This module sits above ``taskfsm.cli`` (it reads its parser), outside the layers of
docs/architecture.md; nothing in ``taskfsm`` imports it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from taskfsm.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
BEGIN = "<!-- BEGIN GENERATED: run-flags (python -m taskfsm.flagdoc) -->"
END = "<!-- END GENERATED: run-flags -->"
_DEFAULT = re.compile(r"\s*\(default:? (?P<default>[^()]*(?:\([^()]*\)[^()]*)*)\)$")


class FlagDocError(ValueError):
    """A help text of the parser does not follow the convention above."""


def run_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The ``run`` subcommand's parser."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["run"]  # type: ignore[no-any-return]  # argparse is untyped here
    raise FlagDocError("taskfsm's parser has no subcommands")


def _shown(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def rows(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, str, str]]:
    """``(options, default, meaning)`` of every ``taskfsm run`` option, in the parser's order."""
    run = run_parser(parser)
    formatter = run._get_formatter()
    out = []
    for action in run._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(f"`{name}`" for name in action.option_strings)
        text = formatter._expand_help(action) if action.help else ""
        if not text:
            raise FlagDocError(f"{names} has no help text")
        found = _DEFAULT.search(text)
        has_value = action.default is not None and action.nargs != 0
        if found:
            default, meaning = found["default"], text[: found.start()]
            if has_value:
                if default != _shown(action.default):
                    raise FlagDocError(
                        f"{names}: the help says default {default!r}, the parser has "
                        f"{_shown(action.default)!r}"
                    )
                default = f"`{default}`"  # a value; otherwise words describing it
        elif has_value:
            raise FlagDocError(f"{names}: the help does not end with (default ...)")
        else:
            default, meaning = "—", text  # a switch setting what another flag defaults
        out.append((names, default, meaning))
    return out


def table(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown table, with the markers around it."""
    lines = [BEGIN, "| Flag | Default | Meaning |", "|---|---|---|"]
    for names, default, meaning in rows(parser):
        cells = (c.replace("|", "\\|") for c in (names, default, meaning))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, END])


def render(text: str, parser: argparse.ArgumentParser | None = None) -> str:
    """``text`` (docs/operations.md) with the block between the markers rebuilt."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise FlagDocError(f"expected one {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + table(parser) + tail


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(
        prog="python -m taskfsm.flagdoc",
        description="Write the `taskfsm run` flag table of docs/operations.md from the parser.",
    )
    args.add_argument("--check", action="store_true", help="exit 1 when the table is stale")
    check = args.parse_args(argv).check
    current = OPERATIONS.read_text(encoding="utf-8")
    wanted = render(current)
    if check:
        if wanted != current:
            print("stale: docs/operations.md (run `make generate`)", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        OPERATIONS.write_text(wanted, encoding="utf-8")
        print("wrote docs/operations.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
