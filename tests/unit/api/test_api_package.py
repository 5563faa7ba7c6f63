"""The API package stands alone (no ``kubernetes`` import) and its wire constants are the spec's."""

from __future__ import annotations

import subprocess
import sys

import taskfsm.api
from taskfsm.api import constants as c


def test_models_do_not_import_kubernetes() -> None:
    code = "import sys, taskfsm.api, taskfsm.api.crdgen; print('kubernetes' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


def test_everything_exported_exists() -> None:
    for name in taskfsm.api.__all__:
        assert hasattr(taskfsm.api, name), name


def test_wire_names_are_those_of_task_controller_md_section_2() -> None:
    assert c.API_VERSION == "engine.nagare.media/v1alpha1"
    assert (
        c.LABEL_WORKFLOW_NAMESPACE,
        c.LABEL_WORKFLOW_NAME,
        c.LABEL_TASK_NAMESPACE,
        c.LABEL_TASK_NAME,
    ) == (
        "engine.nagare.media/workflow-namespace",
        "engine.nagare.media/workflow-name",
        "engine.nagare.media/task-namespace",
        "engine.nagare.media/task-name",
    )
    assert c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY == (
        "beta.engine.nagare.media/is-default-media-processing-entity"
    )
    assert c.FINALIZER_TASK_PROTECTION == "engine.nagare.media/task-protection"
    assert c.FINALIZER_JOB_PROTECTION == "engine.nagare.media/job-protection"
    assert c.TASK_DATA_VOLUME_NAME == "nagare-media-engine-task-data"
    assert c.TASK_DATA_MOUNT_PATH == "/run/secrets/engine.nagare.media/task"
    assert c.TASK_DATA_FILE_NAME == "data.json"
    assert c.JOB_TTL_SECONDS_AFTER_FINISHED == 86400
    assert [p.value for p in c.TaskPhase] == [
        "Initializing",
        "JobPending",
        "Running",
        "Succeeded",
        "Failed",
    ]
    assert [t.value for t in c.TaskConditionType] == ["Initialized", "Ready", "Complete", "Failed"]
