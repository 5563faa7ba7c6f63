"""Task: one media-processing step of a Workflow, run as a Job (docs/behaviour.md §1.3).

The Task is what taskfsm reconciles. Users (or the NBMP gateway) write ``spec``; only the Task
controller writes ``status``. Parse one with ``Task.from_dict(body)``; write status back with
``task.status.to_dict()`` (unknown status members written by others are kept).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Final, Literal

from pydantic import Field
from pydantic.config import JsonDict

from taskfsm.api.base import K8sModel
from taskfsm.api.constants import (
    CATEGORIES_TASK_AND_WORKFLOW,
    KIND_CLUSTER_FUNCTION,
    KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
    KIND_CLUSTER_TASK_TEMPLATE,
    KIND_FUNCTION,
    KIND_MEDIA_PROCESSING_ENTITY,
    KIND_TASK,
    KIND_TASK_TEMPLATE,
    PLURAL_TASKS,
    TASK_TERMINAL_PHASES,
    TaskPhase,
)
from taskfsm.api.limits import MAX_MEDIA
from taskfsm.api.media import Media
from taskfsm.api.meta import (
    CONDITIONS_LIST_MAP,
    NAME_NOT_EMPTY_RULE,
    Condition,
    ExactObjectReference,
    HumanReadableDescription,
    LocalObjectReference,
    ObjectReference,
    find_condition,
    kind_rule,
)
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import ConditionType, JobTemplateSpec, LabelSelector, StringMap, Time

MPE_KIND_RULE: Final = kind_rule(KIND_MEDIA_PROCESSING_ENTITY, KIND_CLUSTER_MEDIA_PROCESSING_ENTITY)
"""CEL rule of a ``mediaProcessingEntityRef`` (Task and TaskTemplate specs)."""
FUNCTION_KIND_RULE: Final = kind_rule(KIND_FUNCTION, KIND_CLUSTER_FUNCTION)
"""CEL rule of a ``functionRef`` (Task and TaskTemplate specs)."""
_TERMINAL = ", ".join(f"'{phase}'" for phase in sorted(TASK_TERMINAL_PHASES))
TERMINAL_PHASE_RULE: Final[JsonDict] = {
    "x-kubernetes-validations": [
        {
            "rule": f"!has(oldSelf.phase) || !(oldSelf.phase in [{_TERMINAL}])"
            " || (has(self.phase) && self.phase == oldSelf.phase)",
            "message": "phase Succeeded or Failed never changes",
            "fieldPath": ".phase",
        }
    ]
}
"""CEL transition rule of a Task's ``status``: a terminal phase is never changed or removed."""


class JobFailureAction(StrEnum):
    """What the Workflow controller does when a Task's Job fails."""

    FAIL_WORKFLOW = "FailWorkflow"
    IGNORE = "Ignore"


class JobFailurePolicy(K8sModel):
    """How a failed Job affects the Workflow; read only by the Workflow controller (§1.3)."""

    default_action: JobFailureAction = Field(
        default=JobFailureAction.FAIL_WORKFLOW, alias="defaultAction"
    )
    """``FailWorkflow`` (default) or ``Ignore``."""


class TaskSpec(K8sModel):
    """What the Task should run (§1.3). Only ``workflowRef`` is required."""

    task_template_ref: LocalObjectReference | None = Field(
        default=None,
        alias="taskTemplateRef",
        json_schema_extra=kind_rule(KIND_TASK_TEMPLATE, KIND_CLUSTER_TASK_TEMPLATE),
    )
    """A TaskTemplate or ClusterTaskTemplate providing defaults for this Task."""
    human_readable: HumanReadableDescription | None = Field(default=None, alias="humanReadable")
    """Names for people; copied into the helper payload."""
    media_processing_entity_ref: LocalObjectReference | None = Field(
        default=None,
        alias="mediaProcessingEntityRef",
        json_schema_extra=MPE_KIND_RULE,
    )
    """The MediaProcessingEntity or ClusterMediaProcessingEntity to run on."""
    media_processing_entity_selector: LabelSelector | None = Field(
        default=None, alias="mediaProcessingEntitySelector"
    )
    """Label selector choosing the (Cluster)MediaProcessingEntity when no ref is given."""
    workflow_ref: LocalObjectReference = Field(
        alias="workflowRef", json_schema_extra=NAME_NOT_EMPTY_RULE
    )
    """The Workflow (same namespace) this Task belongs to; only ``name`` is used."""
    function_ref: LocalObjectReference | None = Field(
        default=None, alias="functionRef", json_schema_extra=FUNCTION_KIND_RULE
    )
    """The Function or ClusterFunction to run."""
    function_selector: LabelSelector | None = Field(default=None, alias="functionSelector")
    """Label selector choosing the (Cluster)Function when no ref is given."""
    template_patches: JobTemplateSpec | None = Field(default=None, alias="templatePatches")
    """batch/v1 JobTemplateSpec strategic-merge-patched over the Function's template."""
    job_failure_policy: JobFailurePolicy | None = Field(default=None, alias="jobFailurePolicy")
    """How a failed Job affects the Workflow."""
    inputs: list[Media] | None = Field(default=None, max_length=MAX_MEDIA)
    """Media read by the Task; copied into the helper payload."""
    outputs: list[Media] | None = Field(default=None, max_length=MAX_MEDIA)
    """Media written by the Task; copied into the helper payload."""
    config: StringMap | None = None
    """Function configuration; overrides TaskTemplate ``config`` and Function ``defaultConfig``."""


class TaskStatus(K8sModel):
    """What the Task controller observed (§1.3); written only by the Task controller."""

    phase: TaskPhase | None = None
    """``Initializing``, ``JobPending``, ``Running``, ``Succeeded`` or ``Failed``."""
    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_LIST_MAP)
    """Conditions of types Initialized, Ready, Complete and Failed."""
    message: str | None = None
    """The last reconcile error, if any."""
    queued_time: Time | None = Field(default=None, alias="queuedTime")
    """When the controller first saw the Task."""
    start_time: Time | None = Field(default=None, alias="startTime")
    """When the Job started."""
    end_time: Time | None = Field(default=None, alias="endTime")
    """When the Task reached Succeeded or Failed."""
    media_processing_entity_ref: ObjectReference | None = Field(
        default=None, alias="mediaProcessingEntityRef"
    )
    """The MediaProcessingEntity or ClusterMediaProcessingEntity chosen."""
    function_ref: ObjectReference | None = Field(default=None, alias="functionRef")
    """The Function or ClusterFunction chosen."""
    job_ref: ExactObjectReference | None = Field(default=None, alias="jobRef")
    """The Job created in the MediaProcessingEntity's cluster."""
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    """``metadata.generation`` of the Task the last status write was computed from (taskfsm
    addition)."""

    def condition(self, condition_type: ConditionType | str) -> Condition | None:
        """The condition of ``condition_type``, or ``None``."""
        return find_condition(self.conditions, condition_type)


class Task(ApiObject):
    """``engine.nagare.media/v1alpha1`` Task (namespaced, status subresource)."""

    KIND: ClassVar[str] = KIND_TASK
    PLURAL: ClassVar[str] = PLURAL_TASKS
    CATEGORIES: ClassVar[tuple[str, ...]] = CATEGORIES_TASK_AND_WORKFLOW

    kind: Literal["Task"] = "Task"
    spec: TaskSpec
    """Desired state."""
    status: TaskStatus = Field(default_factory=TaskStatus, json_schema_extra=TERMINAL_PHASE_RULE)
    """Observed state."""
