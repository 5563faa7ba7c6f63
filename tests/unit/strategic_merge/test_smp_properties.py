"""Properties of the strategic merge that must hold for every template and patch (docs/behaviour.md D4)."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smp_strategies import ANY_JSON, ANY_PATCH, job_templates, plain_patches

from taskfsm.strategic_merge import PatchError, apply_strategic_merge, merge_job_template
from tests.support.examples import examples

FAST = settings(
    max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@FAST
@given(job_templates())
def test_empty_patch_is_identity(template):
    assert apply_strategic_merge(template, {}) == template


@FAST
@given(st.dictionaries(st.text(max_size=5), ANY_JSON, max_size=5))
def test_empty_patch_is_identity_even_for_odd_originals(original):
    assert apply_strategic_merge(original, {}) == original


@FAST
@given(job_templates(), plain_patches(lists=False))
def test_map_patch_applied_twice_equals_once(template, patch):
    once = apply_strategic_merge(template, patch)
    assert apply_strategic_merge(once, patch) == once


@FAST
@given(job_templates(), plain_patches(lists=True))
def test_directive_free_patch_with_lists_is_idempotent(template, patch):
    """Merge-keyed lists merge item by item and keep Kubernetes' order on a second application."""
    once = apply_strategic_merge(template, patch)
    assert apply_strategic_merge(once, patch) == once


@FAST
@given(job_templates(), plain_patches(lists=False))
def test_patch_without_containers_keeps_containers(template, patch):
    """D4: only a patch that lists containers can change them."""
    result = merge_job_template(template, patch)
    assert (
        result["spec"]["template"]["spec"]["containers"]
        == template["spec"]["template"]["spec"]["containers"]
    )


@FAST
@given(job_templates(), plain_patches())
def test_scalars_and_labels_in_the_patch_win(template, patch):
    result = apply_strategic_merge(template, patch)
    for key, value in patch.get("metadata", {}).get("labels", {}).items():
        assert result["metadata"]["labels"][key] == value
    pod_spec = patch.get("spec", {}).get("template", {}).get("spec", {})
    if "activeDeadlineSeconds" in pod_spec:
        assert (
            result["spec"]["template"]["spec"]["activeDeadlineSeconds"]
            == pod_spec["activeDeadlineSeconds"]
        )


@FAST
@given(
    job_templates(),
    st.sampled_from(["containers", "nodeSelector", "volumes", "restartPolicy", "tolerations"]),
)
def test_null_deletes_the_key(template, key):
    result = apply_strategic_merge(template, {"spec": {"template": {"spec": {key: None}}}})
    assert key not in result["spec"]["template"]["spec"]


@FAST
@given(job_templates(), plain_patches())
def test_patched_containers_are_all_present_once(template, patch):
    result = apply_strategic_merge(template, patch)
    before = [c["name"] for c in template["spec"]["template"]["spec"]["containers"]]
    added = [
        c["name"]
        for c in patch.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    ]
    names = [c["name"] for c in result["spec"]["template"]["spec"]["containers"]]
    assert sorted(names) == sorted(set(before) | set(added))


@settings(max_examples=examples(240), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job_templates(), ANY_PATCH)
def test_arbitrary_patches_merge_or_raise_patch_error_and_never_mutate(template, patch):
    """Whatever a user writes, the controller gets a dict or a PatchError, nothing else."""
    template_before, patch_before = copy.deepcopy(template), copy.deepcopy(patch)
    result: object
    try:
        result = apply_strategic_merge(template, patch)
    except PatchError as exc:
        result = exc  # a clear error is an answer too: it must say what is wrong
    if isinstance(result, PatchError):
        assert str(result).split(": ", 1)[1]
    else:
        assert isinstance(result, dict)
    assert template == template_before
    assert patch == patch_before


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["metadata", "spec", "x"]), ANY_JSON, max_size=3), ANY_PATCH)
def test_odd_templates_merge_or_raise_patch_error(original, patch):
    try:
        result = apply_strategic_merge(original, patch)
    except PatchError:
        return
    assert isinstance(result, dict)
