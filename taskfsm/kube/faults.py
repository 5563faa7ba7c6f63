"""Crash points for fault-injection tests (failpoints), named after the API write just made.

``TASKFSM_CRASH_AFTER="<verb> <resource>[#<n>]"`` (e.g. ``create jobs``, ``patch tasks/status#2``)
makes the process exit with status 137, as if SIGKILLed, right after the n-th (default first)
successful write of that kind. Unset (always, in production), :func:`after_write` is a dictionary
lookup and nothing else. ``tests/faults`` uses it to prove a restart at any write loses and
duplicates nothing.
"""

from __future__ import annotations

import os
import sys
import threading

_SPEC = os.environ.get("TASKFSM_CRASH_AFTER", "").strip()
_NAME, _, _NTH = _SPEC.partition("#")
_TARGET = int(_NTH) if _NTH else 1
_count = 0
_lock = threading.Lock()

WRITE_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def after_write(method: str, resource: str) -> None:
    """Exit at once if this write is the configured crash point."""
    global _count
    if not _NAME:
        return
    name = f"{WRITE_VERBS.get(method, method.lower())} {resource}"
    if name != _NAME:
        return
    with _lock:
        _count += 1
        if _count == _TARGET:
            sys.stderr.write(f"taskfsm: crash point reached after {name!r} #{_count}\n")
            sys.stderr.flush()
            os._exit(137)
