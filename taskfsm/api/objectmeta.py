"""``metadata`` of every object: the parts of Kubernetes' ObjectMeta the controller works with.

The controller reads names, UIDs, labels, annotations, finalizers, owner references and the
creation/deletion timestamps (docs/behaviour.md §2, §3); everything else the API server writes
(``managedFields``, ...) is kept verbatim as an unknown member and written back unchanged.
"""

from __future__ import annotations

from pydantic import Field

from taskfsm.api.base import K8sModel
from taskfsm.api.scalars import (
    UID,
    APIVersion,
    Int64,
    Kind,
    NamespaceName,
    ObjectName,
    StringMap,
    Time,
)


class OwnerReference(K8sModel):
    """An entry of ``metadata.ownerReferences`` (Task -> Workflow, Secret -> Job; §2)."""

    api_version: APIVersion = Field(alias="apiVersion")
    kind: Kind
    name: ObjectName
    uid: UID
    controller: bool | None = None
    block_owner_deletion: bool | None = Field(default=None, alias="blockOwnerDeletion")


class ObjectMeta(K8sModel):
    """Kubernetes ``metadata`` (metav1.ObjectMeta); every member optional."""

    name: ObjectName | None = None
    generate_name: str | None = Field(default=None, alias="generateName")
    namespace: NamespaceName | None = None
    uid: UID | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    generation: Int64 | None = None
    creation_timestamp: Time | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: Time | None = Field(default=None, alias="deletionTimestamp")
    deletion_grace_period_seconds: Int64 | None = Field(
        default=None, alias="deletionGracePeriodSeconds"
    )
    labels: StringMap | None = None
    annotations: StringMap | None = None
    owner_references: list[OwnerReference] | None = Field(default=None, alias="ownerReferences")
    finalizers: list[str] | None = None
