"""Crash points for fault-injection tests (failpoints), named after the API write just made.

``TASKFSM_CRASH_AFTER="<verb> <resource>[#<n>]"`` (e.g. ``create jobs``, ``patch tasks/status#2``)
makes the process exit with status 137, as if SIGKILLed, right after the n-th (default first)
successful write of that kind: the server has committed the write, the controller never sees
the answer. ``tests/faults`` uses it to prove that a restart at any write loses and duplicates
nothing.

Nothing of this is in the product: ``python -m tests.support.crashpoints run ...`` runs
``taskfsm run`` with every :class:`taskfsm.kube.rest.Rest` reporting its requests, through the
REST layer's observer hook (the one the request metrics use), to :func:`after_write` as well.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from taskfsm.kube.rest import WRITE_VERBS, Observer, Rest

ENV = "TASKFSM_CRASH_AFTER"
EXIT_CODE = 137
NAMES = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}

_SPEC = os.environ.get(ENV, "").strip()
_NAME, _, _NTH = _SPEC.partition("#")
_TARGET = int(_NTH) if _NTH else 1
_count = 0
_lock = threading.Lock()


def after_write(method: str, resource: str) -> None:
    """Exit at once if this successful write is the configured crash point."""
    global _count
    if not _NAME:
        return
    name = f"{NAMES.get(method, method.lower())} {resource}"
    if name != _NAME:
        return
    with _lock:
        _count += 1
        if _count == _TARGET:
            sys.stderr.write(f"taskfsm: crash point reached after {name!r} #{_count}\n")
            sys.stderr.flush()
            os._exit(EXIT_CODE)


def install() -> None:
    """Chain :func:`after_write` behind the observer of every Rest built from now on."""
    original = Rest.__init__

    def init(
        self: Rest, api_client: Any, *args: Any, observer: Observer | None = None, **kwargs: Any
    ) -> None:
        def observe(verb: str, resource: str, code: int) -> None:
            if observer is not None:
                observer(verb, resource, code)
            if verb in WRITE_VERBS and 200 <= code < 300:
                after_write(verb, resource)

        original(self, api_client, *args, observer=observe, **kwargs)

    Rest.__init__ = init  # type: ignore[method-assign]  # test-only instrumentation


if __name__ == "__main__":
    install()
    from taskfsm.cli import main

    sys.exit(main(sys.argv[1:]))
