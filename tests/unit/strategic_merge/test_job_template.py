"""merge_job_template: Function template, then TaskTemplate patch, then Task patch (§3.7.1).

Regression tests for defect D4 (docs/behaviour.md §3.7.1): the reference controller's merge wiped
the containers of every patch that did not repeat them, and silently added a container for every
differently named patch container.
"""

from __future__ import annotations

import copy

import pytest

from taskfsm.strategic_merge import PatchError, merge_job_template

FUNCTION_TEMPLATE = {
    "metadata": {"labels": {"engine.nagare.media/function": "sleep"}},
    "spec": {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "function",
                        "image": "ghcr.io/nagare-media/engine/function-sleep:dev",
                        "args": ["--duration", "10s"],
                        "env": [{"name": "LOG_LEVEL", "value": "info"}],
                    }
                ],
            }
        },
    },
}


def _containers(template: dict) -> list[dict]:
    return template["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"labels": {"team": "media"}}},
        {"spec": {"activeDeadlineSeconds": 600}},
        {"spec": {"template": {"spec": {"nodeSelector": {"gpu": "true"}}}}},
        {"spec": {"template": {"metadata": {"annotations": {"example.com/a": "b"}}}}},
    ],
    ids=["labels", "activeDeadlineSeconds", "nodeSelector", "pod-annotations"],
)
def test_d4_patch_without_containers_keeps_containers(patch):
    result = merge_job_template(FUNCTION_TEMPLATE, patch)
    assert _containers(result) == _containers(FUNCTION_TEMPLATE)


def test_d4_patch_merges_into_named_container():
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "function",
                            "env": [{"name": "LOG_LEVEL", "value": "debug"}],
                            "args": ["--duration", "1s"],
                        }
                    ]
                }
            }
        }
    }
    (container,) = _containers(merge_job_template(FUNCTION_TEMPLATE, patch))
    assert container["image"] == "ghcr.io/nagare-media/engine/function-sleep:dev"
    assert container["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]
    assert container["args"] == ["--duration", "1s"]


def test_d4_differently_named_patch_container_is_a_second_container():
    """The seed sample Workflow patches a container named "sleep" into a Function whose container
    is "function": with a real strategic merge that is a second (image-less) container, which the
    API server will reject with a clear message (docs/behaviour.md §6, Reference inputs)."""
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "sleep", "args": ["5"]}]}}}}
    names = [c["name"] for c in _containers(merge_job_template(FUNCTION_TEMPLATE, patch))]
    assert sorted(names) == ["function", "sleep"]


def test_patches_apply_in_order_task_template_then_task():
    task_template_patch = {"metadata": {"labels": {"tier": "template", "a": "1"}}}
    task_patch = {"metadata": {"labels": {"tier": "task"}}}
    result = merge_job_template(FUNCTION_TEMPLATE, task_template_patch, task_patch)
    assert result["metadata"]["labels"] == {
        "engine.nagare.media/function": "sleep",
        "tier": "task",
        "a": "1",
    }


def test_none_patches_are_skipped():
    assert merge_job_template(FUNCTION_TEMPLATE, None, None) == FUNCTION_TEMPLATE
    assert merge_job_template(FUNCTION_TEMPLATE) == FUNCTION_TEMPLATE


def test_none_template_counts_as_empty():
    assert merge_job_template(None, {"spec": {"backoffLimit": 2}}) == {"spec": {"backoffLimit": 2}}


def test_result_shares_nothing_with_inputs():
    template = copy.deepcopy(FUNCTION_TEMPLATE)
    patch = {"spec": {"template": {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}}}
    result = merge_job_template(template, patch)
    # The controller appends its own volume and mounts to the result (§3.7 step 4).
    result["spec"]["template"]["spec"]["volumes"].append({"name": "x"})
    _containers(result)[0]["args"].append("--more")
    assert template == FUNCTION_TEMPLATE
    assert patch == {"spec": {"template": {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}}}


def test_patch_index_names_the_failing_patch():
    good = {"metadata": {"labels": {"a": "b"}}}
    bad = {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}
    with pytest.raises(PatchError) as err:
        merge_job_template(FUNCTION_TEMPLATE, good, None, bad)
    assert err.value.patch_index == 2  # 0-based; the None (absent TaskTemplate patch) counts
    assert str(err.value) == (
        'spec.template.spec.containers[0]: item has no "name", which items of this list are merged by'
    )
