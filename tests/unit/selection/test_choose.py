"""Selection precedence over an in-memory catalog (docs/behaviour.md §3.6, D1, D11-D14).

Fast, pure counterparts of tests/integration/test_selection.py, plus the cases a real API
server makes hard to set up: identical creationTimestamps (D12 name tie-break), unparsable
versions, objects being deleted.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from taskfsm import selection
from taskfsm.api import constants as c
from taskfsm.selection.choose import SelectionError
from tests.support.catalog import DictCatalog

NS = "ns"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:00:01Z"


def obj(
    kind: str, name: str, *, labels=None, annotations=None, created=T0, namespaced=True, **spec
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "creationTimestamp": created}
    if namespaced:
        meta["namespace"] = NS
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def mpe(name: str, **kw) -> dict[str, Any]:
    return obj(c.KIND_MEDIA_PROCESSING_ENTITY, name, local={}, **kw)


def cmpe(name: str, **kw) -> dict[str, Any]:
    return obj(
        c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
        name,
        namespaced=False,
        local={"namespace": NS},
        **kw,
    )


def fn(name: str, version: str = "1.0.0", **kw) -> dict[str, Any]:
    return obj(c.KIND_FUNCTION, name, version=version, **kw)


def cfn(name: str, version: str = "1.0.0", **kw) -> dict[str, Any]:
    return obj(c.KIND_CLUSTER_FUNCTION, name, namespaced=False, version=version, **kw)


def default(**kw) -> dict[str, Any]:
    return {"annotations": {c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY: "true"}, **kw}


def task(**spec) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_TASK,
        "metadata": {"name": "t", "namespace": NS},
        "spec": spec,
    }


def ref(kind: str | None, name: str) -> dict[str, str]:
    return {"name": name} if kind is None else {"kind": kind, "name": name}


GOLD = {"matchLabels": {"tier": "gold"}}


def chosen(catalog: DictCatalog, **spec) -> tuple[str, str, str, str]:
    result = selection.select(task(**spec), catalog)
    m, f = result.media_processing_entity_ref, result.function_ref
    return (m["kind"], m["name"], f["kind"], f["name"])


def test_mpe_precedence_ref_selector_template_default():
    """Each MPE rule wins over every later one: ref, selector, TaskTemplate ref, its selector,
    namespaced default, cluster default."""
    catalog = DictCatalog(
        fn("f"),
        mpe("by-ref"),
        mpe("by-selector", labels={"tier": "gold"}),
        mpe("tt-ref"),
        mpe("tt-selector", labels={"tier": "silver"}),
        mpe("ns-default", **default()),
        cmpe("cl-default", **default()),
        obj(
            c.KIND_TASK_TEMPLATE,
            "tt",
            mediaProcessingEntityRef=ref(c.KIND_MEDIA_PROCESSING_ENTITY, "tt-ref"),
            mediaProcessingEntitySelector={"matchLabels": {"tier": "silver"}},
        ),
        obj(
            c.KIND_TASK_TEMPLATE,
            "tt-sel",
            mediaProcessingEntitySelector={"matchLabels": {"tier": "silver"}},
        ),
    )
    base = {"functionRef": ref(c.KIND_FUNCTION, "f")}
    tt = {"taskTemplateRef": ref(c.KIND_TASK_TEMPLATE, "tt")}
    full = {
        **base,
        **tt,
        "mediaProcessingEntityRef": ref(c.KIND_MEDIA_PROCESSING_ENTITY, "by-ref"),
        "mediaProcessingEntitySelector": GOLD,
    }
    assert chosen(catalog, **full)[:2] == (c.KIND_MEDIA_PROCESSING_ENTITY, "by-ref")
    del full["mediaProcessingEntityRef"]
    assert chosen(catalog, **full)[:2] == (c.KIND_MEDIA_PROCESSING_ENTITY, "by-selector")
    full["mediaProcessingEntitySelector"] = {"matchLabels": {"tier": "none"}}
    assert chosen(catalog, **full)[:2] == (c.KIND_MEDIA_PROCESSING_ENTITY, "tt-ref")
    assert (
        chosen(catalog, **base, taskTemplateRef=ref(c.KIND_TASK_TEMPLATE, "tt-sel"))[1]
        == "tt-selector"
    )
    assert chosen(catalog, **base)[1] == "ns-default"


def test_d1_cluster_default_when_namespace_has_none():
    """D1: the cluster-wide default is returned when the namespace has no default."""
    catalog = DictCatalog(fn("f"), mpe("plain"), cmpe("cl-default", **default()))
    assert chosen(catalog, functionRef=ref(c.KIND_FUNCTION, "f"))[:2] == (
        c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
        "cl-default",
    )


def test_d1_default_annotation_must_be_exactly_true():
    """Only the exact string "true" marks a default."""
    catalog = DictCatalog(
        fn("f"),
        mpe("yes-ish", annotations={c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY: "True"}),
    )
    with pytest.raises(SelectionError, match="failed to reconcile MediaProcessingEntity"):
        selection.select(task(functionRef=ref(c.KIND_FUNCTION, "f")), catalog)


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        ([mpe("a", created=T0, **default()), mpe("b", created=T1, **default())], "b"),
        ([mpe("z", created=T1, **default()), mpe("b", created=T1, **default())], "b"),
        ([mpe("a", created=T1, **default()), mpe("b", created=T0, **default())], "a"),
    ],
    ids=["newest", "same-second-smallest-name", "newest-regardless-of-name"],
)
def test_d12_default_tie_break(objects, expected):
    """D12: newest creationTimestamp, then the smallest name."""
    catalog = DictCatalog(fn("f"), *objects)
    assert chosen(catalog, functionRef=ref(c.KIND_FUNCTION, "f"))[1] == expected


def test_d12_function_selector_highest_semver_then_name():
    """D12: highest SemVer (pre-releases below their release, unparsable versions below all),
    the smallest name among equal versions."""
    catalog = DictCatalog(
        mpe("m"),
        fn("a", "1.9.0", labels={"tier": "gold"}),
        fn("b", "1.10.0-rc.1", labels={"tier": "gold"}),
        fn("c", "1.10.0", labels={"tier": "gold"}),
        fn("d", "1.10.0", labels={"tier": "gold"}),
        fn("e", "banana", labels={"tier": "gold"}),
    )
    assert chosen(catalog, mediaProcessingEntityRef=ref(None, "m"), functionSelector=GOLD)[2:] == (
        c.KIND_FUNCTION,
        "c",
    )


def test_selector_prefers_namespaced_kind():
    """A namespaced match wins over any cluster match; the cluster kind only when none."""
    catalog = DictCatalog(
        mpe("m"),
        fn("low", "0.1.0", labels={"tier": "gold"}),
        cfn("high", "9.0.0", labels={"tier": "gold"}),
    )
    assert (
        chosen(catalog, mediaProcessingEntityRef=ref(None, "m"), functionSelector=GOLD)[3] == "low"
    )
    catalog = DictCatalog(mpe("m"), cfn("high", "9.0.0", labels={"tier": "gold"}))
    assert chosen(catalog, mediaProcessingEntityRef=ref(None, "m"), functionSelector=GOLD)[2:] == (
        c.KIND_CLUSTER_FUNCTION,
        "high",
    )


def test_d13_kind_defaulting():
    """D13: a ref without kind is the namespaced kind if that object exists, else the cluster
    kind if it exists."""
    catalog = DictCatalog(mpe("both"), cmpe("both"), cmpe("cl-only"), fn("f"), cfn("f"), cfn("cf"))
    assert chosen(
        catalog, mediaProcessingEntityRef=ref(None, "both"), functionRef=ref(None, "f")
    ) == (
        c.KIND_MEDIA_PROCESSING_ENTITY,
        "both",
        c.KIND_FUNCTION,
        "f",
    )
    assert chosen(
        catalog, mediaProcessingEntityRef=ref(None, "cl-only"), functionRef=ref(None, "cf")
    ) == (
        c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
        "cl-only",
        c.KIND_CLUSTER_FUNCTION,
        "cf",
    )


def test_d13_missing_object_without_kind_reports_namespaced_kind():
    """A kind-less ref to nothing is reported as the namespaced kind not found."""
    with pytest.raises(SelectionError, match=r'functions\.engine\.nagare\.media "nope" not found'):
        selection.select(
            task(mediaProcessingEntityRef=ref(None, "m"), functionRef=ref(None, "nope")),
            DictCatalog(mpe("m")),
        )


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (
            "mediaProcessingEntityRef",
            "MediaProcessingEntity reference does not reference a MediaProcessingEntity or "
            "ClusterMediaProcessingEntity",
        ),
        ("functionRef", "Function reference does not reference a Function or ClusterFunction"),
        (
            "taskTemplateRef",
            "TaskTemplate reference does not reference a TaskTemplate or ClusterTaskTemplate",
        ),
    ],
)
def test_wrong_kind_messages(field, message):
    """A ref of another kind gives the §3.14 message for that reference."""
    spec = {
        "mediaProcessingEntityRef": ref(None, "m"),
        "functionRef": ref(None, "f"),
        field: ref("ConfigMap", "x"),
    }
    with pytest.raises(SelectionError) as err:
        selection.select(task(**spec), DictCatalog(mpe("m"), fn("f")))
    assert str(err.value) == message


def test_d11_missing_task_template_is_an_error():
    """D11: a TaskTemplate that does not exist stops selection with the NotFound text, even when
    the Task itself names everything."""
    spec = {
        "mediaProcessingEntityRef": ref(None, "m"),
        "functionRef": ref(None, "f"),
        "taskTemplateRef": ref(c.KIND_TASK_TEMPLATE, "tt"),
    }
    with pytest.raises(
        SelectionError, match=r'tasktemplates\.engine\.nagare\.media "tt" not found'
    ):
        selection.select(task(**spec), DictCatalog(mpe("m"), fn("f")))


def test_d14_task_is_not_mutated():
    """D14: selection works on copies: the Task dict is unchanged, refs included."""
    catalog = DictCatalog(
        mpe("m"),
        fn("f"),
        obj(c.KIND_CLUSTER_TASK_TEMPLATE, "tt", namespaced=False, functionRef={"name": "f"}),
    )
    t = task(mediaProcessingEntityRef={"name": "m"}, taskTemplateRef={"name": "tt"})
    before = copy.deepcopy(t)
    selection.select(t, catalog)
    assert t == before


def test_objects_being_deleted_are_never_chosen():
    """An MPE being deleted is skipped by defaults and selectors and refused by a ref."""
    dying = {"deletionTimestamp": T1}
    going = mpe("going", labels={"tier": "gold"}, **default())
    going["metadata"].update(dying)
    catalog = DictCatalog(
        fn("f"), going, mpe("staying", labels={"tier": "gold"}, created=T0, **default())
    )
    f = ref(c.KIND_FUNCTION, "f")
    assert chosen(catalog, functionRef=f)[1] == "staying"
    assert chosen(catalog, functionRef=f, mediaProcessingEntitySelector=GOLD)[1] == "staying"
    with pytest.raises(SelectionError, match="'going' is being deleted"):
        selection.select(task(functionRef=f, mediaProcessingEntityRef=ref(None, "going")), catalog)


def test_nothing_to_choose_messages():
    """No MPE and no Function give the 'failed to reconcile' messages naming what was tried."""
    with pytest.raises(
        SelectionError, match=r"^failed to reconcile MediaProcessingEntity: .*is-default"
    ):
        selection.select(task(functionRef=ref(None, "f")), DictCatalog(fn("f")))
    with pytest.raises(SelectionError, match=r"^failed to reconcile Function: "):
        selection.select(task(functionSelector=GOLD), DictCatalog(mpe("m", **default())))


def test_result_refs_are_normalised_object_references():
    """Refs in the result carry the engine apiVersion, the kind, the name and (namespaced kinds
    only) the namespace, whatever apiVersion the user wrote."""
    catalog = DictCatalog(cmpe("cl"), fn("f"))
    result = selection.select(
        task(
            mediaProcessingEntityRef={
                "apiVersion": "wrong/v9",
                "kind": c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
                "name": "cl",
            },
            functionRef={"apiVersion": "wrong/v9", "name": "f"},
        ),
        catalog,
    )
    assert result.media_processing_entity_ref == {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY,
        "name": "cl",
    }
    assert result.function_ref == {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_FUNCTION,
        "name": "f",
        "namespace": NS,
    }


def test_function_selection_does_not_depend_on_the_mpe():
    """Each selection stands alone: with the MPE already chosen (sticky) and since gone, the
    Function is still chosen."""
    catalog = DictCatalog(fn("f"))
    ref_, source = selection.select_function(task(functionRef=ref(None, "f")), catalog)
    assert ref_["name"] == "f"
    assert source == "spec.functionRef"
    with pytest.raises(SelectionError, match="failed to reconcile MediaProcessingEntity"):
        selection.select_media_processing_entity(task(functionRef=ref(None, "f")), catalog)
