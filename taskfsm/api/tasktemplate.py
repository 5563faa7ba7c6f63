"""TaskTemplate and ClusterTaskTemplate: defaults shared by many Tasks (docs/behaviour.md §1.6).

A Task may name a template in ``spec.taskTemplateRef``. The Task controller takes the template's
MediaProcessingEntity and Function ref/selector (when the Task gives none), merges its
``templatePatches`` between the Function's template and the Task's patches, and its ``config``
between the Function's ``defaultConfig`` and the Task's ``config``. ``humanReadable`` and
``jobFailurePolicy`` of templates are accepted but not used.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from taskfsm.api.base import K8sModel
from taskfsm.api.constants import (
    KIND_CLUSTER_TASK_TEMPLATE,
    KIND_TASK_TEMPLATE,
    PLURAL_CLUSTER_TASK_TEMPLATES,
    PLURAL_TASK_TEMPLATES,
)
from taskfsm.api.meta import HumanReadableDescription, LocalObjectReference
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import JobTemplateSpec, LabelSelector, StringMap
from taskfsm.api.task import FUNCTION_KIND_RULE, MPE_KIND_RULE, JobFailurePolicy


class TaskTemplateSpec(K8sModel):
    """Defaults for Tasks (§1.6); every member optional."""

    human_readable: HumanReadableDescription | None = Field(default=None, alias="humanReadable")
    """Names for people (not used by the Task controller)."""
    media_processing_entity_ref: LocalObjectReference | None = Field(
        default=None, alias="mediaProcessingEntityRef", json_schema_extra=MPE_KIND_RULE
    )
    """The MediaProcessingEntity or ClusterMediaProcessingEntity to run on."""
    media_processing_entity_selector: LabelSelector | None = Field(
        default=None, alias="mediaProcessingEntitySelector"
    )
    """Label selector choosing the (Cluster)MediaProcessingEntity when no ref is given."""
    function_ref: LocalObjectReference | None = Field(
        default=None, alias="functionRef", json_schema_extra=FUNCTION_KIND_RULE
    )
    """The Function or ClusterFunction to run."""
    function_selector: LabelSelector | None = Field(default=None, alias="functionSelector")
    """Label selector choosing the (Cluster)Function when no ref is given."""
    template_patches: JobTemplateSpec | None = Field(default=None, alias="templatePatches")
    """batch/v1 JobTemplateSpec patched over the Function's template, before the Task's patches."""
    job_failure_policy: JobFailurePolicy | None = Field(default=None, alias="jobFailurePolicy")
    """How a failed Job affects the Workflow (not used by the Task controller)."""
    config: StringMap | None = None
    """Configuration; overrides Function ``defaultConfig``, overridden by Task ``config``."""


class TaskTemplate(ApiObject):
    """``engine.nagare.media/v1alpha1`` TaskTemplate (namespaced, no status)."""

    KIND: ClassVar[str] = KIND_TASK_TEMPLATE
    PLURAL: ClassVar[str] = PLURAL_TASK_TEMPLATES

    kind: Literal["TaskTemplate"] = "TaskTemplate"
    spec: TaskTemplateSpec = Field(
        default_factory=TaskTemplateSpec, json_schema_extra={"default": {}}
    )
    """The defaults."""


class ClusterTaskTemplate(ApiObject):
    """``engine.nagare.media/v1alpha1`` ClusterTaskTemplate (cluster-scoped, no status)."""

    KIND: ClassVar[str] = KIND_CLUSTER_TASK_TEMPLATE
    PLURAL: ClassVar[str] = PLURAL_CLUSTER_TASK_TEMPLATES
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["ClusterTaskTemplate"] = "ClusterTaskTemplate"
    spec: TaskTemplateSpec = Field(
        default_factory=TaskTemplateSpec, json_schema_extra={"default": {}}
    )
    """The defaults."""
