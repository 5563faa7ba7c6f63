"""Kubernetes strategic merge patch for Job templates (docs/behaviour.md D4).

A Task's Job template is the Function's ``template`` patched by the TaskTemplate's and then the
Task's ``templatePatches`` (docs/behaviour.md §3.7 step 4, §3.7.1). Each patch is a Kubernetes
strategic merge patch with the merge keys and strategies of batch/v1 JobTemplateSpec, generated
from the Kubernetes OpenAPI document (``python -m taskfsm.strategic_merge.generate``). User-facing
rules: docs/template-patches.md.
"""

from taskfsm.strategic_merge.errors import PatchError
from taskfsm.strategic_merge.merge import (
    JOB_TEMPLATE_SPEC,
    apply_strategic_merge,
    merge_job_template,
)

__all__ = ["JOB_TEMPLATE_SPEC", "PatchError", "apply_strategic_merge", "merge_job_template"]
