"""The shared strategic-merge case table, without a cluster (docs/behaviour.md D4).

tests/integration/test_strategic_merge_golden.py proves the same table against a real
kube-apiserver; here each case is checked at the PodTemplateSpec level and again wrapped in a
Job template, the way the Task controller applies it (docs/behaviour.md §3.7.1).
"""

from __future__ import annotations

import contextlib
import copy

import pytest
from smp_cases import CASES, ERROR_CASES, MERGE_CASES, POD_TEMPLATE_SPEC

from taskfsm.strategic_merge import PatchError, apply_strategic_merge, merge_job_template


def _as_job_template(pod_template: dict) -> dict:
    return {"spec": {"template": pod_template}}


@pytest.mark.parametrize("case", MERGE_CASES, ids=lambda c: c.id)
def test_case_on_pod_template(case):
    assert apply_strategic_merge(case.original, case.patch, POD_TEMPLATE_SPEC) == case.expected


@pytest.mark.parametrize("case", MERGE_CASES, ids=lambda c: c.id)
def test_case_on_job_template(case):
    """The same patch one level down, through the controller's entry point."""
    result = merge_job_template(_as_job_template(case.original), _as_job_template(case.patch))
    assert result == _as_job_template(case.expected)


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c.id)
def test_error_case_names_path_and_problem(case):
    with pytest.raises(PatchError) as err:
        apply_strategic_merge(case.original, case.patch, POD_TEMPLATE_SPEC)
    assert str(err.value).startswith(f"{case.error_path}: ")
    assert case.error_text in err.value.problem


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: c.id)
def test_error_case_path_is_relative_to_job_template(case):
    with pytest.raises(PatchError) as err:
        merge_job_template(_as_job_template(case.original), _as_job_template(case.patch))
    assert str(err.value).startswith(f"spec.template.{case.error_path}: ")
    assert err.value.patch_index == 0


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_inputs_are_never_mutated(case):
    original, patch = copy.deepcopy(case.original), copy.deepcopy(case.patch)
    with contextlib.suppress(PatchError):
        apply_strategic_merge(original, patch, POD_TEMPLATE_SPEC)
    assert original == case.original
    assert patch == case.patch
