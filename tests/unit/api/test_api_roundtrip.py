"""Round trips of every model over generated documents (hypothesis).

For each of the ten resource kinds, the helper payload and the process configuration:

* JSON -> model -> JSON gives back the input, unknown members included (the generator adds
  ``zz...`` members the models do not declare at every level);
* model -> JSON text -> model gives an equal model.

Documents come from the models' own generated schemas (``tests/unit/api/api_strategies.py``), so
these tests also show that every document the CRDs accept parses.
"""

from __future__ import annotations

from typing import Any

import pytest
from api_strategies import documents, resources
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskfsm.api import (
    RESOURCE_MODELS,
    ApiObject,
    Task,
    WorkflowManagerConfiguration,
    WorkflowManagerHelperData,
)
from tests.support.examples import examples

SETTINGS = settings(
    max_examples=examples(24),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def without_empty_status(body: dict[str, Any]) -> dict[str, Any]:
    """An empty ``status`` is not written (``ApiObject``); compare without it."""
    return {k: v for k, v in body.items() if not (k == "status" and v == {})}


@pytest.mark.parametrize("model", RESOURCE_MODELS, ids=lambda m: m.KIND)
@SETTINGS
@given(data=st.data())
def test_resource_json_model_json_keeps_everything(
    model: type[ApiObject], data: st.DataObject
) -> None:
    body = data.draw(resources(model, unknown=True))
    parsed = model.from_dict(body)
    assert parsed.to_dict() == without_empty_status(body)


@pytest.mark.parametrize("model", RESOURCE_MODELS, ids=lambda m: m.KIND)
@SETTINGS
@given(data=st.data())
def test_resource_model_json_model_is_identity(model: type[ApiObject], data: st.DataObject) -> None:
    parsed = model.from_dict(data.draw(resources(model, unknown=True)))
    again = model.model_validate_json(parsed.to_json())
    assert again == parsed
    assert again.to_dict() == parsed.to_dict()


def without_empty_helper_members(value: Any) -> Any:
    """The payload omits empty ``config``/``humanReadable`` and writes unset inputs as null."""
    if isinstance(value, dict):
        return {
            k: without_empty_helper_members(v)
            for k, v in value.items()
            if v is not None and not (k in ("config", "humanReadable") and not v)
        }
    if isinstance(value, list):
        return [without_empty_helper_members(v) for v in value]
    return value


@SETTINGS
@given(data=st.data())
def test_helper_data_round_trips(data: st.DataObject) -> None:
    body = data.draw(documents(WorkflowManagerHelperData, unknown=True))
    parsed = WorkflowManagerHelperData.model_validate(body)
    assert without_empty_helper_members(parsed.to_dict()) == without_empty_helper_members(body)
    assert WorkflowManagerHelperData.model_validate_json(parsed.to_json()) == parsed


@SETTINGS
@given(data=st.data())
def test_process_configuration_round_trips(data: st.DataObject) -> None:
    body = data.draw(documents(WorkflowManagerConfiguration, unknown=True))
    parsed = WorkflowManagerConfiguration.from_dict(body)
    assert parsed.to_dict() == body
    assert WorkflowManagerConfiguration.model_validate_json(parsed.to_json()) == parsed


@SETTINGS
@given(data=st.data())
def test_status_written_back_keeps_unknown_status_members(data: st.DataObject) -> None:
    """What a status patch built from a parsed Task sends still holds others' status members."""
    body = data.draw(resources(Task, unknown=True))
    body["status"] = {**body.get("status", {}), "zzWrittenByOthers": {"a": [1, None]}}
    task = Task.from_dict(body)
    task.status.message = "changed"
    written = task.status.to_dict()
    assert written["zzWrittenByOthers"] == {"a": [1, None]}
    assert written["message"] == "changed"
