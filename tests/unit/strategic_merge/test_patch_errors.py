"""PatchError messages: the JSON path and the problem in plain words, never the patch's values.

The Task controller copies these messages into ``status.message`` (docs/behaviour.md §3.7.1),
so each must let a user find and fix the offending spot of their ``templatePatches``.
"""

from __future__ import annotations

import pytest

from taskfsm.strategic_merge import PatchError, apply_strategic_merge
from taskfsm.strategic_merge.errors import format_path

POD = {
    "spec": {
        "template": {"spec": {"containers": [{"name": "main", "image": "img:1", "args": ["a"]}]}}
    }
}


def _error(patch, original=POD) -> PatchError:
    with pytest.raises(PatchError) as err:
        apply_strategic_merge(original, patch)
    return err.value


def _pod_spec(spec: dict) -> dict:
    return {"spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            _pod_spec({"containers": [{"name": "main", "env": [{"value": "x"}]}]}),
            'spec.template.spec.containers[0].env[0]: item has no "name", which items of this list are merged by',
        ),
        (
            _pod_spec({"containers": [{"name": "main", "volumeMounts": [{"name": "v"}]}]}),
            'spec.template.spec.containers[0].volumeMounts[0]: item has no "mountPath", which items of this '
            "list are merged by",
        ),
        (
            _pod_spec(
                {"containers": [{"name": "main", "ports": [{"containerPort": 80}, {"name": "p"}]}]}
            ),
            'spec.template.spec.containers[0].ports[1]: item has no "containerPort", which items of this list '
            "are merged by",
        ),
        (
            _pod_spec(
                {
                    "containers": [
                        {"name": "gone", "$patch": "delete", "image": "x"},
                        {"$patch": "delete"},
                    ]
                }
            ),
            'spec.template.spec.containers[1]: "$patch: delete" item has no "name", which items of this list '
            "are merged by",
        ),
        (
            _pod_spec({"containers": [{"name": ["main"]}]}),
            "spec.template.spec.containers[0].name: merge key must be a string or number, got a list",
        ),
        (
            _pod_spec({"containers": ["main"]}),
            'spec.template.spec.containers[0]: expected an object with "name", got a string',
        ),
        (
            _pod_spec({"containers": [{"name": "main", "image": 5}]}),
            "spec.template.spec.containers[0].image: expected a string, got a number",
        ),
        (
            _pod_spec({"activeDeadlineSeconds": "60"}),
            "spec.template.spec.activeDeadlineSeconds: expected an integer, got a string",
        ),
        (
            _pod_spec({"hostNetwork": "true"}),
            "spec.template.spec.hostNetwork: expected true or false, got a string",
        ),
        (
            _pod_spec({"nodeSelector": ["a"]}),
            "spec.template.spec.nodeSelector: expected an object, got a list",
        ),
        (
            _pod_spec({"tolerations": [{"key": "k", "$patch": "delete"}]}),
            "spec.template.spec.tolerations[0]: this "
            'list has no merge key, so a single item cannot be deleted with "$patch: delete"; write the whole list '
            "instead",
        ),
        (
            _pod_spec({"containers": [{"name": "main", "args": ["a", None]}]}),
            "spec.template.spec.containers[0].args[1]: a list item cannot be null",
        ),
        (
            _pod_spec({"containers": [{"name": "main", "args": [["a"]]}]}),
            "spec.template.spec.containers[0].args[0]: lists of lists are not supported",
        ),
        (
            {"metadata": {"$foo": 1}},
            'metadata["$foo"]: unknown directive; the strategic merge patch directives are '
            "$patch, $retainKeys, $setElementOrder/<list field> and $deleteFromPrimitiveList/<list field>",
        ),
        (
            {"metadata": {"labels": {"$patch": "merge"}}},
            'metadata.labels["$patch"]: "$patch: merge" is not '
            'supported in objects; use "replace" or "delete"',
        ),
        (
            {"$patch": 3},
            '["$patch"]: unknown $patch directive a number; expected "replace" or "delete"',
        ),
        (
            {"metadata": {"$retainKeys": "labels"}},
            'metadata["$retainKeys"]: must be a list of field names (strings)',
        ),
        (
            {"metadata": {"$setElementOrder/labels": []}},
            'metadata["$setElementOrder/labels"]: "labels" is not a '
            "list field, so its element order cannot be set",
        ),
        (
            {"metadata": {"$setElementOrder/finalizers": "a"}},
            'metadata["$setElementOrder/finalizers"]: must be a list, got a string',
        ),
        (
            {"metadata": {"$setElementOrder/finalizers": ["a"], "finalizers": None}},
            'metadata["$setElementOrder/'
            'finalizers"]: "finalizers" is set to null, so there is nothing to order',
        ),
        (
            _pod_spec({"$deleteFromPrimitiveList/containers": ["main"]}),
            'spec.template.spec["$deleteFromPrimitiveList/'
            'containers"]: "containers" is not a list of plain values, so this directive does not apply',
        ),
        (
            {"metadata": {"$deleteFromPrimitiveList/finalizers": [{"a": 1}]}},
            'metadata["$deleteFromPrimitiveList/'
            'finalizers"][0]: expected a plain value, got an object',
        ),
    ],
)
def test_malformed_patch_message(patch, message):
    assert str(_error(patch)) == message


def test_patch_must_be_an_object():
    assert str(_error(["not", "a", "map"])) == "<root>: a patch must be an object, not a list"


def test_original_must_be_an_object():
    with pytest.raises(PatchError, match="the object being patched must be an object"):
        apply_strategic_merge(None, {})


def test_template_list_items_without_merge_key_are_reported():
    """The Function's template is user input too: a merged list whose items lack the key."""
    original = _pod_spec({"containers": [{"image": "no-name"}]})
    err = _error(_pod_spec({"containers": [{"name": "main", "image": "x"}]}), original)
    assert str(err) == (
        'spec.template.spec.containers: item 0 of the list being patched has no "name", which this list is merged by'
    )


def test_set_element_order_with_nothing_to_order_is_rejected_like_kubernetes():
    original = {"metadata": {"labels": {"app": "x"}}}
    err = _error({"metadata": {"$setElementOrder/finalizers": [], "finalizers": []}}, original)
    assert err.path == ["metadata", "finalizers"]
    assert "has no items before or after the patch" in err.problem


def test_message_does_not_echo_values():
    err = _error(_pod_spec({"containers": [{"name": "main", "env": [{"value": "s3cr3t-token"}]}]}))
    assert "s3cr3t" not in str(err)


def test_unknown_type_name_is_a_programming_error():
    with pytest.raises(ValueError, match="no strategic-merge metadata"):
        apply_strategic_merge({}, {}, "io.k8s.api.apps.v1.DeploymentSpec")


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ([], "<root>"),
        (
            ["spec", "template", "spec", "containers", 0, "env", 2],
            "spec.template.spec.containers[0].env[2]",
        ),
        (["metadata", "annotations", "example.com/x"], 'metadata.annotations["example.com/x"]'),
        (["spec", "$setElementOrder/containers", 1], 'spec["$setElementOrder/containers"][1]'),
        (["metadata", "labels", "app_name-2"], "metadata.labels.app_name-2"),
    ],
)
def test_format_path(path, text):
    assert format_path(path) == text
