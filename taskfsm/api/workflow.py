"""Workflow: the group of Tasks that belong together (docs/behaviour.md §1.4).

The Task controller only reads Workflows: their name, UID, deletion, ``status.phase`` (a Task of a
terminated Workflow fails), and ``spec.humanReadable``/``config``/``mediaLocations`` for the
helper payload (§1.11). The Workflow controller (``machines/workflow/chart.py``,
``taskfsm/controllers/workflow/reconciler.py``) writes the status.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from taskfsm.api.base import K8sModel
from taskfsm.api.constants import (
    CATEGORIES_TASK_AND_WORKFLOW,
    KIND_CLUSTER_MEDIA_LOCATION,
    KIND_MEDIA_LOCATION,
    KIND_WORKFLOW,
    PLURAL_WORKFLOWS,
    WorkflowPhase,
)
from taskfsm.api.limits import MAX_MEDIA, MAX_MEDIA_LOCATIONS
from taskfsm.api.media import Media
from taskfsm.api.meta import (
    CONDITIONS_LIST_MAP,
    Condition,
    HumanReadableDescription,
    LocalObjectReference,
    kind_rule,
)
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import Int32, StringMap, Time


class NamedMediaLocationReference(K8sModel):
    """An entry of ``spec.mediaLocations``: the name Functions use, and the location it means."""

    name: str = Field(pattern="[a-zA-Z0-9-]+")
    """The name under which the location appears in the helper payload's ``mediaLocations``."""
    ref: LocalObjectReference = Field(
        json_schema_extra=kind_rule(KIND_MEDIA_LOCATION, KIND_CLUSTER_MEDIA_LOCATION)
    )
    """A MediaLocation (Workflow's namespace) or ClusterMediaLocation."""


class WorkflowSpec(K8sModel):
    """What the Workflow consists of (§1.4); every member optional."""

    human_readable: HumanReadableDescription | None = Field(default=None, alias="humanReadable")
    """Names for people; copied into the helper payload."""
    media_locations: list[NamedMediaLocationReference] | None = Field(
        default=None,
        alias="mediaLocations",
        # Each location's Secret is read for every Task of the Workflow: bounded
        # (docs/security.md, "No object stops the controller").
        max_length=MAX_MEDIA_LOCATIONS,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    )
    """Media locations available to the Workflow's Tasks, keyed by ``name``."""
    inputs: list[Media] | None = Field(default=None, max_length=MAX_MEDIA)
    """Media read by the Workflow."""
    outputs: list[Media] | None = Field(default=None, max_length=MAX_MEDIA)
    """Media written by the Workflow."""
    config: StringMap | None = None
    """Workflow configuration; copied into the helper payload."""


class WorkflowStatus(K8sModel):
    """What the Workflow controller observed (§1.4)."""

    phase: WorkflowPhase | None = None
    """``Initializing``, ``Running``, ``AwaitingCompletion``, ``Succeeded`` or ``Failed``."""
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_LIST_MAP)
    """Conditions of types Ready, Complete and Failed."""
    message: str | None = None
    """The last reconcile error, if any."""
    queued_time: Time | None = Field(default=None, alias="queuedTime")
    """When the Workflow controller first saw the Workflow."""
    start_time: Time | None = Field(default=None, alias="startTime")
    """When the first Task started."""
    end_time: Time | None = Field(default=None, alias="endTime")
    """When the Workflow terminated."""
    total: Int32 | None = None
    """Number of Tasks."""
    active: Int32 | None = None
    """Number of active Tasks."""
    succeeded: Int32 | None = None
    """Number of succeeded Tasks."""
    failed: Int32 | None = None
    """Number of failed Tasks."""


class Workflow(ApiObject):
    """``engine.nagare.media/v1alpha1`` Workflow (namespaced, status subresource)."""

    KIND: ClassVar[str] = KIND_WORKFLOW
    PLURAL: ClassVar[str] = PLURAL_WORKFLOWS
    CATEGORIES: ClassVar[tuple[str, ...]] = CATEGORIES_TASK_AND_WORKFLOW

    kind: Literal["Workflow"] = "Workflow"
    spec: WorkflowSpec = Field(default_factory=WorkflowSpec, json_schema_extra={"default": {}})
    """Desired state."""
    status: WorkflowStatus = Field(default_factory=WorkflowStatus)
    """Observed state."""
