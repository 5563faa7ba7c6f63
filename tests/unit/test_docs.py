"""The documentation stays true: links resolve, and every CLI command and flag it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskfsm import flagdoc
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


def test_flag_table_is_generated_from_the_parser_and_current():
    """docs/operations.md's `taskfsm run` flag table is what `python -m taskfsm.flagdoc` writes
    from the parser: every option once, with the default the parser has."""
    text = (ROOT / "docs" / "operations.md").read_text()
    assert flagdoc.render(text) == text, "stale: run `python -m taskfsm.flagdoc`"
    table = text.split(flagdoc.BEGIN, 1)[1].split(flagdoc.END, 1)[0]
    flags = RUN_FLAG.findall(table)
    assert sorted(flags) == sorted(subcommands()["run"] - {"-h", "--help"})
    assert "| `--workers` | `4` |" in table


def test_a_stated_default_must_be_the_parsers():
    """A help text whose "(default ...)" differs from the option's default fails the generation,
    so the docs cannot keep an old default."""
    parser = build_parser()
    workers = next(a for a in flagdoc.run_parser(parser)._actions if a.dest == "workers")
    workers.default = 8
    with pytest.raises(flagdoc.FlagDocError, match=r"--workers.*default '4'.*'8'"):
        flagdoc.rows(parser)


def test_the_flag_table_is_written_once():
    """The README and the chart point at the generated table instead of keeping copies: no other
    page has a table row starting with a `taskfsm run` flag."""
    run_flags = subcommands()["run"] - {"-h", "--help"}
    copies = []
    for page in [*DOCS, ROOT / "deploy" / "chart" / "README.md"]:
        text = page.read_text()
        if page.name == "operations.md":
            text = text.replace(text.split(flagdoc.BEGIN, 1)[1].split(flagdoc.END, 1)[0], "")
        for line in text.splitlines():
            first = RUN_FLAG.match(line.removeprefix("| ")) if line.startswith("| `--") else None
            if first and first.group(1) in run_flags:
                copies.append(f"{page.name}: {line[:60]}")
    assert copies == []
    readme = (ROOT / "README.md").read_text()
    assert "(docs/operations.md#flags)" in readme


def test_every_subcommand_has_help():
    """`taskfsm <command> --help` exists for every command (argparse adds it; checked anyway)."""
    for name, options in subcommands().items():
        assert "--help" in options, name
