"""Function and ClusterFunction: the Job template a Task runs (docs/behaviour.md §1.5).

A Function is a versioned batch/v1 JobTemplateSpec plus default configuration. The Task
controller merges the Function's ``template`` with TaskTemplate and Task ``templatePatches``
(docs/behaviour.md D4) and the ``defaultConfig`` under the other ``config`` maps (D2).
"""

from __future__ import annotations

from typing import ClassVar, Final, Literal

from pydantic import Field

from taskfsm.api.base import K8sModel
from taskfsm.api.constants import (
    KIND_CLUSTER_FUNCTION,
    KIND_FUNCTION,
    PLURAL_CLUSTER_FUNCTIONS,
    PLURAL_FUNCTIONS,
)
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import JobTemplateSpec, StringMap

_NUMBER = r"(0|[1-9][0-9]*)"
_PRERELEASE_PART = r"(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD_PART = r"[0-9a-zA-Z-]+"
SEMVER_PATTERN: Final = (
    rf"^{_NUMBER}\.{_NUMBER}\.{_NUMBER}"
    rf"(-{_PRERELEASE_PART}(\.{_PRERELEASE_PART})*)?"
    rf"(\+{_BUILD_PART}(\.{_BUILD_PART})*)?$"
)
"""Semantic Versioning 2.0.0 (``1.2.3``, ``0.0.0+dev``, ``1.0.0-rc.1``); ASCII digits only."""


class FunctionSpec(K8sModel):
    """What a Function runs (§1.5); ``version`` and ``template`` are required."""

    version: str = Field(
        pattern=SEMVER_PATTERN,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "version is immutable"}
            ]
        },
    )
    """The Function's SemVer 2.0.0 version; immutable once created."""
    template: JobTemplateSpec
    """The batch/v1 JobTemplateSpec of the Job that runs the Function."""
    local_media_processing_entities_only: bool = Field(
        default=False, alias="localMediaProcessingEntitiesOnly"
    )
    """Run only on local (management-cluster) MediaProcessingEntities."""
    default_config: StringMap | None = Field(default=None, alias="defaultConfig")
    """Configuration defaults; TaskTemplate and Task ``config`` override them."""


class Function(ApiObject):
    """``engine.nagare.media/v1alpha1`` Function (namespaced, no status)."""

    KIND: ClassVar[str] = KIND_FUNCTION
    PLURAL: ClassVar[str] = PLURAL_FUNCTIONS

    kind: Literal["Function"] = "Function"
    spec: FunctionSpec
    """The Function."""


class ClusterFunction(ApiObject):
    """``engine.nagare.media/v1alpha1`` ClusterFunction (cluster-scoped, no status)."""

    KIND: ClassVar[str] = KIND_CLUSTER_FUNCTION
    PLURAL: ClassVar[str] = PLURAL_CLUSTER_FUNCTIONS
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["ClusterFunction"] = "ClusterFunction"
    spec: FunctionSpec
    """The Function."""
