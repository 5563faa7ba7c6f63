"""The ``engine.nagare.media/v1alpha1`` API in Python: models of all kinds the Task controller uses.

One module per concept (docs/behaviour.md §1): ``meta`` (references, conditions), ``task``,
``workflow``, ``function``, ``tasktemplate``, ``mpe``, ``medialocation``, ``media``,
``helperdata`` (the ``data.json`` payload), ``config`` (the process configuration); ``base``,
``resource``, ``objectmeta`` and ``scalars`` hold what they share, ``errors`` the plain-words
validation messages, ``kinds`` the registry. The CRDs are generated from these models by
``taskfsm.api.crdgen``. Nothing here imports ``kubernetes``: models are plain JSON in, plain JSON
out.

Typical use::

    task = Task.from_dict(body)            # raises InvalidObjectError("Task ns/x is invalid: ...")
    task.status.phase = TaskPhase.RUNNING
    patch = {"status": task.status.to_dict()}
"""

from taskfsm.api.base import InlineUnion, K8sModel
from taskfsm.api.config import NatsConfiguration, WorkflowManagerConfiguration
from taskfsm.api.constants import TaskPhase, WorkflowPhase
from taskfsm.api.errors import InvalidObjectError, describe_validation_error
from taskfsm.api.function import ClusterFunction, Function, FunctionSpec
from taskfsm.api.helperdata import (
    HelperNats,
    HelperSystem,
    HelperTask,
    HelperWorkflow,
    WorkflowManagerHelperData,
)
from taskfsm.api.kinds import MODEL_BY_KIND, RESOURCE_MODELS, parse_object
from taskfsm.api.media import Media, MediaMetadata, MediaStream
from taskfsm.api.medialocation import (
    ClusterMediaLocation,
    HTTPMediaLocation,
    MediaLocation,
    MediaLocationSpec,
    OpencastMediaLocation,
    RISTMediaLocation,
    RTMPMediaLocation,
    RTSPMediaLocation,
    S3MediaLocation,
)
from taskfsm.api.meta import (
    Condition,
    ConfigMapOrSecretReference,
    ExactObjectReference,
    HumanReadableDescription,
    LocalObjectReference,
    ObjectReference,
    find_condition,
)
from taskfsm.api.mpe import (
    ClusterMediaProcessingEntity,
    LocalMediaProcessingEntity,
    MediaProcessingEntity,
    MediaProcessingEntitySpec,
    MediaProcessingEntityStatus,
    RemoteMediaProcessingEntity,
)
from taskfsm.api.objectmeta import ObjectMeta, OwnerReference
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import (
    UID,
    APIVersion,
    ConditionType,
    GoDuration,
    JobTemplateSpec,
    Kind,
    LabelSelector,
    NamespaceName,
    ObjectName,
    StringMap,
    Time,
)
from taskfsm.api.task import JobFailureAction, JobFailurePolicy, Task, TaskSpec, TaskStatus
from taskfsm.api.tasktemplate import ClusterTaskTemplate, TaskTemplate, TaskTemplateSpec
from taskfsm.api.workflow import NamedMediaLocationReference, Workflow, WorkflowSpec, WorkflowStatus

__all__ = [
    "MODEL_BY_KIND",
    "RESOURCE_MODELS",
    "UID",
    "APIVersion",
    "ApiObject",
    "ClusterFunction",
    "ClusterMediaLocation",
    "ClusterMediaProcessingEntity",
    "ClusterTaskTemplate",
    "Condition",
    "ConditionType",
    "ConfigMapOrSecretReference",
    "ExactObjectReference",
    "Function",
    "FunctionSpec",
    "GoDuration",
    "HTTPMediaLocation",
    "HelperNats",
    "HelperSystem",
    "HelperTask",
    "HelperWorkflow",
    "HumanReadableDescription",
    "InlineUnion",
    "InvalidObjectError",
    "JobFailureAction",
    "JobFailurePolicy",
    "JobTemplateSpec",
    "K8sModel",
    "Kind",
    "LabelSelector",
    "LocalMediaProcessingEntity",
    "LocalObjectReference",
    "Media",
    "MediaLocation",
    "MediaLocationSpec",
    "MediaMetadata",
    "MediaProcessingEntity",
    "MediaProcessingEntitySpec",
    "MediaProcessingEntityStatus",
    "MediaStream",
    "NamedMediaLocationReference",
    "NamespaceName",
    "NatsConfiguration",
    "ObjectMeta",
    "ObjectName",
    "ObjectReference",
    "OpencastMediaLocation",
    "OwnerReference",
    "RISTMediaLocation",
    "RTMPMediaLocation",
    "RTSPMediaLocation",
    "RemoteMediaProcessingEntity",
    "S3MediaLocation",
    "StringMap",
    "Task",
    "TaskPhase",
    "TaskSpec",
    "TaskStatus",
    "TaskTemplate",
    "TaskTemplateSpec",
    "Time",
    "Workflow",
    "WorkflowManagerConfiguration",
    "WorkflowManagerHelperData",
    "WorkflowPhase",
    "WorkflowSpec",
    "WorkflowStatus",
    "describe_validation_error",
    "find_condition",
    "parse_object",
]
