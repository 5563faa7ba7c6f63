"""A 409 whose current version already holds the patch is that patch, landed once already (a
resent request): `holds` says whether applying a merge patch would change nothing."""

from __future__ import annotations

from taskfsm.controllers.writes import holds


def test_equal_fields_and_nested_objects_hold() -> None:
    current = {"phase": "Running", "jobRef": {"name": "j", "uid": "u"}, "extra": 1}
    assert holds(current, {"phase": "Running", "jobRef": {"name": "j"}})


def test_a_changed_value_a_list_that_differs_or_a_field_to_remove_does_not_hold() -> None:
    current = {"phase": "Running", "finalizers": ["a", "b"], "message": "x"}
    assert not holds(current, {"phase": "Succeeded"})
    assert not holds(current, {"finalizers": ["a"]})  # a merge patch replaces lists whole
    assert not holds(current, {"message": None})  # null removes
    assert holds(current, {"absent": None})


def test_an_object_where_the_current_has_none_does_not_hold() -> None:
    assert not holds({"jobRef": None}, {"jobRef": {"name": "j"}})
    assert not holds({}, {"conditions": [{"type": "Ready"}]})
