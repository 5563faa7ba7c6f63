"""Hypothesis strategies for Job templates and strategic merge patches (tests/unit/strategic_merge)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NAMES = st.sampled_from(["a", "b", "c", "d"])
TEXT = st.sampled_from(["x", "y", "z", "1"])


def _keyed(key: str, keys: st.SearchStrategy, item: st.SearchStrategy) -> st.SearchStrategy:
    """A list of objects with unique values under ``key``."""
    return st.lists(st.tuples(keys, item), max_size=3, unique_by=lambda t: t[0]).map(
        lambda pairs: [{key: k, **rest} for k, rest in pairs]
    )


ENV = _keyed("name", st.sampled_from(["E1", "E2", "E3"]), st.fixed_dictionaries({"value": TEXT}))
PORTS = _keyed(
    "containerPort",
    st.sampled_from([80, 443, 8080]),
    st.fixed_dictionaries({}, optional={"name": TEXT}),
)
MOUNTS = _keyed("mountPath", st.sampled_from(["/a", "/b"]), st.fixed_dictionaries({"name": NAMES}))
CONTAINER = st.fixed_dictionaries(
    {},
    optional={
        "image": TEXT,
        "args": st.lists(TEXT, max_size=3),
        "env": ENV,
        "ports": PORTS,
        "volumeMounts": MOUNTS,
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "limits": st.dictionaries(st.sampled_from(["cpu", "memory"]), TEXT, max_size=2)
            },
        ),
    },
)
LABELS = st.dictionaries(st.sampled_from(["l1", "l2", "l3"]), TEXT, max_size=3)
POD_SPEC = st.fixed_dictionaries(
    {"containers": _keyed("name", NAMES, CONTAINER)},
    optional={
        "initContainers": _keyed("name", NAMES, CONTAINER),
        "volumes": _keyed(
            "name", NAMES, st.sampled_from([{"emptyDir": {}}, {"configMap": {"name": "cm"}}])
        ),
        "nodeSelector": LABELS,
        "tolerations": st.lists(
            st.fixed_dictionaries({"key": TEXT, "operator": st.just("Exists")}), max_size=2
        ),
        "restartPolicy": st.sampled_from(["Never", "OnFailure"]),
        "activeDeadlineSeconds": st.integers(1, 100),
    },
)
METADATA = st.fixed_dictionaries(
    {},
    optional={
        "labels": LABELS,
        "annotations": LABELS,
        "finalizers": st.lists(TEXT, max_size=3, unique=True),
    },
)


@st.composite
def job_templates(draw) -> dict[str, Any]:
    """A batch/v1 JobTemplateSpec as plain JSON, valid for the merge (merge keys present, unique)."""
    template: dict[str, Any] = {"spec": {"template": {"spec": draw(POD_SPEC)}}}
    if draw(st.booleans()):
        template["metadata"] = draw(METADATA)
    if draw(st.booleans()):
        template["spec"]["template"]["metadata"] = draw(METADATA)
    if draw(st.booleans()):
        template["spec"]["backoffLimit"] = draw(st.integers(0, 6))
    return template


def _subset(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Patches built from the same vocabulary: any sub-dictionary of a drawn value."""
    return strategy.flatmap(
        lambda value: (
            st.sets(
                st.sampled_from(sorted(value)) if value else st.nothing(), max_size=len(value)
            ).map(lambda keys: {k: value[k] for k in keys})
            if isinstance(value, dict)
            else st.just(value)
        )
    )


@st.composite
def plain_patches(draw, *, lists: bool = True) -> dict[str, Any]:
    """Directive-free patches (no ``$`` keys, no nulls); without lists when ``lists`` is False."""
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(LABELS)
    if draw(st.booleans()):
        spec["activeDeadlineSeconds"] = draw(st.integers(1, 100))
    if lists and draw(st.booleans()):
        spec["containers"] = draw(_keyed("name", NAMES, CONTAINER))
    if lists and draw(st.booleans()):
        spec["tolerations"] = draw(st.lists(st.fixed_dictionaries({"key": TEXT}), max_size=2))
    patch: dict[str, Any] = {}
    if spec:
        patch["spec"] = {"template": {"spec": spec}}
    metadata = draw(
        METADATA
        if lists
        else st.fixed_dictionaries({}, optional={"labels": LABELS, "annotations": LABELS})
    )
    if metadata:
        patch["metadata"] = metadata
    return patch


FIELD_WORDS = st.sampled_from(
    [
        "metadata",
        "spec",
        "template",
        "containers",
        "initContainers",
        "volumes",
        "env",
        "ports",
        "volumeMounts",
        "args",
        "name",
        "image",
        "containerPort",
        "mountPath",
        "labels",
        "finalizers",
        "nodeSelector",
        "tolerations",
        "resources",
        "limits",
        "emptyDir",
        "backoffLimit",
        "x",
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$setElementOrder/finalizers",
        "$deleteFromPrimitiveList/finalizers",
        "$deleteFromPrimitiveList/args",
        "$bogus",
        "$setElementOrder/x",
        "$deleteFromPrimitiveList/x",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 9000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["replace", "delete", "merge", "a", "b", "name", "containers", "/a", ""]),
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(FIELD_WORDS, inner, max_size=4)
    ),
    max_leaves=25,
)
ANY_PATCH = st.dictionaries(FIELD_WORDS, ANY_JSON, max_size=4)
