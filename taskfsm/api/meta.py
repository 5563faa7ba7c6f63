"""Shared building blocks of nagare's API: object references, conditions, human-readable names.

These mirror nagare's ``pkg/apis/meta`` (docs/behaviour.md §1.2, §1.10). The references differ in
what they promise:

* ``LocalObjectReference`` -- ``name`` plus optional ``apiVersion``/``kind``; the namespace is
  implied by the referring object (``spec.workflowRef``, ``spec.functionRef``, ...).
* ``ObjectReference`` -- all four members optional; what the controller records in status.
* ``ExactObjectReference`` -- an ObjectReference pinned to one object by ``uid`` (``jobRef``).
* ``ConfigMapOrSecretReference`` -- an ObjectReference plus ``key``; once resolved it can carry
  the Secret's data and then serialises as ``{"data": {key: base64}}`` only (the helper payload).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.config import JsonDict
from pydantic.json_schema import SkipJsonSchema

from taskfsm.api.base import K8sModel, drop_nulls
from taskfsm.api.constants import ConditionStatus
from taskfsm.api.scalars import (
    UID,
    APIVersion,
    ConditionType,
    Kind,
    NamespaceName,
    ObjectName,
    Time,
)


class HumanReadableDescription(K8sModel):
    """Names for people (``spec.humanReadable``); copied into the helper payload (§1.3, §1.11)."""

    name: str | None = None
    """A short human-readable name."""
    description: str | None = None
    """A longer human-readable description."""

    def is_empty(self) -> bool:
        """True when neither name nor description (nor an unknown member) is set."""
        return self.name is None and self.description is None and not self.model_extra


class ObjectReference(K8sModel):
    """A reference to an object by apiVersion, kind, namespace and name, all optional (§1.2)."""

    api_version: APIVersion | None = Field(default=None, alias="apiVersion")
    """API version of the referent, e.g. ``engine.nagare.media/v1alpha1``."""
    kind: Kind | None = None
    """Kind of the referent."""
    name: ObjectName | None = None
    """Name of the referent."""
    namespace: NamespaceName | None = None
    """Namespace of the referent; empty for cluster-scoped kinds."""


class LocalObjectReference(K8sModel):
    """A reference to an object in the referrer's own namespace (or a cluster-scoped one) (§1.2).

    ``name`` is required; ``apiVersion`` and ``kind`` are optional and omitted when empty.
    """

    api_version: APIVersion | None = Field(default=None, alias="apiVersion")
    """API version of the referent; ``engine.nagare.media/v1alpha1`` is assumed when empty."""
    kind: Kind | None = None
    """Kind of the referent."""
    name: ObjectName
    """Name of the referent."""

    def to_object_reference(self, namespace: NamespaceName | str | None) -> ObjectReference:
        """This reference as an ``ObjectReference`` in ``namespace`` (``None``: cluster scope)."""
        return ObjectReference(
            api_version=self.api_version, kind=self.kind, name=self.name, namespace=namespace
        )


def kind_rule(*kinds: str) -> JsonDict:
    """Schema extra of a ``LocalObjectReference`` field whose ``kind``, when set, is one of
    ``kinds``: the CEL rule refuses any other kind at admission, naming ``<field>.kind``.

    A reference without ``kind`` (or with ``kind: ""``) passes: the controller defaults it (§1.2,
    D13). Any other kind is one the controller refuses whenever it resolves the reference.
    """
    allowed = ", ".join(f"'{kind}'" for kind in kinds)
    return {
        "x-kubernetes-validations": [
            {
                "rule": f"!has(self.kind) || self.kind == '' || self.kind in [{allowed}]",
                "message": f"kind must be {' or '.join(kinds)}",
                "fieldPath": ".kind",
            }
        ]
    }


NAME_NOT_EMPTY_RULE: JsonDict = {
    "x-kubernetes-validations": [
        {
            "rule": "!has(self.name) || self.name != ''",
            "message": "name must not be empty",
            "fieldPath": ".name",
        }
    ]
}
"""Schema extra of a ``LocalObjectReference`` field whose ``name`` must not be ``""`` (a missing
``name`` is already refused as required)."""


class ExactObjectReference(ObjectReference):
    """An ``ObjectReference`` that also pins the referent's ``uid`` (``status.jobRef``, §1.2).

    ``uid`` is required and always written, even when empty.
    """

    uid: UID
    """UID of the referent; a different UID under the same name is a different object."""


def _decode_secret_value(value: Any) -> Any:
    """Secret data arrives base64-encoded in JSON; bytes given in Python are taken as they are."""
    if isinstance(value, str):
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            # Never echo the value: it is Secret data.
            raise ValueError("secret data must be standard base64") from None
    return value


SecretData = dict[str, Annotated[bytes, BeforeValidator(_decode_secret_value)]]


class ConfigMapOrSecretReference(ObjectReference):
    """A reference to a ConfigMap or Secret, optionally to one ``key`` of it (§1.2).

    Two serialisations:

    * as written by users: the ObjectReference members and ``key``, never ``data``;
    * resolved (``with_data``): ``{"data": {<key>: <standard base64>}}`` with keys sorted, or ``{}``
      when there is no data -- reference members and ``key`` dropped. Only the helper payload
      (§1.11) contains this form.

    Parsing accepts both forms (``data`` values base64-decoded) and always yields the first.
    """

    key: str | None = None
    """The key inside the ConfigMap or Secret; when set, only this key is used (D15)."""
    data: SkipJsonSchema[SecretData | None] = Field(default=None, exclude=True, repr=False)
    """Resolved contents (key -> raw bytes); not part of the CRD schema."""

    _only_data: bool = PrivateAttr(default=False)

    def with_data(self, data: Mapping[str, bytes]) -> ConfigMapOrSecretReference:
        """A copy carrying the resolved ``data``, which serialises as ``{"data": {...}}`` only."""
        resolved = self.model_copy(update={"data": dict(data)})
        resolved._only_data = True
        return resolved

    @property
    def is_resolved(self) -> bool:
        """True for a copy made by ``with_data`` (serialises in the data-only form)."""
        return self._only_data

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        if not self._only_data:
            return drop_nulls(handler(self))
        if not self.data:
            return {}
        return {
            "data": {
                key: base64.b64encode(value).decode("ascii")
                for key, value in sorted(self.data.items())
            }
        }


class Condition(K8sModel):
    """One status condition (§1.10): ``type`` and ``status`` required, the rest optional."""

    type: ConditionType
    """Condition type, e.g. ``Ready``."""
    status: ConditionStatus
    """``True``, ``False`` or ``Unknown``."""
    last_transition_time: Time | None = Field(default=None, alias="lastTransitionTime")
    """When ``status`` last changed."""
    reason: str | None = None
    """A machine-readable CamelCase reason for the last transition."""
    message: str | None = None
    """A human-readable message for the last transition."""


CONDITIONS_LIST_MAP: Final[JsonDict] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}
"""The schema extension of every ``status.conditions``: a list of at most one condition per
``type`` (what nagare's Go controller and taskfsm both write, §1.10), so server-side apply and
``kubectl`` treat conditions by type. Objects stored under the upstream CRDs' ``atomic`` list
stay writable: the API server checks map keys only when the stored list already satisfied them
(ratcheting)."""


def find_condition(
    conditions: list[Condition] | None, condition_type: ConditionType | str
) -> Condition | None:
    """The condition of ``condition_type`` in ``conditions``, or ``None`` (read by type, §1.10)."""
    for condition in conditions or ():
        if condition.type == condition_type:
            return condition
    return None
