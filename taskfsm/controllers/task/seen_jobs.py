"""Which Jobs this process saw for each Task: the evidence that a Job now missing was lost.

A Task UID gets at most one Job, ever (D18b): a Job missing although the Task had one fails the
Task (JobLost) instead of being made again. "Had one" is in the Task's status (Running, or a
`status.jobRef`), except in one window: the pass that created the Job lost its status write
(a crash, a cut connection) and the Job vanished before the next pass. This port remembers, per
Task UID, the Job names this process created or read, and the chart's `job_vanished` guard reads
it through the observation's `job_was_seen`.

**Its limit (docs/lifecycle.md, "D18b"):** it is process memory. A restart, a new leader or a
bucket handover to another replica starts without it, and a create whose answer was lost never
reaches it, so a Job created and then removed (finalizer stripped) inside that window is not
recognised as lost, and the Task makes a new Job of the same name. A durable mark would not
close it: written before the create, it cannot tell "made, then removed" from "never made"
after a crash between the two.

Entries go when they stop being evidence: a Task whose outcome is recorded (Succeeded or
Failed) is forgotten by its next read and never noted again (a Job missing then changes nothing,
F9a), the Task informer's delete events prune them (:meth:`SeenJobs.watch`), and a finalized
reconcile forgets its Task.
"""

from __future__ import annotations

import threading
from typing import Any

from taskfsm.kube import strsets
from taskfsm.kube.informer import DELETED, Informer
from taskfsm.kube.strsets import StrSet


class SeenJobs:
    """Task UID → the names of the Jobs this process saw for it (created, or read).

    A Task's Job has one name, so the names are a :mod:`taskfsm.kube.strsets` set (a ``set``
    per Task was 2 MiB of 10,000 finished Tasks)."""

    def __init__(self) -> None:
        self._seen: dict[str, StrSet] = {}
        self._lock = threading.Lock()

    def saw(self, task_uid: str, job_name: str) -> None:
        with self._lock:
            strsets.add(self._seen, task_uid, job_name)

    def seen(self, task_uid: str, job_name: str) -> bool:
        with self._lock:
            return job_name in strsets.members(self._seen.get(task_uid))

    def forget(self, task_uid: str) -> None:
        with self._lock:
            self._seen.pop(task_uid, None)

    def watch(self, tasks: Informer) -> None:
        """Forget a Task's entry when the Task informer sees it deleted."""
        tasks.add_handler(self._on_task)

    def _on_task(self, event: str, task: dict[str, Any]) -> None:
        if event == DELETED:
            self.forget((task.get("metadata") or {}).get("uid") or "")

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)
