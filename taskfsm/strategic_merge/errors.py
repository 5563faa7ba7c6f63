"""The one exception a malformed template patch raises.

The Task controller turns it into ``status.message`` (docs/behaviour.md §3.7.1, D4), so its text
must tell a user *where* in their patch the problem is and *what* it is, in plain words, without
echoing values (patches may carry environment values).
"""

from __future__ import annotations

from collections.abc import Sequence

PathPart = str | int


def format_path(path: Sequence[PathPart]) -> str:
    """Render a JSON path like ``spec.template.spec.containers[0].env`` (``<root>`` when empty).

    Keys that are not plain identifiers (annotation keys such as ``example.com/x``) are quoted in
    brackets so the path stays unambiguous.
    """
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum() and not part[:1].isdigit():
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out or "<root>"


class PatchError(ValueError):
    """A strategic merge patch (or the template it is applied to) cannot be applied.

    Attributes:
        path: where the problem is, as a list of keys and list indexes.
        problem: what is wrong, in plain words.
        patch_index: set by :func:`taskfsm.strategic_merge.merge_job_template` to the position of
            the offending patch among its arguments; ``None`` otherwise.
    """

    def __init__(self, path: Sequence[PathPart], problem: str, *, patch_index: int | None = None):
        self.path = list(path)
        self.problem = problem
        self.patch_index = patch_index
        super().__init__(f"{format_path(self.path)}: {problem}")
