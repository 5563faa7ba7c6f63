"""The nagare ``engine.nagare.media/v1alpha1`` resources as REST descriptors (docs/behaviour.md
§1.1).

Derived from the API models (each carries its kind, plural and scope), so the names live in one
place.
"""

from __future__ import annotations

from taskfsm.api import constants as c
from taskfsm.api.kinds import MODEL_BY_KIND
from taskfsm.kube.rest import Resource

#: Every engine resource, by kind.
BY_KIND: dict[str, Resource] = {
    kind: Resource(c.GROUP, c.VERSION, model.PLURAL, kind, namespaced=model.NAMESPACED)
    for kind, model in MODEL_BY_KIND.items()
}

TASKS = BY_KIND[c.KIND_TASK]
WORKFLOWS = BY_KIND[c.KIND_WORKFLOW]
MEDIA_PROCESSING_ENTITIES = BY_KIND[c.KIND_MEDIA_PROCESSING_ENTITY]
CLUSTER_MEDIA_PROCESSING_ENTITIES = BY_KIND[c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY]
