"""The helper payload: ``data.json`` in each Task's Secret (docs/behaviour.md §1.11).

Functions' workflow-manager-helper reads this file, so its shape is a wire format shared with
existing helper images. ``WorkflowManagerHelperData.build(...)`` assembles it from the Workflow,
the Task, the merged configuration, the resolved MediaLocation specs and the NATS configuration;
``to_payload()`` writes it byte-compatibly with the reference's Go encoder:

* no ``apiVersion``/``kind`` (the reference never fills them, the helper tolerates their absence);
* members in Go struct order, map keys sorted, compact separators, trailing newline;
* ``task.inputs``/``task.outputs`` always present (``null`` when unset); ``mediaLocations``
  always present (``{}`` when empty); ``config`` and ``humanReadable`` omitted when empty;
* resolved ``secretRef``\\ s written as ``{"data": {key: base64}}`` only;
* ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as ``\\u003c`` etc.; durations in Go's canonical
  form (``3m`` -> ``3m0s``);
* ``system.nats`` with ``url``, ``username`` and ``password`` always present (``""`` when unset).

The payload holds Secret data and the NATS password: never log it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from taskfsm.api.base import K8sModel, drop_nulls
from taskfsm.api.config import NatsConfiguration
from taskfsm.api.media import Media
from taskfsm.api.medialocation import MediaLocationSpec
from taskfsm.api.meta import HumanReadableDescription
from taskfsm.api.scalars import GO_CANONICAL_DURATIONS, StringMap
from taskfsm.api.task import Task
from taskfsm.api.workflow import Workflow

_GO_HTML_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_GO_HTML_ESCAPE_TABLE = str.maketrans(_GO_HTML_ESCAPES)


def _none_if_empty(value: Any) -> Any:
    """Empty ``config``/``humanReadable`` mean the same as absent ones: hold ``None``."""
    if isinstance(value, HumanReadableDescription):
        return None if value.is_empty() else value
    return value or None


class HelperWorkflow(K8sModel):
    """``workflow`` of the payload: ``{id, humanReadable?, config?}``."""

    id: str
    """The Workflow's name."""
    human_readable: HumanReadableDescription | None = Field(default=None, alias="humanReadable")
    """The Workflow's ``spec.humanReadable``."""
    config: StringMap | None = None
    """The Workflow's ``spec.config``."""

    _empty_is_absent = field_validator("human_readable", "config")(_none_if_empty)


class HelperTask(K8sModel):
    """``task`` of the payload: ``{id, humanReadable?, inputs, outputs, config?}``."""

    id: str
    """The Task's name."""
    human_readable: HumanReadableDescription | None = Field(default=None, alias="humanReadable")
    """The Task's ``spec.humanReadable``."""
    inputs: list[Media] | None = None
    """The Task's ``spec.inputs``; written as ``null`` when unset."""
    outputs: list[Media] | None = None
    """The Task's ``spec.outputs``; written as ``null`` when unset."""
    config: StringMap | None = None
    """The merged configuration (Function < TaskTemplate < Task, docs/behaviour.md D2)."""

    _empty_is_absent = field_validator("human_readable", "config")(_none_if_empty)

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return drop_nulls(handler(self), keep=("inputs", "outputs"))


class HelperNats(K8sModel):
    """``system.nats``: all three members always written, ``""`` when not configured."""

    url: str = ""
    username: str = ""
    password: str = Field(default="", repr=False)


class HelperSystem(K8sModel):
    """``system`` of the payload."""

    nats: HelperNats = Field(default_factory=HelperNats, json_schema_extra={"default": {}})


class WorkflowManagerHelperData(K8sModel):
    """The helper payload (§1.11). Parsing also accepts ``apiVersion``/``kind`` (as in nagare's
    sample files); ``to_payload`` never writes them."""

    api_version: str | None = Field(default=None, alias="apiVersion")
    """Accepted on input only; not part of the payload."""
    kind: str | None = None
    """Accepted on input only; not part of the payload."""
    workflow: HelperWorkflow
    task: HelperTask
    media_locations: dict[str, MediaLocationSpec] = Field(
        default_factory=dict, alias="mediaLocations", json_schema_extra={"default": {}}
    )
    """Workflow media locations by name, with resolved secret references."""
    system: HelperSystem = Field(default_factory=HelperSystem, json_schema_extra={"default": {}})

    @classmethod
    def build(
        cls,
        *,
        workflow: Workflow,
        task: Task,
        config: Mapping[str, str] | None,
        media_locations: Mapping[str, MediaLocationSpec],
        nats: NatsConfiguration | None,
    ) -> WorkflowManagerHelperData:
        """The payload for ``task`` of ``workflow``.

        ``config`` is the merged configuration; ``media_locations`` maps each name of the
        Workflow's ``spec.mediaLocations`` to its spec, secret references already resolved
        (``MediaLocationSpec.resolve_secret_refs``); ``nats`` is the process configuration's.
        Objects are copied, never shared with the arguments.
        """
        return cls(
            workflow=HelperWorkflow(
                id=workflow.metadata.name or "",
                human_readable=_copy(workflow.spec.human_readable),
                config=dict(workflow.spec.config) if workflow.spec.config else None,
            ),
            task=HelperTask(
                id=task.metadata.name or "",
                human_readable=_copy(task.spec.human_readable),
                inputs=_copy_list(task.spec.inputs),
                outputs=_copy_list(task.spec.outputs),
                config=dict(config) if config else None,
            ),
            media_locations={
                name: spec.model_copy(deep=True) for name, spec in media_locations.items()
            },
            system=HelperSystem(
                nats=HelperNats(
                    url=nats.url if nats else "",
                    username=(nats.username or "") if nats else "",
                    password=(nats.password or "") if nats else "",
                )
            ),
        )

    def to_payload(self) -> bytes:
        """The ``data.json`` bytes, as the reference writes them (see the module docstring)."""
        data = self.model_dump(mode="json", context={GO_CANONICAL_DURATIONS: True})
        data.pop("apiVersion", None)
        data.pop("kind", None)
        data["mediaLocations"] = dict(sorted(data["mediaLocations"].items()))
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return (text.translate(_GO_HTML_ESCAPE_TABLE) + "\n").encode("utf-8")


_M = TypeVar("_M", bound=K8sModel)


def _copy(model: _M | None) -> _M | None:
    return model.model_copy(deep=True) if model is not None else None


def _copy_list(items: list[Media] | None) -> list[Media] | None:
    return [item.model_copy(deep=True) for item in items] if items is not None else None
