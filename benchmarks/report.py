"""docs/benchmarks.md is written by five harnesses: each owns some ``## `` sections of it and
must leave the others as they are (a harness run alone, or re-rendered from its JSON, must not
drop what another measured). Standard library only, so every harness can import it."""

from __future__ import annotations

import re
from pathlib import Path


def _section(heading: str) -> re.Pattern[str]:
    """A ``## `` section whose heading line matches the regex ``heading``, up to the next one."""
    return re.compile(rf"^({heading})\n.*?(?=^## |\Z)", re.S | re.M)


def sections(text: str) -> list[tuple[str, str]]:
    """``text``'s ``## `` sections as (heading line, whole section), in order; what comes before
    the first one is left out."""
    return [(m.group(1), m.group(0)) for m in _section(r"## [^\n]*").finditer(text)]


def write_section(path: Path, section: str) -> None:
    """Put ``section`` (starting with its ``## `` heading) in place of the section of that
    heading in ``path``, or at its end when it has none."""
    heading = section.split("\n", 1)[0]
    text = path.read_text() if path.exists() else ""
    pattern = _section(re.escape(heading))
    if pattern.search(text):
        text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    path.write_text(text.rstrip("\n") + "\n")


def publish(section: str, output: str) -> None:
    """Print ``section`` and, unless ``output`` is ``''``, put it in place in that report (what
    every harness does with its section at the end)."""
    print(section)
    if output:
        write_section(Path(output), section)


def write_report(path: Path, report: str) -> None:
    """Write ``report`` (a whole page with its own sections) to ``path``, then the sections
    ``path`` already had under headings ``report`` does not have, in their order."""
    own = {heading for heading, _ in sections(report)}
    old = path.read_text() if path.exists() else ""
    kept = [body.rstrip("\n") for heading, body in sections(old) if heading not in own]
    path.write_text("\n\n".join([report.rstrip("\n"), *kept]) + "\n")
