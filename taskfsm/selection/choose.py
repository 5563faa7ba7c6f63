"""Choosing a Task's MediaProcessingEntity, Function and TaskTemplate (docs/behaviour.md §3.6).

Pure logic over a :class:`Catalog` (the informer caches in production, dicts in unit tests).
Precedence, with the fixes of docs/behaviour.md §6:

* MediaProcessingEntity: ``spec.mediaProcessingEntityRef`` → ``spec.mediaProcessingEntitySelector``
  → the TaskTemplate's ref → its selector → the namespaced default → the cluster-wide default
  (D1: a default is returned; newest ``creationTimestamp`` wins, then the smallest name).
* Function: ``spec.functionRef`` → ``spec.functionSelector`` → the TaskTemplate's ref → selector.
* A selector matching several objects picks the newest MediaProcessingEntity or the Function with
  the highest SemVer ``version`` (D12, then the smallest name), namespaced kind before cluster kind.
* A ref without ``kind`` is defaulted (D13): the namespaced kind if such an object exists in the
  Task's namespace, else the cluster kind if one exists, else the namespaced kind.
* A referenced TaskTemplate that does not exist is an error, here as in JobPending (D11).
* The Task spec is never modified (D14); results are new ObjectReference dicts.
* A referenced object must exist (so the refs written to status always named a real object)
  and not be being deleted; selectors and defaults skip objects being deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import semver

from taskfsm.api import constants as c
from taskfsm.selection import label_selectors


class Catalog(Protocol):
    """Read access to nagare objects by kind (``Function``, ``ClusterFunction``, ...)."""

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist (cluster kinds ignore ``namespace``)."""

    def list(self, kind: str, namespace: str | None) -> list[dict[str, Any]]:
        """All objects of ``kind`` in ``namespace`` (cluster kinds ignore it)."""


class SelectionError(Exception):
    """Selection failed; the message is the ``status.message`` text (§3.14 wording)."""


@dataclass(frozen=True)
class KindPair:
    """A namespaced kind, its cluster-scoped twin, their plurals and how to name them in errors."""

    namespaced: str
    cluster: str
    namespaced_plural: str
    cluster_plural: str

    def allowed(self) -> tuple[str, str]:
        return (self.namespaced, self.cluster)

    def not_found(self, kind: str, name: str) -> str:
        plural = self.namespaced_plural if kind == self.namespaced else self.cluster_plural
        return f'{plural}.{c.GROUP} "{name}" not found'


MPE = KindPair(
    c.KIND_MEDIA_PROCESSING_ENTITY,
    c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
    c.PLURAL_MEDIA_PROCESSING_ENTITIES,
    c.PLURAL_CLUSTER_MEDIA_PROCESSING_ENTITIES,
)
FUNCTION = KindPair(
    c.KIND_FUNCTION, c.KIND_CLUSTER_FUNCTION, c.PLURAL_FUNCTIONS, c.PLURAL_CLUSTER_FUNCTIONS
)
TASK_TEMPLATE = KindPair(
    c.KIND_TASK_TEMPLATE,
    c.KIND_CLUSTER_TASK_TEMPLATE,
    c.PLURAL_TASK_TEMPLATES,
    c.PLURAL_CLUSTER_TASK_TEMPLATES,
)


def object_ref(obj: Mapping[str, Any], pair: KindPair) -> dict[str, str]:
    """The normalised ObjectReference of ``obj`` (apiVersion forced to the engine group, §1.2)."""
    meta = obj["metadata"]
    kind = obj.get("kind") or pair.namespaced
    ref = {"apiVersion": c.API_VERSION, "kind": kind, "name": meta["name"]}
    if kind == pair.namespaced:
        ref["namespace"] = meta["namespace"]
    return ref


def resolve_ref(
    ref: Mapping[str, Any], pair: KindPair, namespace: str, catalog: Catalog, *, field: str
) -> dict[str, Any]:
    """Resolve a LocalObjectReference to the object it names (kind defaulted per D13).

    Raises:
        SelectionError: the kind is not one of ``pair`` (§3.14 text), the name is empty, or the
            object does not exist (Kubernetes' NotFound wording).
    """
    name = ref.get("name") or ""
    if not name:
        raise SelectionError(f"{field}.name: required")
    kind = ref.get("kind") or ""
    if not kind:
        if catalog.get(pair.namespaced, namespace, name) is not None:
            kind = pair.namespaced
        elif catalog.get(pair.cluster, None, name) is not None:
            kind = pair.cluster
        else:
            kind = pair.namespaced
    if kind not in pair.allowed():
        raise SelectionError(
            f"{pair.namespaced} reference does not reference a {pair.namespaced} or {pair.cluster}"
        )
    obj = catalog.get(kind, namespace if kind == pair.namespaced else None, name)
    if obj is None:
        raise SelectionError(pair.not_found(kind, name))
    if _terminating(obj):
        raise SelectionError(f"{kind} {name!r} is being deleted")
    return {**obj, "kind": kind}


def _terminating(obj: Mapping[str, Any]) -> bool:
    """Being deleted: never chosen for a new Task (an MPE waits for its Tasks before it goes)."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def select_by_selector(
    selector: Mapping[str, Any], pair: KindPair, namespace: str, catalog: Catalog, *, field: str
) -> dict[str, Any] | None:
    """The best object matching ``selector``: namespaced kind first, then the cluster kind.

    Returns None when nothing matches. Raises :class:`SelectionError` for a malformed selector.
    """
    try:
        label_selectors.validate(selector, field=field)
    except label_selectors.SelectorError as exc:
        raise SelectionError(str(exc)) from None
    for kind, ns in ((pair.namespaced, namespace), (pair.cluster, None)):
        found = [
            {**o, "kind": kind}
            for o in catalog.list(kind, ns)
            if not _terminating(o)
            and label_selectors.matches(selector, (o.get("metadata") or {}).get("labels"))
        ]
        if found:
            return _best(found, pair)
    return None


def _best(candidates: list[dict[str, Any]], pair: KindPair) -> dict[str, Any]:
    """D12 tie-break: highest Function SemVer / newest MPE, then the smallest name."""
    if pair is FUNCTION:
        ordered = sorted(candidates, key=lambda o: o["metadata"]["name"])
        return max(ordered, key=lambda o: _semver_key((o.get("spec") or {}).get("version")))
    return _newest(candidates)


def _newest(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(candidates, key=lambda o: o["metadata"]["name"])
    # RFC 3339 UTC timestamps with second precision sort as strings.
    return max(ordered, key=lambda o: o["metadata"].get("creationTimestamp") or "")


def _semver_key(version: str | None) -> tuple[int, Any]:
    try:
        return (1, semver.Version.parse(version or ""))
    except (ValueError, TypeError):
        return (0, version or "")  # unparsable versions lose against every valid one


@dataclass(frozen=True)
class Selection:
    """The outcome of one Initializing pass: normalised ObjectReferences for status, and why."""

    media_processing_entity_ref: dict[str, str]
    function_ref: dict[str, str]
    mpe_source: str
    function_source: str


def task_template(
    spec: Mapping[str, Any], namespace: str, catalog: Catalog
) -> dict[str, Any] | None:
    """The Task's TaskTemplate or ClusterTaskTemplate, None when it names none (D11: must exist)."""
    ref = spec.get("taskTemplateRef")
    if not ref:
        return None
    try:
        return resolve_ref(ref, TASK_TEMPLATE, namespace, catalog, field="spec.taskTemplateRef")
    except SelectionError as exc:
        if "does not reference" in str(exc):
            raise SelectionError(
                "TaskTemplate reference does not reference a TaskTemplate or ClusterTaskTemplate"
            ) from None
        raise


def select(task: Mapping[str, Any], catalog: Catalog) -> Selection:
    """Choose the MediaProcessingEntity and Function for ``task`` (§3.6, with D1 and D11-D14 fixed).

    Raises:
        SelectionError: a reference is wrong or missing, a selector is malformed, or nothing
            could be chosen (``failed to reconcile MediaProcessingEntity`` / ``... Function``,
            followed by what was tried).
    """
    mpe_ref, mpe_source = select_media_processing_entity(task, catalog)
    function_ref, function_source = select_function(task, catalog)
    return Selection(mpe_ref, function_ref, mpe_source, function_source)


def _template_spec(task: Mapping[str, Any], catalog: Catalog) -> tuple[str, Mapping[str, Any], Any]:
    namespace = task["metadata"]["namespace"]
    spec = task.get("spec") or {}
    template = task_template(spec, namespace, catalog)
    return namespace, spec, (template or {}).get("spec") or {}


def select_media_processing_entity(
    task: Mapping[str, Any], catalog: Catalog
) -> tuple[dict[str, str], str]:
    """The MediaProcessingEntity for ``task`` (§3.6, D1) and the rule that chose it.

    Raises:
        SelectionError: as :func:`select`.
    """
    namespace, spec, template_spec = _template_spec(task, catalog)
    mpe, mpe_source = _choose(
        MPE,
        namespace,
        catalog,
        [
            ("spec.mediaProcessingEntityRef", spec.get("mediaProcessingEntityRef"), "ref"),
            (
                "spec.mediaProcessingEntitySelector",
                spec.get("mediaProcessingEntitySelector"),
                "selector",
            ),
            (
                "taskTemplate.spec.mediaProcessingEntityRef",
                template_spec.get("mediaProcessingEntityRef"),
                "ref",
            ),
            (
                "taskTemplate.spec.mediaProcessingEntitySelector",
                template_spec.get("mediaProcessingEntitySelector"),
                "selector",
            ),
        ],
    )
    if mpe is None:
        mpe, mpe_source = _default_mpe(namespace, catalog)
    if mpe is None:
        raise SelectionError(
            "failed to reconcile MediaProcessingEntity: "
            "no mediaProcessingEntityRef or selector match "
            "on the Task or its TaskTemplate, and no MediaProcessingEntity annotated "
            f'{c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY}: "true"'
        )
    return object_ref(mpe, MPE), mpe_source


def select_function(task: Mapping[str, Any], catalog: Catalog) -> tuple[dict[str, str], str]:
    """The Function for ``task`` (§3.6, D12) and the rule that chose it.

    Raises:
        SelectionError: as :func:`select`.
    """
    namespace, spec, template_spec = _template_spec(task, catalog)
    function, function_source = _choose(
        FUNCTION,
        namespace,
        catalog,
        [
            ("spec.functionRef", spec.get("functionRef"), "ref"),
            ("spec.functionSelector", spec.get("functionSelector"), "selector"),
            ("taskTemplate.spec.functionRef", template_spec.get("functionRef"), "ref"),
            (
                "taskTemplate.spec.functionSelector",
                template_spec.get("functionSelector"),
                "selector",
            ),
        ],
    )
    if function is None:
        raise SelectionError(
            "failed to reconcile Function: no functionRef or functionSelector match on the Task "
            "or its TaskTemplate"
        )
    return object_ref(function, FUNCTION), function_source


def _choose(
    pair: KindPair, namespace: str, catalog: Catalog, rules: list[tuple[str, Any, str]]
) -> tuple[dict[str, Any] | None, str]:
    for field, value, how in rules:
        if not value:
            continue
        if how == "ref":
            return resolve_ref(value, pair, namespace, catalog, field=field), field
        found = select_by_selector(value, pair, namespace, catalog, field=field)
        if found is not None:
            return found, field
    return None, ""


def _default_mpe(namespace: str, catalog: Catalog) -> tuple[dict[str, Any] | None, str]:
    for kind, ns, source in (
        (MPE.namespaced, namespace, "default MediaProcessingEntity"),
        (MPE.cluster, None, "default ClusterMediaProcessingEntity"),
    ):
        defaults = [
            {**o, "kind": kind}
            for o in catalog.list(kind, ns)
            if not _terminating(o)
            and ((o.get("metadata") or {}).get("annotations") or {}).get(
                c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY
            )
            == c.ANNOTATION_VALUE_TRUE
        ]
        if defaults:
            return _newest(defaults), source
    return None, ""


def job_function(task: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
    """The Function (or ClusterFunction) ``status.functionRef`` names, for making the Job.

    Raises:
        SelectionError: it does not exist, or the reference names no Function kind.
    """
    namespace = task["metadata"]["namespace"]
    ref = (task.get("status") or {}).get("functionRef") or {}
    kind = ref.get("kind") or c.KIND_FUNCTION
    function = catalog.get(kind, ref.get("namespace") or namespace, ref.get("name") or "")
    if function is None:
        raise SelectionError(FUNCTION.not_found(kind, ref.get("name", "")))
    if ref.get("kind") not in FUNCTION.allowed():
        raise SelectionError("functionRef does not reference a Function or ClusterFunction")
    return function


def job_refusal(task: Mapping[str, Any], catalog: Catalog, *, remote: bool) -> str:
    """Why no Job may be made for ``task`` from what its status chose ("" when one may): its
    Function is missing or not a Function, or it runs on local MPEs only
    (``localMediaProcessingEntitiesOnly``) and the chosen MPE is ``remote`` (§3.7 step 1)."""
    try:
        function = job_function(task, catalog)
    except SelectionError as exc:
        return str(exc)
    if (function.get("spec") or {}).get("localMediaProcessingEntitiesOnly") and remote:
        return (
            "localMediaProcessingEntitiesOnly is true, but selected MediaProcessingEntity is remote"
        )
    return ""
