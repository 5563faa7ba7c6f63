"""Which MediaProcessingEntity, Function and TaskTemplate a Task runs with, and whether its Job
may be made from them: the selection policy of docs/behaviour.md §3.6 (`choose`), over Kubernetes
label selectors evaluated on cached objects (`label_selectors`). Pure: no I/O.

The controller and `taskfsm render-job` use it as ``from taskfsm import selection``.
"""

from taskfsm.selection.choose import (
    FUNCTION,
    MPE,
    TASK_TEMPLATE,
    Catalog,
    Selection,
    SelectionError,
    job_function,
    job_refusal,
    object_ref,
    resolve_ref,
    select,
    select_by_selector,
    select_function,
    select_media_processing_entity,
    task_template,
)

__all__ = [
    "FUNCTION",
    "MPE",
    "TASK_TEMPLATE",
    "Catalog",
    "Selection",
    "SelectionError",
    "job_function",
    "job_refusal",
    "object_ref",
    "resolve_ref",
    "select",
    "select_by_selector",
    "select_function",
    "select_media_processing_entity",
    "task_template",
]
