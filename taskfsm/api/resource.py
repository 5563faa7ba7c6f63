"""``ApiObject``: the top level shared by the ten custom resource kinds of ``engine.nagare.media``.

Every kind is ``{apiVersion, kind, metadata, spec, status?}``. The class variables describe how the
kind is served (plural, scope, categories; docs/behaviour.md §1.1) and are read by the CRD
generator and by code that calls the API server. ``from_dict`` is the one way the controller
turns an API server response into a model; it raises ``InvalidObjectError`` in plain words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from taskfsm.api.base import K8sModel, drop_nulls
from taskfsm.api.constants import API_VERSION, CATEGORIES_ALL
from taskfsm.api.errors import InvalidObjectError, describe_validation_error
from taskfsm.api.objectmeta import ObjectMeta


class ApiObject(K8sModel):
    """A custom resource of group ``engine.nagare.media``, version ``v1alpha1``.

    Subclasses fix ``kind`` (a ``Literal``, so parsing a Function as a Task fails) and declare
    ``spec`` and, for kinds with a status subresource, ``status``. An empty ``status`` is not
    written, so a freshly built object serialises without one.
    """

    KIND: ClassVar[str]
    """The kind, e.g. ``Task``."""
    PLURAL: ClassVar[str]
    """The resource name used in API paths, e.g. ``tasks``."""
    NAMESPACED: ClassVar[bool] = True
    """``False`` for the cluster-scoped kinds (``Cluster*``)."""
    CATEGORIES: ClassVar[tuple[str, ...]] = CATEGORIES_ALL
    """``kubectl get <category>`` groups this kind belongs to."""

    api_version: Literal["engine.nagare.media/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion"
    )
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = drop_nulls(handler(self))
        if data.get("status") == {}:
            del data["status"]
        return data

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Self:
        """Parse an object as the API server returns it (a JSON dict).

        Raises ``InvalidObjectError`` whose message names the object and every invalid field, e.g.
        ``Task ns/t1 is invalid: spec.workflowRef: field required``.
        """
        try:
            return cls.model_validate(body)
        except ValidationError as exc:
            raise InvalidObjectError(
                _describe_body(cls.KIND, body), describe_validation_error(exc)
            ) from exc

    def describe(self) -> str:
        """``"<Kind> <namespace>/<name>"`` (``"<Kind> <name>"`` when cluster-scoped)."""
        return _describe(self.KIND, self.metadata.namespace, self.metadata.name)


def _describe(kind: str, namespace: str | None, name: str | None) -> str:
    if namespace:
        return f"{kind} {namespace}/{name or '<unnamed>'}"
    return f"{kind} {name or '<unnamed>'}"


def _describe_body(kind: str, body: Any) -> str:
    metadata = body.get("metadata") if isinstance(body, Mapping) else None
    if not isinstance(metadata, Mapping):
        return _describe(kind, None, None)
    namespace, name = metadata.get("namespace"), metadata.get("name")
    return _describe(
        kind,
        namespace if isinstance(namespace, str) else None,
        name if isinstance(name, str) else None,
    )
