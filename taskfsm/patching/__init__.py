"""Kubernetes strategic merge patch for Job templates (decisions.md D4).

A Task's Job template is the Function's ``template`` patched by the TaskTemplate's and then the
Task's ``templatePatches`` (task-controller.md §3.7 step 13). Each patch is a Kubernetes strategic
merge patch with the merge keys and strategies of batch/v1 JobTemplateSpec, generated from the
Kubernetes OpenAPI document (``python -m taskfsm.patching.generate``). User-facing rules:
docs/template-patches.md.
"""

from taskfsm.patching.errors import PatchError
from taskfsm.patching.merge import JOB_TEMPLATE_SPEC, apply_strategic_merge, merge_job_template

__all__ = ["JOB_TEMPLATE_SPEC", "PatchError", "apply_strategic_merge", "merge_job_template"]
