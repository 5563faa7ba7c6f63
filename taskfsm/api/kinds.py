"""The ten custom resource kinds by name, and parsing objects whose kind is known only at run time.

Code that handles objects of several kinds (watches, the demo, tests reading sample YAML) looks
the model up here; code that knows the kind uses the class directly (``Task.from_dict(body)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from taskfsm.api.constants import API_VERSION
from taskfsm.api.errors import InvalidObjectError
from taskfsm.api.function import ClusterFunction, Function
from taskfsm.api.medialocation import ClusterMediaLocation, MediaLocation
from taskfsm.api.mpe import ClusterMediaProcessingEntity, MediaProcessingEntity
from taskfsm.api.resource import ApiObject
from taskfsm.api.task import Task
from taskfsm.api.tasktemplate import ClusterTaskTemplate, TaskTemplate
from taskfsm.api.workflow import Workflow

RESOURCE_MODELS: Final[tuple[type[ApiObject], ...]] = (
    Task,
    Workflow,
    Function,
    ClusterFunction,
    TaskTemplate,
    ClusterTaskTemplate,
    MediaProcessingEntity,
    ClusterMediaProcessingEntity,
    MediaLocation,
    ClusterMediaLocation,
)
"""Every kind of ``engine.nagare.media/v1alpha1`` the Task controller touches (§1.1)."""

MODEL_BY_KIND: Final[Mapping[str, type[ApiObject]]] = {
    model.KIND: model for model in RESOURCE_MODELS
}


def parse_object(body: Mapping[str, Any]) -> ApiObject:
    """Parse ``body`` with the model its ``apiVersion``/``kind`` names.

    Raises ``InvalidObjectError`` when the apiVersion is not ``engine.nagare.media/v1alpha1``, the
    kind is not one of ``RESOURCE_MODELS``, or a field is invalid.
    """
    api_version, kind = body.get("apiVersion"), body.get("kind")
    model = MODEL_BY_KIND.get(kind) if isinstance(kind, str) else None
    if api_version != API_VERSION or model is None:
        raise InvalidObjectError(
            f"object of apiVersion {api_version!r}, kind {kind!r}",
            f"not a kind of {API_VERSION} (known: {', '.join(MODEL_BY_KIND)})",
        )
    return model.from_dict(body)
