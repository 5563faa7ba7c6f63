"""The strategic-merge case table shared by the unit tests and the golden tests.

Each case patches ``BASE`` (a valid core/v1 PodTemplateSpec, the shape of a Job's
``spec.template``) and states the result Kubernetes produces. The unit tests check
:func:`taskfsm.strategic_merge.apply_strategic_merge` against ``expected``; the golden tests
(tests/integration/test_strategic_merge_golden.py) check it against a real kube-apiserver
patching a real PodTemplate, so ``expected`` is Kubernetes' behaviour, not our opinion.
Error cases give the path and a fragment of taskfsm's message; the API server must reject them too.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

POD_TEMPLATE_SPEC = "io.k8s.api.core.v1.PodTemplateSpec"

BASE: dict[str, Any] = {
    "metadata": {"labels": {"app": "fn"}, "finalizers": ["example.com/a", "example.com/keep"]},
    "spec": {
        "restartPolicy": "Never",
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cm"}}],
        "initContainers": [{"name": "init", "image": "busybox:1", "args": ["setup"]}],
        "containers": [
            {
                "name": "function",
                "image": "fn:1",
                "args": ["--a", "--b"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            },
            {"name": "sidecar", "image": "side:1"},
        ],
    },
}


@dataclass(frozen=True)
class Case:
    id: str
    patch: dict[str, Any]
    expected: dict[str, Any] | None = None  # None for error cases
    error_path: str = ""  # error cases: the path PatchError names
    error_text: str = ""  # error cases: a fragment of the message
    original: dict[str, Any] = field(default_factory=lambda: BASE)


_DELETE = object()
FN = ("spec", "containers", 0)  # the "function" container in BASE
FUNCTION = BASE["spec"]["containers"][0]
SIDECAR = BASE["spec"]["containers"][1]


def expect(*updates: tuple[tuple[str | int, ...], Any]) -> dict[str, Any]:
    """BASE with ``(path, value)`` updates applied (value ``_DELETE`` removes the key)."""
    out = copy.deepcopy(BASE)
    for path, value in updates:
        parent = out
        for key in path[:-1]:
            parent = parent[key]
        if value is _DELETE:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(value)
    return out


def _fn(**changes: Any) -> dict[str, Any]:
    """The "function" container with top-level fields replaced."""
    return {**copy.deepcopy(FUNCTION), **changes}


CASES: list[Case] = [
    # docs/behaviour.md D4: a patch that does not mention containers leaves them alone.
    Case(
        "patch_without_containers",
        {"metadata": {"labels": {"tier": "gpu"}}, "spec": {"activeDeadlineSeconds": 60}},
        expect(
            (("metadata", "labels"), {"app": "fn", "tier": "gpu"}),
            (("spec", "activeDeadlineSeconds"), 60),
        ),
    ),
    # env merges by name. A patch naming only new items puts them *before* the existing ones.
    Case(
        "env_added_to_named_container",
        {"spec": {"containers": [{"name": "function", "env": [{"name": "C", "value": "3"}]}]}},
        expect(
            (
                (*FN, "env"),
                [
                    {"name": "C", "value": "3"},
                    {"name": "A", "value": "1"},
                    {"name": "B", "value": "2"},
                ],
            )
        ),
    ),
    # ...while a new item listed after an existing one follows it.
    Case(
        "env_changed_and_added",
        {
            "spec": {
                "containers": [
                    {
                        "name": "function",
                        "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                    }
                ]
            }
        },
        expect(
            (
                (*FN, "env"),
                [
                    {"name": "A", "value": "1"},
                    {"name": "B", "value": "20"},
                    {"name": "C", "value": "3"},
                ],
            )
        ),
    ),
    Case(
        "new_container_added",
        {"spec": {"containers": [{"name": "extra", "image": "extra:1"}]}},
        expect(
            (("spec", "containers"), [{"name": "extra", "image": "extra:1"}, FUNCTION, SIDECAR])
        ),
    ),
    Case(
        "container_deleted",
        {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}},
        expect((("spec", "containers"), [FUNCTION])),
    ),
    Case(
        "volumes_replaced",
        {
            "spec": {
                "volumes": [
                    {"$patch": "replace"},
                    {"name": "data", "emptyDir": {"medium": "Memory"}},
                ]
            }
        },
        expect((("spec", "volumes"), [{"name": "data", "emptyDir": {"medium": "Memory"}}])),
    ),
    Case(
        "null_deletes_keys",
        {"spec": {"nodeSelector": None, "containers": [{"name": "function", "args": None}]}},
        expect((("spec", "nodeSelector"), _DELETE), ((*FN, "args"), _DELETE)),
    ),
    Case(
        "volume_mounts_by_mount_path",
        {
            "spec": {
                "containers": [
                    {
                        "name": "function",
                        "volumeMounts": [
                            {"mountPath": "/data", "readOnly": True},
                            {"mountPath": "/cfg", "name": "cfg"},
                        ],
                    }
                ]
            }
        },
        expect(
            (
                (*FN, "volumeMounts"),
                [
                    {"name": "data", "mountPath": "/data", "readOnly": True},
                    {"mountPath": "/cfg", "name": "cfg"},
                ],
            )
        ),
    ),
    Case(
        "ports_by_container_port",
        {
            "spec": {
                "containers": [
                    {
                        "name": "function",
                        "ports": [
                            {"containerPort": 8080, "name": "web"},
                            {"containerPort": 9090, "name": "metrics"},
                        ],
                    }
                ]
            }
        },
        expect(
            (
                (*FN, "ports"),
                [
                    {"containerPort": 8080, "name": "web"},
                    {"containerPort": 9090, "name": "metrics"},
                ],
            )
        ),
    ),
    Case(
        "node_selector_merged",
        {"spec": {"nodeSelector": {"zone": "a"}}},
        expect((("spec", "nodeSelector"), {"disk": "ssd", "zone": "a"})),
    ),
    # args has no merge strategy: the patch's list replaces the template's.
    Case(
        "args_replaced",
        {"spec": {"containers": [{"name": "function", "args": ["--c"]}]}},
        expect(((*FN, "args"), ["--c"])),
    ),
    # finalizers is a primitive list with the merge strategy: a set union.
    Case(
        "finalizers_unioned",
        {"metadata": {"finalizers": ["example.com/b", "example.com/a"]}},
        expect(
            (("metadata", "finalizers"), ["example.com/b", "example.com/a", "example.com/keep"])
        ),
    ),
    Case(
        "tolerations_replaced",
        {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}},
        expect((("spec", "tolerations"), [{"key": "k2", "operator": "Exists"}])),
    ),
    Case(
        "init_containers_merged",
        {
            "spec": {
                "initContainers": [
                    {"name": "init", "image": "busybox:2"},
                    {"name": "init2", "image": "busybox:1"},
                ]
            }
        },
        expect(
            (
                ("spec", "initContainers"),
                [
                    {"name": "init", "image": "busybox:2", "args": ["setup"]},
                    {"name": "init2", "image": "busybox:1"},
                ],
            )
        ),
    ),
    Case(
        "delete_from_primitive_list",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}},
        expect((("metadata", "finalizers"), ["example.com/keep"])),
    ),
    # ...which works on replace-strategy lists too.
    Case(
        "delete_from_args",
        {"spec": {"containers": [{"name": "function", "$deleteFromPrimitiveList/args": ["--a"]}]}},
        expect(((*FN, "args"), ["--b"])),
    ),
    Case(
        "set_element_order_reorders",
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "function"}],
                "containers": [{"name": "function", "image": "fn:2"}],
            }
        },
        expect((("spec", "containers"), [SIDECAR, _fn(image="fn:2")])),
    ),
    Case(
        "set_element_order_places_new_item",
        {
            "spec": {
                "$setElementOrder/containers": [
                    {"name": "function"},
                    {"name": "extra"},
                    {"name": "sidecar"},
                ],
                "containers": [{"name": "extra", "image": "extra:1"}],
            }
        },
        expect(
            (("spec", "containers"), [FUNCTION, {"name": "extra", "image": "extra:1"}, SIDECAR])
        ),
    ),
    Case(
        "map_replaced",
        {"spec": {"nodeSelector": {"$patch": "replace", "zone": "b"}}},
        expect((("spec", "nodeSelector"), {"zone": "b"})),
    ),
    Case(
        "map_deleted",
        {"spec": {"nodeSelector": {"$patch": "delete"}}},
        expect((("spec", "nodeSelector"), {})),
    ),
    # Without $retainKeys the volume would end with both configMap and secret (invalid).
    Case(
        "retain_keys_switches_volume_source",
        {
            "spec": {
                "volumes": [
                    {
                        "name": "cfg",
                        "$retainKeys": ["name", "secret"],
                        "secret": {"secretName": "s"},
                    }
                ]
            }
        },
        expect((("spec", "volumes", 1), {"name": "cfg", "secret": {"secretName": "s"}})),
    ),
    # Kubernetes quirk, reproduced: "$patch: replace" on a map the template lacks drops the map.
    Case(
        "replace_on_absent_map_is_dropped",
        {"spec": {"dnsConfig": {"$patch": "replace", "nameservers": ["1.1.1.1"]}}},
        expect(),
    ),
    Case(
        "label_deleted_by_null",
        {"metadata": {"labels": {"app": None}}},
        expect((("metadata", "labels"), {})),
    ),
    # Malformed patches: taskfsm raises PatchError, the API server rejects them as well.
    Case(
        "error_item_without_merge_key",
        {"spec": {"containers": [{"image": "x:1"}]}},
        error_path="spec.containers[0]",
        error_text='has no "name"',
    ),
    Case(
        "error_patch_merge_in_list",
        {"spec": {"containers": [{"$patch": "merge"}]}},
        error_path='spec.containers[0]["$patch"]',
        error_text='"$patch: merge" is not supported',
    ),
    Case(
        "error_unknown_patch_directive",
        {"spec": {"nodeSelector": {"$patch": "bogus"}}},
        error_path='spec.nodeSelector["$patch"]',
        error_text='unknown $patch directive "bogus"',
    ),
    Case(
        "error_wrong_type",
        {"spec": {"containers": {"name": "function"}}},
        error_path="spec.containers",
        error_text="expected a list, got an object",
    ),
    Case(
        "error_retain_keys_violated",
        {
            "spec": {
                "volumes": [{"name": "cfg", "$retainKeys": ["name"], "secret": {"secretName": "s"}}]
            }
        },
        error_path='spec.volumes[0]["$retainKeys"]',
        error_text='the patch sets "secret"',
    ),
    Case(
        "error_set_element_order_mismatch",
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "function"}],
                "containers": [{"name": "sidecar", "image": "side:2"}],
            }
        },
        error_path='spec["$setElementOrder/containers"]',
        error_text="must appear in $setElementOrder/containers",
    ),
]

MERGE_CASES = [c for c in CASES if c.expected is not None]
ERROR_CASES = [c for c in CASES if c.expected is None]
