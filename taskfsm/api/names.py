"""Names and the API server's rules for them: what fits a label, and what a longer name becomes.

Kubernetes lets an object be named with up to 253 characters (a DNS subdomain; namespaces: 63,
a DNS label), but a label value stops at 63. taskfsm puts names in labels (the Task labels of
docs/behaviour.md §2 on Tasks, Workflows, Jobs and Secrets) and finds objects by them, so
(decisions D24, docs/security.md "Names and sizes"):

* a value that is a valid label value is the label value, exactly as before;
* any other value (a name over 63 characters) is *cut*: its first 52 characters (made label
  safe), the mark ``_`` and 10 hex of its SHA-256 -- 63 characters, valid, and different for
  two names that share their first 52 characters. ``_`` never occurs in an object name, so a cut
  value is never mistaken for a name;
* the full value goes into the annotation of the same key, and a label is read through
  :func:`full_value`, which accepts the annotation only when the label is its cut form: a
  lookup by label stays exact however names are cut.

Every function here is pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

MAX_LABEL_VALUE: Final = 63
"""A label value, and a label key's name part, have at most 63 characters."""
MAX_NAME: Final = 253
"""A DNS subdomain (most object names, a label key's prefix) has at most 253 characters."""
MAX_NAMESPACE: Final = 63
"""A namespace name is a DNS label: at most 63 characters."""

CUT_MARK: Final = "_"
"""Separates a cut value's prefix from its hash; never part of an object name."""
HASH_LENGTH: Final = 10
"""Hex digits of SHA-256 that end a cut value (40 bits)."""

_LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN: Final = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_UNSAFE: Final = re.compile(r"[^-A-Za-z0-9.]")


def is_label_value(value: str) -> bool:
    """``value`` is a valid label value (empty, or ≤ 63 characters of ``[-A-Za-z0-9_.]``
    beginning and ending with a letter or digit)."""
    return len(value) <= MAX_LABEL_VALUE and _LABEL_VALUE.fullmatch(value) is not None


def is_dns_subdomain(value: str) -> bool:
    """``value`` is a DNS subdomain (RFC 1123): lowercase, ≤ 253 characters."""
    return 0 < len(value) <= MAX_NAME and _DNS_SUBDOMAIN.fullmatch(value) is not None


def qualified_name_problem(key: str) -> str:
    """Why ``key`` is not a valid label or annotation key (``[prefix/]name``: the prefix a DNS
    subdomain, the name ≤ 63 characters of ``[-A-Za-z0-9_.]`` beginning and ending with a letter
    or digit); ``""`` when it is one."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not is_dns_subdomain(prefix):
        return f"the prefix of key {key!r} must be a DNS subdomain of at most {MAX_NAME} characters"
    if len(name) > MAX_LABEL_VALUE:
        return f"the name part of key {key!r} must be no more than {MAX_LABEL_VALUE} characters"
    if _LABEL_NAME.fullmatch(name) is None:
        return (
            f"key {key!r} must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return ""


def digest(value: str, length: int = HASH_LENGTH) -> str:
    """The first ``length`` hex digits of SHA-256 of ``value``."""
    return hashlib.sha256(value.encode()).hexdigest()[:length]


def label_value(value: str) -> str:
    """The label value that stands for ``value``: ``value`` itself when it is a valid label value,
    else its cut form ``<first 52 characters, label safe>_<10 hex of its SHA-256>``."""
    if is_label_value(value):
        return value
    stem = _UNSAFE.sub("-", value)[: MAX_LABEL_VALUE - len(CUT_MARK) - HASH_LENGTH]
    stem = stem.lstrip("-.") or "x"
    return f"{stem}{CUT_MARK}{digest(value)}"


def is_cut(label: str) -> bool:
    """``label`` is a cut form (it stands for a longer value, kept in an annotation)."""
    return CUT_MARK in label


def labels_and_annotations(values: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The labels that stand for ``values`` (key → full value), and the annotations that keep
    the full values of the labels that had to be cut."""
    labels = {key: label_value(value) for key, value in values.items()}
    annotations = {key: value for key, value in values.items() if labels[key] != value}
    return labels, annotations


def full_value(meta: Mapping[str, Any], key: str, *, known: str | None = None) -> str | None:
    """The full value the label ``key`` of ``meta`` (an object's metadata) stands for.

    A label that is not cut is its own value. A cut one stands for the annotation of the same
    key when the label is that annotation's cut form, else for ``known`` (a value the caller
    knows, e.g. the Task's ``spec.workflowRef.name``) when it is ``known``'s; otherwise for
    nothing (None): an annotation that does not match its label is never believed, so two names
    that share a prefix are never confused. None also when there is no such label.
    """
    labels = meta.get("labels") or {}
    label = labels.get(key)
    if not isinstance(label, str):
        return None
    if not is_cut(label):
        return label
    annotation = (meta.get("annotations") or {}).get(key)
    for candidate in (annotation, known):
        if isinstance(candidate, str) and label_value(candidate) == label:
            return candidate
    return None


def name_with_suffix(name: str, suffix: str, limit: int = MAX_NAME) -> str:
    """``<name>.<suffix>`` (an Event's name), with ``name`` cut so that the whole stays within
    ``limit`` characters and a DNS subdomain (a cut never ends in ``-`` or ``.``)."""
    room = limit - len(suffix) - 1
    stem = name if len(name) <= room else name[:room].rstrip("-.")
    return f"{stem or 'object'}.{suffix}"
