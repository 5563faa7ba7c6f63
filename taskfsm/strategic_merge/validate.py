"""Check a strategic merge patch against the Kubernetes schema before merging anything.

Why: Kubernetes only notices some malformed patches halfway through a merge (or not at all, and
then fails when decoding the result). The Task controller must instead give the user one clear
message naming the JSON path (docs/behaviour.md D4, §3.7.1), so the whole patch is checked up
front: value types per the schema, merge keys on list items, and every ``$``-directive's name,
value and placement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskfsm.strategic_merge import schema
from taskfsm.strategic_merge.errors import PatchError, PathPart
from taskfsm.strategic_merge.schema import Shape
from taskfsm.strategic_merge.values import (
    DELETE_FROM,
    DIRECTIVE_PREFIX,
    PATCH,
    RETAIN_KEYS,
    SET_ORDER,
    ident,
    is_scalar,
    json_kind,
)

Path = tuple[PathPart, ...]


def _is_integer(value: Any) -> bool:
    # Integral floats (60.0) are refused on purpose: the merged template is later sent as JSON to
    # create the Job, and the API server's JSON decoder rejects 60.0 for an integer field.
    return isinstance(value, int) and not isinstance(value, bool)


_SCALAR_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "int-or-string": lambda v: isinstance(v, str) or _is_integer(v),
    "quantity": lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool),
}


def validate_patch(patch: Any, shape: Shape) -> None:
    """Raise :class:`PatchError` for the first problem in ``patch`` (an object of ``shape``)."""
    if not isinstance(patch, dict):
        raise PatchError((), f"a patch must be an object, not {json_kind(patch)}")
    _check_map(patch, shape, ())


def _wrong_type(path: Path, shape: Shape | None, value: Any) -> PatchError:
    return PatchError(path, f"expected {schema.describe(shape)}, got {json_kind(value)}")


def _check_value(value: Any, shape: Shape | None, path: Path) -> None:
    if value is None:
        return  # null deletes the key: valid for every field
    kind = shape["kind"] if shape is not None else None
    if kind == "any":
        return  # free-form object: Kubernetes stores it as written
    if kind in ("object", "map") or (kind is None and isinstance(value, dict)):
        if not isinstance(value, dict):
            raise _wrong_type(path, shape, value)
        _check_map(value, shape, path)
    elif kind == "list" or (kind is None and isinstance(value, list)):
        if not isinstance(value, list):
            raise _wrong_type(path, shape, value)
        _check_list(value, shape, path)
    elif shape is not None and kind == "scalar" and not _SCALAR_CHECKS[shape["type"]](value):
        raise _wrong_type(path, shape, value)


def _check_map(patch: dict[str, Any], shape: Shape | None, path: Path) -> None:
    if PATCH in patch and patch[PATCH] not in ("replace", "delete"):
        raise _bad_patch_directive((*path, PATCH), patch[PATCH], in_list=False)
    for key, value in patch.items():
        if not isinstance(key, str):
            raise PatchError(path, f"object keys must be strings, got {json_kind(key)}")
        here = (*path, key)
        if key == PATCH:
            continue
        if key == RETAIN_KEYS:
            if PATCH not in patch:  # "$patch" takes precedence; Kubernetes never looks further
                _check_retain_keys(patch, value, here)
        elif key.startswith(SET_ORDER):
            _check_set_order(patch, key[len(SET_ORDER) :], value, shape, here)
        elif key.startswith(DELETE_FROM):
            _check_delete_list(key[len(DELETE_FROM) :], value, shape, here)
        elif key.startswith(DIRECTIVE_PREFIX):
            raise PatchError(
                here,
                "unknown directive; the strategic merge patch directives are $patch, $retainKeys, "
                "$setElementOrder/<list field> and $deleteFromPrimitiveList/<list field>",
            )
        else:
            _check_value(value, schema.field_shape(shape, key), here)


def _bad_patch_directive(path: Path, value: Any, *, in_list: bool) -> PatchError:
    allowed = '"replace" or "delete"'
    if value == "merge":
        where = "list items" if in_list else "objects"
        return PatchError(path, f'"$patch: merge" is not supported in {where}; use {allowed}')
    shown = f'"{value}"' if isinstance(value, str) else json_kind(value)
    return PatchError(path, f"unknown $patch directive {shown}; expected {allowed}")


def _check_retain_keys(patch: dict[str, Any], keys: Any, path: Path) -> None:
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise PatchError(path, "must be a list of field names (strings)")
    for key, value in patch.items():
        # Like Kubernetes: nulls and directives need not be listed, every patched field must be.
        if value is not None and not key.startswith(DIRECTIVE_PREFIX) and key not in keys:
            raise PatchError(path, f'the patch sets "{key}", which $retainKeys does not list')


def _check_set_order(
    patch: dict[str, Any], field: str, order: Any, shape: Shape | None, path: Path
) -> None:
    field_shape = schema.field_shape(shape, field)
    if not field or (field_shape is not None and field_shape["kind"] != "list"):
        raise PatchError(path, f'"{field}" is not a list field, so its element order cannot be set')
    if not isinstance(order, list):
        raise PatchError(path, f"must be a list, got {json_kind(order)}")
    key = schema.merge_key(field_shape)
    for index, item in enumerate(order):
        if key:
            _check_merge_key(item, key, (*path, index), what="entry")
        elif not is_scalar(item):
            raise PatchError((*path, index), f"expected a plain value, got {json_kind(item)}")
    if field in patch and patch[field] is None:
        raise PatchError(path, f'"{field}" is set to null, so there is nothing to order')
    listed = patch.get(field)
    if not isinstance(listed, list):
        return
    # Kubernetes requires the patch's own items (deletions aside) to appear in the order list,
    # in the same relative order.
    plain = [
        item for item in listed if not (isinstance(item, dict) and item.get(PATCH) == "delete")
    ]
    if key and not all(isinstance(item, dict) and (key in item or PATCH in item) for item in plain):
        return  # the list's own check reports the missing merge key with its index
    # Walk both lists like Kubernetes does, including its quirk that a directive item (e.g. the
    # "$patch: replace" marker) left over after the order list is exhausted is an error.
    if not order or not plain:
        return
    at = seen = 0
    while at < len(plain) and seen < len(order):
        if isinstance(plain[at], dict) and PATCH in plain[at]:
            at += 1
            continue
        if _same_item(plain[at], order[seen], key):
            at += 1
        seen += 1
    if at < len(plain):
        raise PatchError(
            path,
            f'every item of "{field}" in the patch must appear in $setElementOrder/{field}, in the '
            'same order (and a "$patch: replace" marker must not come after the last listed item)',
        )


def _same_item(item: Any, entry: Any, key: str) -> bool:
    if key:
        return ident(item[key]) == ident(entry[key])
    return ident(item) == ident(entry)


def _check_delete_list(field: str, values: Any, shape: Shape | None, path: Path) -> None:
    field_shape = schema.field_shape(shape, field)
    items = schema.list_items(field_shape)
    if not field or (field_shape is not None and (items is None or items["kind"] != "scalar")):
        raise PatchError(
            path, f'"{field}" is not a list of plain values, so this directive does not apply'
        )
    if not isinstance(values, list):
        raise PatchError(path, f"must be a list, got {json_kind(values)}")
    for index, value in enumerate(values):
        if not is_scalar(value) or value is None:
            raise PatchError((*path, index), f"expected a plain value, got {json_kind(value)}")
        _check_value(value, items, (*path, index))


def _check_merge_key(item: Any, key: str, path: Path, *, what: str) -> None:
    if not isinstance(item, dict):
        raise PatchError(path, f'expected an object with "{key}", got {json_kind(item)}')
    if key not in item:
        raise PatchError(path, f'{what} has no "{key}", which items of this list are merged by')
    if item[key] is None or not is_scalar(item[key]):
        raise PatchError(
            (*path, key), f"merge key must be a string or number, got {json_kind(item[key])}"
        )


MAX_LIST_ITEMS = 1000
"""Longest list a template or patch may hold: merging pairs the items of two lists, so the work
grows with the product of their lengths (docs/security.md, "No object stops the controller");
a Job template's lists (containers, env, volumes) hold tens."""


def _check_list(items: list[Any], shape: Shape | None, path: Path) -> None:
    if len(items) > MAX_LIST_ITEMS:
        raise PatchError(path, f"has {len(items)} items; at most {MAX_LIST_ITEMS} are processed")
    item_shape = schema.list_items(shape)
    key = schema.merge_key(shape)
    keyed = bool(key) and schema.merges(shape)
    for index, item in enumerate(items):
        here = (*path, index)
        if isinstance(item, list):
            raise PatchError(here, "lists of lists are not supported")
        if item is None:
            raise PatchError(here, "a list item cannot be null")
        if isinstance(item, dict) and PATCH in item:
            directive = item[PATCH]
            if directive not in ("replace", "delete"):
                raise _bad_patch_directive((*here, PATCH), directive, in_list=True)
            if directive == "delete":
                if not keyed:
                    raise PatchError(
                        here,
                        "this list has no merge key, so a single item cannot be deleted with "
                        '"$patch: delete"; write the whole list instead',
                    )
                _check_merge_key(item, key, here, what='"$patch: delete" item')
            continue
        if keyed:
            _check_merge_key(item, key, here, what="item")
        _check_value(item, item_shape, here)
