"""Plain-words validation errors: ``spec.workflowRef: field required``.

Pydantic's ``ValidationError`` is precise but written for Python programmers (``loc`` tuples,
"Input should be ..."). Whatever the controller cannot parse ends up in a Task's
``status.message`` or a log line, so it is rephrased here as ``<field path>: <problem>`` using the
JSON names users write in their YAML. Input values are quoted only for pattern, enum and literal
mismatches (never for anything that may hold Secret data; docs/behaviour.md D15).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_MAX_QUOTED = 60

_TYPE_PROBLEMS = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "bytes_type": "must be a string",
    "datetime_type": "must be an RFC 3339 timestamp",
    "datetime_parsing": "must be an RFC 3339 timestamp",
    "datetime_from_date_parsing": "must be an RFC 3339 timestamp",
    "timezone_aware": "must be an RFC 3339 timestamp with a time zone",
    "none_required": "must be null",
}


def format_field_path(loc: Sequence[int | str]) -> str:
    """A pydantic ``loc`` as a JSON path: ``("spec", "inputs", 0, "id")`` -> ``spec.inputs[0].id``.

    Map keys that are not identifiers are bracketed: ``spec.config["a.b/c"]``.
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _IDENTIFIER.match(part):
            path += f".{part}" if path else part
        else:
            path += f'["{part}"]'
    return path


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_QUOTED else text[: _MAX_QUOTED - 3] + "..."


def describe_problem(error: Any) -> str:
    """One error dict of ``ValidationError.errors()`` as a short plain-words problem."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "field required"
    if kind == "string_pattern_mismatch":
        return f"{_quote(error['input'])} does not match the pattern {ctx['pattern']!r}"
    if kind in ("enum", "literal_error"):
        return f"must be one of {ctx['expected']} (got {_quote(error['input'])})"
    if kind == "value_error":
        return str(ctx.get("error") or error["msg"])
    if kind in _TYPE_PROBLEMS:
        return _TYPE_PROBLEMS[kind]
    message = str(error["msg"])
    return message[:1].lower() + message[1:]


def describe_validation_error(error: ValidationError, *, prefix: str = "") -> str:
    """All problems in ``error`` as ``<path>: <problem>`` joined by ``"; "``.

    ``prefix`` is prepended to every path (e.g. ``"spec.mediaLocations[0]"``). A problem of the
    whole object (empty path) is written without a path.
    """
    lines = []
    for item in error.errors(include_url=False):
        path = format_field_path(item["loc"])
        if prefix:
            path = prefix + ("" if not path or path.startswith("[") else ".") + path
        problem = describe_problem(item)
        lines.append(f"{path}: {problem}" if path else problem)
    return "; ".join(lines)


class InvalidObjectError(ValueError):
    """An object (a custom resource, the helper payload, the process configuration) is invalid.

    ``str(error)`` is ``"<Kind> <namespace>/<name> is invalid: <path>: <problem>; ..."``;
    ``problems`` is the part after the colon. The original ``ValidationError`` is ``__cause__``.
    """

    def __init__(self, what: str, problems: str) -> None:
        super().__init__(f"{what} is invalid: {problems}")
        self.what = what
        self.problems = problems
