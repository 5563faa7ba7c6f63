"""Kubernetes strategic merge patch on plain JSON dicts, for Job templates (docs/behaviour.md D4).

Why: the reference controller merged ``templatePatches`` with a schema-less merge of Go
re-serialisations, which wiped the containers of any patch that did not repeat them (defect D4,
§3.7.1). taskfsm applies each patch as the user wrote it with the semantics of
Kubernetes' own strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch, as the API
server applies it to built-in objects), using merge keys and strategies generated from the
Kubernetes OpenAPI document (``patch_meta.json``).

The result equals what the API server would store for the same original and patch, before its
own defaulting; see docs/template-patches.md for the rules and the few deliberate differences
(stricter errors for malformed patches).
"""

from __future__ import annotations

import copy
from typing import Any

from taskfsm.strategic_merge import schema
from taskfsm.strategic_merge.errors import PatchError, PathPart
from taskfsm.strategic_merge.schema import Shape
from taskfsm.strategic_merge.validate import validate_patch
from taskfsm.strategic_merge.values import (
    DELETE_FROM,
    DIRECTIVE_PREFIX,
    PATCH,
    RETAIN_KEYS,
    SET_ORDER,
    Ident,
    KeyFn,
    first_positions,
    ident,
    json_kind,
)

JOB_TEMPLATE_SPEC = "io.k8s.api.batch.v1.JobTemplateSpec"
Path = tuple[PathPart, ...]
_DROP = object()  # "leave this key/item out", distinct from a JSON null


def apply_strategic_merge(
    original: dict[str, Any], patch: dict[str, Any], type_name: str = JOB_TEMPLATE_SPEC
) -> dict[str, Any]:
    """Apply one strategic merge ``patch`` to ``original``, both JSON objects of ``type_name``.

    Pure: the inputs are never modified and the result shares no containers with them.
    ``type_name`` is an OpenAPI definition name reachable from JobTemplateSpec (e.g.
    ``io.k8s.api.core.v1.PodTemplateSpec``).

    Raises:
        PatchError: the patch is malformed (wrong value type, list item without its merge key,
            unknown or misplaced directive, ...) or cannot be merged into ``original`` (e.g. a
            merged list whose existing items lack the merge key); the message names the path.
        ValueError: ``type_name`` has no generated metadata.
    """
    shape = schema.type_shape(type_name)
    if not isinstance(original, dict):
        raise PatchError(
            (), f"the object being patched must be an object, not {json_kind(original)}"
        )
    validate_patch(patch, shape)
    return _merge_map(copy.deepcopy(original), copy.deepcopy(patch), shape, ())


def merge_job_template(
    function_template: dict[str, Any] | None, *patches: dict[str, Any] | None
) -> dict[str, Any]:
    """Build a Job template: the Function's ``template`` with each patch applied in order.

    docs/behaviour.md §3.7 step 4 and §3.7.1 (the D4 fix): call as
    ``merge_job_template(function.template, task_template.templatePatches, task.templatePatches)``.
    ``None`` patches (absent TaskTemplate or field) are skipped; a ``None`` template counts as
    ``{}``. Returns a new dict; the inputs are not modified.

    Raises:
        PatchError: as :func:`apply_strategic_merge`, with ``patch_index`` set to the position of
            the failing patch among ``patches`` (0 = first).
    """
    result = copy.deepcopy(function_template) if function_template is not None else {}
    for index, patch in enumerate(patches):
        if patch is None:
            continue
        try:
            result = apply_strategic_merge(result, patch)
        except PatchError as exc:
            exc.patch_index = index
            raise
    return result


def _clean(value: Any, *, keep_replace_maps: bool) -> Any:
    """Patch content that has nothing to merge with, as Kubernetes ends up storing it.

    Nulls and ``$``-keys vanish, maps marked ``$patch: delete`` and list items carrying ``$patch``
    are dropped. A map marked ``$patch: replace`` is dropped too when the key was absent from the
    original (``keep_replace_maps=False``, Kubernetes' behaviour), and kept otherwise.
    """
    if isinstance(value, dict):
        if PATCH in value and (value[PATCH] == "delete" or not keep_replace_maps):
            return _DROP
        return _clean_map(value, keep_replace_maps=keep_replace_maps)
    if isinstance(value, list):
        return _clean_list(value, keep_replace_maps=keep_replace_maps)
    return value


def _clean_map(value: dict[str, Any], *, keep_replace_maps: bool) -> dict[str, Any]:
    """:func:`_clean` of a map, its own ``$patch`` (if any) disregarded."""
    out = {}
    for key, item in value.items():
        if item is None or key.startswith(DIRECTIVE_PREFIX):
            continue
        cleaned = _clean(item, keep_replace_maps=keep_replace_maps)
        if cleaned is not _DROP:
            out[key] = cleaned
    return out


def _clean_list(value: list[Any], *, keep_replace_maps: bool) -> list[Any]:
    """:func:`_clean` of a list: items carrying ``$patch`` are dropped, the others cleaned."""
    kept = (v for v in value if not (isinstance(v, dict) and PATCH in v))
    return [_clean(v, keep_replace_maps=keep_replace_maps) for v in kept]


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], shape: Shape | None, path: Path
) -> dict[str, Any]:
    """Merge ``patch`` into ``original`` (both private copies, mutated freely)."""
    if PATCH in patch:
        if patch[PATCH] == "delete":
            return {}
        return _clean_map({k: v for k, v in patch.items() if k != PATCH}, keep_replace_maps=True)
    if RETAIN_KEYS in patch:
        retained = set(patch[RETAIN_KEYS])
        for key in [k for k in original if k not in retained]:
            del original[key]
    ordered: set[str] = set()
    for key, order in patch.items():
        if key.startswith(SET_ORDER):
            field = key[len(SET_ORDER) :]
            if _apply_element_order(
                original, patch, field, order, schema.field_shape(shape, field), path
            ):
                ordered.add(field)
    for key, value in patch.items():
        if not key.startswith(DIRECTIVE_PREFIX) and key not in ordered:
            _merge_field(original, key, value, schema.field_shape(shape, key), (*path, key))
    # Deletions run after additions, so an item both added and deleted ends up deleted.
    for key, values in patch.items():
        if key.startswith(DELETE_FROM):
            _delete_primitives(original, key[len(DELETE_FROM) :], values, (*path, key))
    return original


def _merge_field(
    target: dict[str, Any], key: str, value: Any, shape: Shape | None, path: Path
) -> None:
    if value is None:
        target.pop(key, None)
        return
    current = target.get(key, _DROP)
    if isinstance(current, dict) and isinstance(value, dict):
        if "replace" in schema.strategies(shape):
            target[key] = _clean(value, keep_replace_maps=True)
        else:
            target[key] = _merge_map(current, value, shape, path)
    elif isinstance(current, list) and isinstance(value, list):
        target[key] = _merge_list_field(current, value, shape, path)
    elif (
        current is not _DROP
        and not isinstance(current, (dict, list))
        and not isinstance(value, (dict, list))
    ):
        target[key] = value
    else:
        # Absent before, or a different kind of value (e.g. a JSON null in the template): the
        # patch value is taken as written, minus its directives and nulls.
        cleaned = _clean(value, keep_replace_maps=False)
        if cleaned is _DROP:
            target.pop(key, None)
        else:
            target[key] = cleaned


def _merge_list_field(
    current: list[Any], value: list[Any], shape: Shape | None, path: Path
) -> list[Any]:
    if schema.merges(shape):
        return _merge_list(current, value, shape, path)
    # No merge strategy (args, tolerations, ...): the patch's list replaces the template's.
    return _clean_list(value, keep_replace_maps=True)


def _item_kind(value: Any) -> str:
    return "object" if isinstance(value, dict) else json_kind(value)


def _merge_list(
    original: list[Any], patch: list[Any], shape: Shape | None, path: Path
) -> list[Any]:
    """Merge a list with the ``merge`` strategy: by merge key for objects, as a set otherwise."""
    if not original and not patch:
        return original
    kinds = {_item_kind(v) for v in original + patch}
    if len(kinds) > 1:
        raise PatchError(
            path,
            f"cannot merge a list whose items have different types ({', '.join(sorted(kinds))})",
        )
    if "object" not in kinds:
        return _merge_primitives(original, patch)
    key = schema.merge_key(shape)
    if not key:
        raise PatchError(path, "cannot merge a list of objects that has no merge key")
    item_shape = schema.list_items(shape)
    plain: list[tuple[int, dict[str, Any]]] = []
    replace = False
    for index, item in enumerate(patch):
        if PATCH not in item:
            plain.append((index, item))
        elif item[PATCH] == "delete":
            wanted = ident(item[key])
            original = [o for o in original if not (key in o and ident(o[key]) == wanted)]
        else:  # "replace"; validated
            replace = True
    if replace:
        return [_clean(item, keep_replace_maps=True) for _, item in plain]
    _require_merge_key(original, key, path)
    merged = list(original)
    for index, item in plain:
        wanted = ident(item[key])
        found = next((i for i, m in enumerate(merged) if ident(m[key]) == wanted), None)
        if found is None:
            merged.append(_clean(item, keep_replace_maps=True))
        else:
            merged[found] = _merge_map(merged[found], item, item_shape, (*path, index))
    return _reorder(merged, [item for _, item in plain], original, _by_key(key))


def _by_key(key: str) -> KeyFn:
    """Identify list items (objects) by the value of their merge ``key``."""

    def keyf(item: Any) -> Ident:
        return ident(item[key])

    return keyf


def _merge_primitives(original: list[Any], patch: list[Any]) -> list[Any]:
    """Set union of two lists of plain values (e.g. ``finalizers``), ordered like Kubernetes."""
    union: list[Any] = []
    seen: set[Ident] = set()
    for value in original + patch:
        if ident(value) not in seen:
            seen.add(ident(value))
            union.append(value)
    return _reorder(union, patch, original, ident)


def _reorder(merged: list[Any], order: list[Any], server: list[Any], keyf: KeyFn) -> list[Any]:
    """Order ``merged`` as Kubernetes does after a merge.

    Items named in ``order`` (the patch list or ``$setElementOrder``) come in that order; the
    others keep their relative order from ``server`` (the list before the patch); the two runs
    are interleaved by their positions in ``server``, where an item unknown to ``server``
    goes before the pending older items. Hence a patch naming only a new container puts it
    *first*; a patch also naming an existing container places the new one after it.
    """
    order_pos = first_positions(order, keyf)
    server_pos = first_positions(server, keyf)
    named = _sort_like_go([m for m in merged if keyf(m) in order_pos], order_pos, keyf)
    others = _sort_like_go([m for m in merged if keyf(m) not in order_pos], server_pos, keyf)
    result: list[Any] = []
    i = j = 0
    while i < len(others) or j < len(named):
        if j >= len(named):
            result.append(others[i])
            i += 1
        elif i >= len(others):
            result.append(named[j])
            j += 1
        else:
            left, right = server_pos.get(keyf(others[i])), server_pos.get(keyf(named[j]))
            if left is not None and right is not None and left < right:
                result.append(others[i])
                i += 1
            else:
                result.append(named[j])
                j += 1
    return result


def _sort_like_go(items: list[Any], positions: dict[Ident, int], keyf: KeyFn) -> list[Any]:
    """Stable sort by position, treating an unpositioned item as "less" than anything.

    That odd comparison is Kubernetes'; it only matters when some items have no position (e.g.
    an empty ``$setElementOrder`` list), where Go's insertion sort (used up to 20 items) then
    reverses them. Longer lists fall back to Python's sort with unpositioned items last.
    """
    if len(items) > 20 or all(keyf(m) in positions for m in items):
        return sorted(items, key=lambda m: positions.get(keyf(m), len(positions)))
    out = list(items)
    for i in range(1, len(out)):
        j = i
        while j > 0:
            a, b = positions.get(keyf(out[j])), positions.get(keyf(out[j - 1]))
            if a is not None and b is not None and not a < b:
                break
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


def _require_merge_key(items: list[Any], key: str, path: Path) -> None:
    for index, item in enumerate(items):
        if not isinstance(item, dict) or key not in item:
            raise PatchError(
                path,
                f'item {index} of the list being patched has no "{key}", '
                "which this list is merged by",
            )


def _apply_element_order(
    target: dict[str, Any],
    patch: dict[str, Any],
    field: str,
    order: list[Any],
    shape: Shape | None,
    path: Path,
) -> bool:
    """Handle ``$setElementOrder/<field>``: merge the field's list, then order it.

    Returns whether the field was handled (so the main loop skips it).
    """
    here = (*path, field)
    current = target.get(field)
    if current is not None and not isinstance(current, list):
        raise PatchError(
            here, f"cannot set the element order: the value being patched is {json_kind(current)}"
        )
    if field in patch and not isinstance(patch[field], list):
        raise PatchError(
            here, f"cannot set the element order: the patch gives {json_kind(patch[field])}"
        )
    merged: list[Any]
    if field not in patch:
        if current is None:
            return True
        merged = current
    elif current is None:
        merged = _clean_list(patch[field], keep_replace_maps=False)
    else:
        merged = _merge_list_field(current, patch[field], shape, here)
    if not current and not patch.get(field):
        # Kubernetes cannot tell the item type of two empty lists and rejects the patch.
        raise PatchError(
            here, f"cannot set the element order: {field} has no items before or after the patch"
        )
    key = schema.merge_key(shape)
    server = current or []
    if key:
        _require_merge_key(merged, key, here)
        keyf = _by_key(key)
        if current and field in patch and schema.merges(shape):
            server = _server_order_as_go_sees_it(current, patch[field], key)
    else:
        keyf = ident
    target[field] = _reorder(merged, order, server, keyf)
    return True


def _server_order_as_go_sees_it(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    """The "list before the patch" that Kubernetes orders ``$setElementOrder`` results against.

    Kubernetes deletes ``$patch: delete`` items in place and then appends new items into the same
    array, which its ``$setElementOrder`` step still reads as the original list: deletions shift
    later items left and new items overwrite the freed tail. Reproduced here so that ordering
    matches the API server exactly when both directives meet (as in kubectl-generated patches).
    """
    backing = list(current)
    length = len(backing)

    def same(item: Any, wanted: Ident) -> bool:
        return isinstance(item, dict) and key in item and ident(item[key]) == wanted

    for item in patch:
        if item.get(PATCH) != "delete":
            continue
        wanted = ident(item[key])
        while (
            hit := next((i for i in range(length) if same(backing[i], wanted)), None)
        ) is not None:
            backing[hit : length - 1] = backing[hit + 1 : length]
            length -= 1
    if any(item.get(PATCH) == "replace" for item in patch):
        return backing
    live = [ident(m[key]) for m in backing[:length]]
    for item in patch:
        if PATCH in item or ident(item[key]) in live:
            continue
        if len(live) < len(backing):  # room left in the array: Go's append writes in place
            backing[len(live)] = item
        live.append(ident(item[key]))
    return backing


def _delete_primitives(target: dict[str, Any], field: str, values: list[Any], path: Path) -> None:
    current = target.get(field)
    if not isinstance(current, list):
        return  # nothing to delete from (Kubernetes ignores it as well)
    if any(isinstance(v, (dict, list)) for v in current):
        raise PatchError(
            path, f'"{field}" in the object being patched is not a list of plain values'
        )
    unwanted = {ident(v) for v in values}
    target[field] = [v for v in current if ident(v) not in unwanted]
