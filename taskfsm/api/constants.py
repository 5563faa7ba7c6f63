"""Every name on the wire that taskfsm shares with nagare media engine, in one place.

Existing nagare objects, Functions and helper images must keep working unchanged with taskfsm,
so the group, kinds, labels, annotations, finalizers, phases, condition types, volume name, mount
path and Job TTL below are exactly those of docs/behaviour.md §1.1 and §2. Other modules import
them from here and never spell the strings themselves.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from taskfsm import defaults

# --- API group (docs/behaviour.md §1.1) ---------------------------------------------------------

GROUP: Final = "engine.nagare.media"
VERSION: Final = "v1alpha1"
API_VERSION: Final = "engine.nagare.media/v1alpha1"
"""``GROUP/VERSION``, written out so that its type is the literal the models' ``apiVersion`` has."""

# --- Kinds and plurals (§1.1) --------------------------------------------------------------------

KIND_TASK: Final = "Task"
KIND_WORKFLOW: Final = "Workflow"
KIND_FUNCTION: Final = "Function"
KIND_CLUSTER_FUNCTION: Final = "ClusterFunction"
KIND_TASK_TEMPLATE: Final = "TaskTemplate"
KIND_CLUSTER_TASK_TEMPLATE: Final = "ClusterTaskTemplate"
KIND_MEDIA_PROCESSING_ENTITY: Final = "MediaProcessingEntity"
KIND_CLUSTER_MEDIA_PROCESSING_ENTITY: Final = "ClusterMediaProcessingEntity"
KIND_MEDIA_LOCATION: Final = "MediaLocation"
KIND_CLUSTER_MEDIA_LOCATION: Final = "ClusterMediaLocation"
# Non-resource kinds registered in the same scheme (§1.1, §1.11, §1.12).
KIND_WORKFLOW_MANAGER_HELPER_DATA: Final = "WorkflowManagerHelperData"
KIND_WORKFLOW_MANAGER_CONFIGURATION: Final = "WorkflowManagerConfiguration"

PLURAL_TASKS: Final = "tasks"
PLURAL_WORKFLOWS: Final = "workflows"
PLURAL_FUNCTIONS: Final = "functions"
PLURAL_CLUSTER_FUNCTIONS: Final = "clusterfunctions"
PLURAL_TASK_TEMPLATES: Final = "tasktemplates"
PLURAL_CLUSTER_TASK_TEMPLATES: Final = "clustertasktemplates"
PLURAL_MEDIA_PROCESSING_ENTITIES: Final = "mediaprocessingentities"
PLURAL_CLUSTER_MEDIA_PROCESSING_ENTITIES: Final = "clustermediaprocessingentities"
PLURAL_MEDIA_LOCATIONS: Final = "medialocations"
PLURAL_CLUSTER_MEDIA_LOCATIONS: Final = "clustermedialocations"

# CRD categories (§1.1): Task and Workflow are in all four, every other kind in the first two.
CATEGORIES_ALL: Final = ("nagare-all", "nme-all")
CATEGORIES_TASK_AND_WORKFLOW: Final = ("nagare-all", "nme-all", "nagare", "nme")

# --- Kubernetes kinds the controller creates in the MPE cluster (§1.13, §2) ----------------------

JOB_API_VERSION: Final = "batch/v1"
KIND_JOB: Final = "Job"
SECRET_API_VERSION: Final = "v1"
KIND_SECRET: Final = "Secret"

# --- Labels (§2, §1.5, §1.7) ---------------------------------------------------------------------

LABEL_WORKFLOW_NAMESPACE: Final = "engine.nagare.media/workflow-namespace"
LABEL_WORKFLOW_NAME: Final = "engine.nagare.media/workflow-name"
LABEL_TASK_NAMESPACE: Final = "engine.nagare.media/task-namespace"
LABEL_TASK_NAME: Final = "engine.nagare.media/task-name"
# Informational selection labels and the NBMP gateway's MPE label; taskfsm never sets them.
LABEL_FUNCTION_TYPE: Final = "beta.engine.nagare.media/function-type"
LABEL_FUNCTION_SCRIPT_LANGUAGE: Final = "beta.engine.nagare.media/function-script-language"
LABEL_MEDIA_PROCESSING_ENTITY_LOCATION: Final = (
    "beta.engine.nagare.media/media-processing-entity-location"
)

# --- Annotations (§1.7, §1.8, §2) ----------------------------------------------------------------

ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY: Final = (
    "beta.engine.nagare.media/is-default-media-processing-entity"
)
# Exactly this string marks a default; "True", "yes" or "1" do not.
ANNOTATION_VALUE_TRUE: Final = "true"
# Defined upstream but unused by the Task controller (§1.8).
ANNOTATION_IS_DEFAULT_STEP_MEDIA_LOCATION: Final = (
    "beta.engine.nagare.media/is-default-step-media-location"
)
ANNOTATION_IS_DEFAULT_STREAMING_MEDIA_LOCATION: Final = (
    "beta.engine.nagare.media/is-default-streaming-media-location"
)

# --- Finalizers (§2) -----------------------------------------------------------------------------

FINALIZER_TASK_PROTECTION: Final = "engine.nagare.media/task-protection"
FINALIZER_JOB_PROTECTION: Final = "engine.nagare.media/job-protection"
FINALIZER_WORKFLOW_PROTECTION: Final = "engine.nagare.media/workflow-protection"
FINALIZER_MPE_PROTECTION: Final = "engine.nagare.media/mpe-protection"

# --- The helper-data volume in every Job (§1.13, §2) ---------------------------------------------

TASK_DATA_VOLUME_NAME: Final = "nagare-media-engine-task-data"
TASK_DATA_MOUNT_PATH: Final = "/run/secrets/engine.nagare.media/task"
TASK_DATA_FILE_NAME: Final = "data.json"  # the Secret key and the file under the mount path

# --- Jobs ----------------------------------------------------------------------------------------

JOB_TTL_SECONDS_AFTER_FINISHED: Final = defaults.JOB_TTL_SECONDS  # overrides the template (§2)

# --- Controller names (§2) -----------------------------------------------------------------------

TASK_CONTROLLER_NAME: Final = "nagare-media-engine-task-controller"
JOB_CONTROLLER_NAME_SUFFIX: Final = "nagare-media-engine-job-controller"

# --- Phases and conditions (§1.3, §1.4, §1.7, §1.10, §2) -----------------------------------------


class TaskPhase(StrEnum):
    """``Task.status.phase`` (§1.3). An absent phase counts as active."""

    INITIALIZING = "Initializing"
    JOB_PENDING = "JobPending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


TASK_TERMINAL_PHASES: Final = frozenset({TaskPhase.SUCCEEDED, TaskPhase.FAILED})
"""Phases that record the Job's outcome; they never change again (§3.4)."""

TASK_PRE_RUNNING_PHASES: Final = ("", TaskPhase.INITIALIZING, TaskPhase.JOB_PENDING)
"""Phases before the Task's Job exists (``""``: not set yet): a Task there may be waiting for a
Function, TaskTemplate, MediaLocation or MediaProcessingEntity."""

TASK_TERMINAL_CONDITIONS: Final[dict[str, str]] = {
    TaskPhase.SUCCEEDED: "Complete",
    TaskPhase.FAILED: "Failed",
}
"""The condition a terminal phase sets True, which carries its reason (§3.3)."""


class WorkflowPhase(StrEnum):
    """``Workflow.status.phase`` (§1.4). Terminated iff Succeeded or Failed; empty is active."""

    INITIALIZING = "Initializing"
    RUNNING = "Running"
    AWAITING_COMPLETION = "AwaitingCompletion"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


WORKFLOW_TERMINAL_PHASES: Final = frozenset({WorkflowPhase.SUCCEEDED, WorkflowPhase.FAILED})


class ConditionStatus(StrEnum):
    """``Condition.status`` (§1.10)."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class TaskConditionType(StrEnum):
    """Condition types the Task controller writes on Tasks (§2)."""

    INITIALIZED = "Initialized"
    READY = "Ready"
    COMPLETE = "Complete"
    FAILED = "Failed"


class JobConditionType(StrEnum):
    """batch/v1 Job condition types read by type, never by position (docs/behaviour.md §3.12).

    ``Complete``/``SuccessCriteriaMet`` mean Succeeded; ``Failed``/``FailureTarget`` mean Failed.
    """

    COMPLETE = "Complete"
    SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
    FAILED = "Failed"
    FAILURE_TARGET = "FailureTarget"


JOB_SUCCEEDED_CONDITIONS: Final = frozenset(
    {JobConditionType.COMPLETE, JobConditionType.SUCCESS_CRITERIA_MET}
)
JOB_FAILED_CONDITIONS: Final = frozenset({JobConditionType.FAILED, JobConditionType.FAILURE_TARGET})
