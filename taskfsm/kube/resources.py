"""The nagare ``engine.nagare.media/v1alpha1`` resources as REST descriptors (task-controller.md §1.1)."""

from __future__ import annotations

from taskfsm import constants as c
from taskfsm.kube.rest import Resource


def _engine(plural: str, kind: str, *, namespaced: bool = True) -> Resource:
    return Resource(c.GROUP, c.VERSION, plural, kind, namespaced=namespaced)


TASKS = _engine(c.PLURAL_TASKS, c.KIND_TASK)
WORKFLOWS = _engine(c.PLURAL_WORKFLOWS, c.KIND_WORKFLOW)
FUNCTIONS = _engine(c.PLURAL_FUNCTIONS, c.KIND_FUNCTION)
CLUSTER_FUNCTIONS = _engine(c.PLURAL_CLUSTER_FUNCTIONS, c.KIND_CLUSTER_FUNCTION, namespaced=False)
TASK_TEMPLATES = _engine(c.PLURAL_TASK_TEMPLATES, c.KIND_TASK_TEMPLATE)
CLUSTER_TASK_TEMPLATES = _engine(
    c.PLURAL_CLUSTER_TASK_TEMPLATES, c.KIND_CLUSTER_TASK_TEMPLATE, namespaced=False
)
MEDIA_PROCESSING_ENTITIES = _engine(c.PLURAL_MEDIA_PROCESSING_ENTITIES, c.KIND_MEDIA_PROCESSING_ENTITY)
CLUSTER_MEDIA_PROCESSING_ENTITIES = _engine(
    c.PLURAL_CLUSTER_MEDIA_PROCESSING_ENTITIES, c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY, namespaced=False
)
MEDIA_LOCATIONS = _engine(c.PLURAL_MEDIA_LOCATIONS, c.KIND_MEDIA_LOCATION)
CLUSTER_MEDIA_LOCATIONS = _engine(
    c.PLURAL_CLUSTER_MEDIA_LOCATIONS, c.KIND_CLUSTER_MEDIA_LOCATION, namespaced=False
)

#: Every engine resource the Task controller reads, by kind.
BY_KIND: dict[str, Resource] = {
    r.kind: r
    for r in (
        TASKS,
        WORKFLOWS,
        FUNCTIONS,
        CLUSTER_FUNCTIONS,
        TASK_TEMPLATES,
        CLUSTER_TASK_TEMPLATES,
        MEDIA_PROCESSING_ENTITIES,
        CLUSTER_MEDIA_PROCESSING_ENTITIES,
        MEDIA_LOCATIONS,
        CLUSTER_MEDIA_LOCATIONS,
    )
}
