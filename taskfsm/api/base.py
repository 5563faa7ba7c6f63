"""The base of every API model: how taskfsm reads and writes Kubernetes JSON.

All models in ``taskfsm.api`` derive from ``K8sModel``, which fixes four rules once:

* **JSON names.** Fields are snake_case in Python and carry their exact JSON name as alias
  (``media_processing_entity_ref`` <-> ``mediaProcessingEntityRef``); input is accepted under
  either name, output always uses the JSON name.
* **Unknown fields survive.** Members this version of taskfsm does not know (written by a newer
  nagare, another controller or a user) are kept and written back unchanged, so a status patch
  built from a parsed object never drops someone else's data.
* **Absent means absent.** ``None`` is written as a missing member, never as ``null`` (Go's
  ``omitempty``; for the API server a ``null`` in a merge patch would delete). Models that must
  write ``null`` (the helper payload, docs/behaviour.md §1.11) say so themselves.
* **Assignments are validated**, so ``task.status.phase = "Running"`` stores ``TaskPhase.RUNNING``
  and a typo fails at once.

``to_dict()`` and ``to_json()`` give the Kubernetes JSON; ``model_validate(dict)`` parses it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)


def drop_nulls(data: dict[str, Any], keep: Collection[str] = ()) -> dict[str, Any]:
    """``data`` without its ``None``-valued members, except those named in ``keep``.

    One level only: nested models apply their own rule.
    """
    return {key: value for key, value in data.items() if value is not None or key in keep}


class K8sModel(BaseModel):
    """Base of all wire models: JSON aliases, unknown fields kept, ``None`` omitted on output."""

    model_config = ConfigDict(
        extra="allow",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        validate_assignment=True,
        use_attribute_docstrings=True,
        # A validation error's text never quotes the value (a password, a Secret's data): it may
        # reach a log, an Event or a status message (docs/security.md, "No secret in any output").
        hide_input_in_errors=True,
    )

    @model_serializer(mode="wrap")
    def _omit_nulls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return drop_nulls(handler(self))

    def to_dict(self) -> dict[str, Any]:
        """This object as Kubernetes JSON (a dict of JSON-compatible values, JSON member names)."""
        return self.model_dump(mode="json")

    def to_json(self) -> str:
        """This object as compact Kubernetes JSON text."""
        return self.model_dump_json()


def union_rule(members: list[str], *, at_most_one: bool) -> dict[str, str]:
    """The CEL rule (``x-kubernetes-validations`` entry) of an inline union of ``members``.

    Its message is the one the models raise, without the ``(got ...)`` part: ``exactly one of
    local, remote must be set`` (``at_most_one``) or ``at least one of basic, streamingKey must be
    set``. A union of one member is ``has(self.<member>)`` with the "exactly one" message.
    """
    present = [f"has(self.{member})" for member in members]
    if len(present) == 1:
        rule = present[0]
    elif at_most_one:
        rule = f"[{', '.join(present)}].exists_one(member, member)"
    else:
        rule = " || ".join(present)
    wanted = "exactly one" if at_most_one else "at least one"
    return {"rule": rule, "message": f"{wanted} of {', '.join(members)} must be set"}


def _inline_union_schema(schema: dict[str, Any], cls: type[InlineUnion]) -> None:
    members = list(schema.get("properties", {}))
    if set(members) <= set(schema.get("required", ())):
        return  # every member is required: the schema's `required` already says it all
    rules = schema.setdefault("x-kubernetes-validations", [])
    rules.append(union_rule(members, at_most_one=cls.AT_MOST_ONE))


class InlineUnion(K8sModel):
    """A Kubernetes inline union: every declared field is a member; exactly one must be set.

    Used for MediaProcessingEntity and MediaLocation specs and their ``auth`` objects. The CRD
    schema carries the CEL rule of :func:`union_rule`, so the API server refuses such an object
    with the models' message; a subclass with ``AT_MOST_ONE = False`` allows several members (at
    least one). Parsing raises a ``ValueError`` naming the members, e.g. ``exactly one of local,
    remote must be set (got local, remote)``.
    """

    AT_MOST_ONE: ClassVar[bool] = True

    model_config = ConfigDict(json_schema_extra=_inline_union_schema)

    @model_validator(mode="after")
    def _check_members(self) -> Self:
        names = {name: info.alias or name for name, info in type(self).model_fields.items()}
        present = [alias for name, alias in names.items() if getattr(self, name) is not None]
        if (len(present) == 1) if self.AT_MOST_ONE else present:
            return self
        wanted = "exactly one" if self.AT_MOST_ONE else "at least one"
        members, got = ", ".join(names.values()), ", ".join(present) or "none"
        raise ValueError(f"{wanted} of {members} must be set (got {got})")

    def member(self) -> tuple[str, Any]:
        """The first set member as ``(json name, value)``."""
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if value is not None:
                return info.alias or name, value
        raise LookupError("no member set")  # unreachable for a validated object
