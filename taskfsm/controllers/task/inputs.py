"""What a Task's Job is made from: the Job and its helper data, built before anything is made.

The read step builds them for a JobPending Task whose MediaProcessingEntity is ready
(:mod:`taskfsm.controllers.task.read`), so the chart sees, before anything is created, whether
they can be built now (``job_inputs_problem``: a template patch that does not apply, a
MediaLocation or its Secret missing, retried) and whether they can be made at all
(``helper_data_too_large``: a payload beyond what a Secret holds, ``job_beyond_limits``: a Job
the API server would refuse for its size or metadata, fail the Task at once); the
create effect then makes exactly what was built (:mod:`taskfsm.controllers.task.effects`). A
Task that cannot run leaves no Job behind, least of all one whose pods wait for a Secret that
never comes (D5, F9).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from taskfsm import selection
from taskfsm.api import constants as c
from taskfsm.api import server_limits
from taskfsm.api.config import NatsConfiguration
from taskfsm.manifests import helper_payload, jobs
from taskfsm.manifests.helper_payload import SecretReader
from taskfsm.manifests.jobs import JobTemplateError

SECRET_DATA_MAX_BYTES: Final = 1024 * 1024
"""What the API server lets a Secret's data hold in all (``data: Too long: must have at most
1048576 bytes``); the helper data is its one value."""
JOB_MAX_BYTES: Final = 1024 * 1024
"""The largest Job taskfsm makes, as JSON: the stored Job (with the ``managedFields`` and
``status`` the API server adds) must fit in etcd's 1.5 MiB
(:data:`taskfsm.api.server_limits.MAX_OBJECT_BYTES`); a Job's template is a few KiB."""


@dataclass(frozen=True)
class JobSettings:
    """What every Job and its helper data carry from the process configuration."""

    ttl_seconds: int = c.JOB_TTL_SECONDS_AFTER_FINISHED
    """The Jobs' ``ttlSecondsAfterFinished`` (§1.13)."""
    nats: NatsConfiguration | None = None
    """The NATS settings copied into every payload."""


@dataclass(frozen=True)
class JobInputs:
    """The Job to create and the helper data its Secret carries."""

    body: dict[str, Any]
    payload: bytes


class InputsUnusable(Exception):
    """The inputs cannot be built now; the message is the ``status.message``."""


def build_inputs(
    task: Mapping[str, Any],
    workflow: Mapping[str, Any],
    *,
    catalog: selection.Catalog,
    read_secret: SecretReader,
    namespace: str,
    settings: JobSettings,
) -> JobInputs:
    """The Job for ``task`` in ``namespace`` and its helper data (§3.7 steps 2-4).

    Raises:
        InputsUnusable: the Function, the TaskTemplate, a template patch, a MediaLocation or a
            credential Secret does not allow it (message names which, never a secret value).
    """
    try:
        function = selection.job_function(task, catalog)
        template = selection.task_template(
            task.get("spec") or {}, task["metadata"]["namespace"], catalog
        )
        body = jobs.build_job(
            ttl_seconds=settings.ttl_seconds,
            task=task,
            function=function,
            task_template=template,
            namespace=namespace,
        )
        payload = helper_payload.build_payload(
            task=task,
            workflow=workflow,
            function=function,
            task_template=template,
            catalog=catalog,
            read_secret=read_secret,
            nats=settings.nats,
        )
    except (selection.SelectionError, JobTemplateError, helper_payload.HelperDataError) as exc:
        raise InputsUnusable(str(exc)) from None
    return JobInputs(body, payload)


def too_large(inputs: JobInputs) -> str:
    """Why the helper data cannot be a Secret (``""`` when it fits)."""
    size = len(inputs.payload)
    if size <= SECRET_DATA_MAX_BYTES:
        return ""
    return (
        f"the helper data (the Task's config, its Workflow's MediaLocations and the NATS "
        f"settings) is {size} bytes; a Secret holds at most {SECRET_DATA_MAX_BYTES} bytes "
        "(1 MiB): make the Task's spec.config smaller"
    )


def beyond_limits(inputs: JobInputs) -> str:
    """Why the API server would refuse the Job whatever the retries (``""`` when it would not):
    labels or annotations it does not allow, annotations over 256 KiB, a Job over
    :data:`JOB_MAX_BYTES`. The Job is the Function's ``spec.template`` with the TaskTemplate's
    and Task's ``templatePatches`` applied; the names taskfsm adds always fit (D24)."""
    job = inputs.body
    template = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    why = server_limits.metadata_problem(job.get("metadata") or {}, "metadata")
    why = why or server_limits.metadata_problem(template, "spec.template.metadata")
    if not why:
        size = len(orjson.dumps(job))
        if size <= JOB_MAX_BYTES:
            return ""
        why = (
            f"the Job is {size} bytes as JSON; taskfsm makes Jobs of at most {JOB_MAX_BYTES} "
            "bytes (1 MiB), so that the stored Job fits the API server's 1.5 MiB"
        )
    return (
        f"the Job (the Function's spec.template with the templatePatches applied) cannot be "
        f"made: {why}"
    )
