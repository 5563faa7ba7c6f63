"""The documentation stays true: links resolve, and every CLI command and flag it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskfsm.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
COMMAND = re.compile(r"(?:^|[\s/`])taskfsm ([a-z][a-z-]+)")
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
RUN_FLAG = re.compile(r"`(--[a-z][a-z-]+)")


def subcommands() -> dict[str, set[str]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {
        name: {opt for action in p._actions for opt in action.option_strings}
        for name, p in sub.choices.items()
    }


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path):
    """Every relative link or image in the page points at a file that exists."""
    broken = []
    for target in LINK.findall(doc.read_text()):
        if target.startswith(("http://", "https://", "mailto:", "#")):
            continue
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_cli_commands_named_in_docs_exist(doc: Path):
    """Every `taskfsm <command>` the page mentions is a real subcommand."""
    known = subcommands()
    code = "\n".join(CODE.findall(doc.read_text()))
    named = set(COMMAND.findall(code))
    assert named - set(known) == set()


def test_readme_run_flags_exist():
    """Every flag in the README's configuration table is accepted by `taskfsm run`."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    flags = set(RUN_FLAG.findall(table))
    assert flags, "the configuration table lists no flags"
    assert flags - subcommands()["run"] == set()


def test_every_subcommand_has_help():
    """`taskfsm <command> --help` exists for every command (argparse adds it; checked anyway)."""
    for name, options in subcommands().items():
        assert "--help" in options, name
