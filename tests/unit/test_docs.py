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
    assert flagdoc.render(text) == text, "stale: run `make generate`"
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


def _go_line(module: str) -> str:
    """The `go` directive of tools/<module>/go.mod, without a trailing .0 (1.26.0 -> 1.26)."""
    text = (ROOT / "tools" / module / "go.mod").read_text()
    version = re.search(r"^go (\S+)$", text, re.M)
    assert version, module
    return version.group(1).removesuffix(".0")


def test_readme_states_the_go_versions_the_builds_need():
    """The README's Go requirement is the `go` lines the builds check (tools/lib.sh): the
    control plane's for the demo, the highest of all tools for the tests."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    demo = _go_line("controlplane")
    tests = max(
        (_go_line(m) for m in ("controlplane", "controlplane-min", "helm", "kueue", "promtool")),
        key=lambda v: tuple(map(int, v.split("."))),
    )
    assert f"Go ≥ {demo} for the demo and ≥ {tests} for the tests" in readme
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert f"demo: tools/controlplane, >= {demo}" in setup
    assert f"test: helm and Kueue, >= {tests}" in setup


CITED_SECTION = re.compile(r"(?:docs/)?([a-z-]+\.md)\]?(?:\([^)]*\))?,? \"([^\"]+)\"")
ANCHOR_LINK = re.compile(r"\]\((?:\.\./)?(?:docs/)?([a-z-]*\.md)?#([a-z0-9-]+)\)")


def _sections(page: Path) -> tuple[set[str], set[str]]:
    """The titles a page can be cited by (headings and bold paragraph leads) and its headings'
    anchors as GitHub makes them."""
    text = page.read_text()
    headings = re.findall(r"^#+ (.+?)\s*$", text, re.M)
    leads = re.findall(r"\*\*([^*]+?)\.?\*\*", text)
    anchors = {
        re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).replace(" ", "-") for h in headings
    }
    return {*headings, *leads}, anchors


def _cited_pages() -> list[Path]:
    chart = ROOT / "deploy" / "chart"
    return [*DOCS, chart / "README.md", chart / "values.yaml"]


@pytest.mark.parametrize("page", _cited_pages(), ids=lambda p: p.name)
def test_cited_sections_exist(page: Path):
    """A section cited by name (`docs/operations.md, "Memory"`) or by anchor (`operations.md#memory`)
    is a heading (or a bold paragraph lead) of that page."""
    text = page.read_text()
    if page.suffix == ".yaml":
        text = re.sub(r"^\s*# ?", "", text, flags=re.M)
    text = re.sub(r"\s*\n\s*", " ", text)  # citations wrap across lines
    missing = []
    for target, section in CITED_SECTION.findall(text):
        path = ROOT / "docs" / target if target != "README.md" else ROOT / target
        if not path.is_file():
            continue  # not a page (e.g. a phrase in quotes after a file name in prose)
        titles, _ = _sections(path)
        if section not in titles:
            missing.append(f'{target}, "{section}"')
    for target, anchor in ANCHOR_LINK.findall(text):
        path = page if not target else (page.parent / target)
        if not path.is_file():
            path = ROOT / "docs" / target
        _, anchors = _sections(path)
        if anchor not in anchors:
            missing.append(f"{target or page.name}#{anchor}")
    assert missing == []
