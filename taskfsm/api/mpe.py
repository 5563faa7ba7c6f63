"""MediaProcessingEntity and ClusterMediaProcessingEntity: where Jobs run (docs/behaviour.md §1.7).

An MPE is either ``local`` (Jobs in the management cluster) or ``remote`` (Jobs in the cluster of
a kubeconfig kept in a Secret) -- exactly one of the two. Its status (conditions Ready/Failed) is
written by the MediaProcessingEntity controller; the Task controller picks MPEs by reference,
selector or the default annotation (docs/behaviour.md D1).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from taskfsm.api.base import InlineUnion, K8sModel
from taskfsm.api.constants import (
    KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
    KIND_MEDIA_PROCESSING_ENTITY,
    PLURAL_CLUSTER_MEDIA_PROCESSING_ENTITIES,
    PLURAL_MEDIA_PROCESSING_ENTITIES,
)
from taskfsm.api.meta import (
    CONDITIONS_LIST_MAP,
    Condition,
    ConfigMapOrSecretReference,
)
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import NamespaceName

DEFAULT_KUBECONFIG_KEY = "kubeconfig"
"""The Secret key read when a remote MPE's ``secretRef`` names no ``key`` (§1.7)."""


class LocalMediaProcessingEntity(K8sModel):
    """Run Jobs in the management cluster."""

    namespace: NamespaceName | None = None
    """Namespace of the Jobs; defaults to the MPE's own namespace (required for a cluster MPE)."""


class Kubeconfig(K8sModel):
    """Where the remote cluster's kubeconfig is."""

    secret_ref: ConfigMapOrSecretReference = Field(alias="secretRef")
    """The Secret holding the kubeconfig; ``key`` defaults to ``kubeconfig``."""


class RemoteMediaProcessingEntity(K8sModel):
    """Run Jobs in another cluster, in the namespace of the kubeconfig's current context."""

    kubeconfig: Kubeconfig
    """The kubeconfig of the remote cluster."""


class MediaProcessingEntitySpec(InlineUnion):
    """Exactly one of ``local`` or ``remote``."""

    local: LocalMediaProcessingEntity | None = None
    """Jobs run in the management cluster."""
    remote: RemoteMediaProcessingEntity | None = None
    """Jobs run in the cluster of a kubeconfig."""


class MediaProcessingEntityStatus(K8sModel):
    """Readiness, written by the MediaProcessingEntity controller (§1.7)."""

    conditions: list[Condition] | None = Field(default=None, json_schema_extra=CONDITIONS_LIST_MAP)
    """Conditions of types Ready and Failed."""
    message: str | None = None
    """Why the MPE is not ready, if it is not."""


class _MediaProcessingEntityBase(ApiObject):
    spec: MediaProcessingEntitySpec
    """Where Jobs run."""
    status: MediaProcessingEntityStatus = Field(default_factory=MediaProcessingEntityStatus)
    """Readiness."""


class MediaProcessingEntity(_MediaProcessingEntityBase):
    """``engine.nagare.media/v1alpha1`` MediaProcessingEntity (namespaced, status subresource)."""

    KIND: ClassVar[str] = KIND_MEDIA_PROCESSING_ENTITY
    PLURAL: ClassVar[str] = PLURAL_MEDIA_PROCESSING_ENTITIES

    kind: Literal["MediaProcessingEntity"] = "MediaProcessingEntity"


class ClusterMediaProcessingEntity(_MediaProcessingEntityBase):
    """``engine.nagare.media/v1alpha1`` ClusterMediaProcessingEntity (cluster-scoped, status)."""

    KIND: ClassVar[str] = KIND_CLUSTER_MEDIA_PROCESSING_ENTITY
    PLURAL: ClassVar[str] = PLURAL_CLUSTER_MEDIA_PROCESSING_ENTITIES
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["ClusterMediaProcessingEntity"] = "ClusterMediaProcessingEntity"
