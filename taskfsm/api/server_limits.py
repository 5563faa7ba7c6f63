"""The API server's limits on what the controller writes, and the checks made before writing.

Nothing the controller writes may exceed an API-server limit for an input the CRDs admit
(decisions D24; docs/security.md, "Names and sizes"): what is built from a tenant's objects (a
Job, its metadata) is checked here first, so a Task that cannot be made fails at once with the
field and the limit instead of retrying a write the API server refuses every time; what the
controller words itself (Event notes, messages) is cut to fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from taskfsm.api import names

MAX_ANNOTATIONS_BYTES: Final = 256 * 1024
"""All of one object's annotations, keys and values together (``metadata.annotations: Too
long: must have at most 262144 bytes``)."""
MAX_EVENT_NOTE_BYTES: Final = 1024
"""An ``events.k8s.io/v1`` Event's ``note``."""
MAX_OBJECT_BYTES: Final = 1536 * 1024
"""One stored object: etcd's default ``--max-request-bytes`` (1.5 MiB); the API server answers
``etcdserver: request is too large`` beyond it."""


def cut_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` bytes of UTF-8, never inside a character (the API
    server counts bytes: an Event note of 1,024 characters may be 4,096 bytes)."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode(errors="ignore")


def annotations_bytes(annotations: Mapping[str, str]) -> int:
    """What ``annotations`` count against :data:`MAX_ANNOTATIONS_BYTES` (keys and values)."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())


def metadata_problem(meta: Mapping[str, Any], path: str) -> str:
    """Why the API server would refuse the labels or annotations of ``meta`` (an object's or a
    pod template's metadata, at ``path``), naming the field and the rule; ``""`` when it would
    not.
    """
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        return f"{path}.labels must be a map of strings"
    for key, value in labels.items():
        why = names.qualified_name_problem(str(key))
        if why:
            return f"{path}.labels: {why}"
        if not isinstance(value, str) or not names.is_label_value(value):
            return (
                f"{path}.labels[{key!r}]: a label value must be no more than "
                f"{names.MAX_LABEL_VALUE} characters of alphanumerics, '-', '_' or '.', "
                "starting and ending with an alphanumeric character"
            )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        return f"{path}.annotations must be a map of strings"
    for key, value in annotations.items():
        why = names.qualified_name_problem(str(key).lower())
        if why:
            return f"{path}.annotations: {why}"
        if not isinstance(value, str):
            return f"{path}.annotations[{key!r}] must be a string"
    size = annotations_bytes(annotations)
    if size > MAX_ANNOTATIONS_BYTES:
        return (
            f"{path}.annotations are {size} bytes; the API server allows at most "
            f"{MAX_ANNOTATIONS_BYTES} bytes (256 KiB) of annotations on one object"
        )
    return ""
