"""Retries of a reconcile the API refused back off with the short cap for failures of the API
(``--api-error-max-backoff``), not the long one for errors of the object.
"""

from __future__ import annotations

import time

from taskfsm.api import constants as c
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.probes import mpe_ready, world

DENY_STATUS_POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [c.GROUP],
                    "apiVersions": [c.VERSION],
                    "operations": ["UPDATE"],
                    "resources": ["tasks/status"],
                }
            ]
        },
        "validations": [
            {"expression": "false", "message": "status writes are denied for this test"}
        ],
    },
}


def test_api_refusals_back_off_with_a_short_cap(
    controller_factory, engine, probe, namespace, api_client
):
    """While an admission policy denies every Task status write, the Task's retries
    back off no longer than the API-error cap (set to 1 s here; default 30 s) instead of the
    ~16 min cap of errors about the object itself; once writes are allowed again, the Task
    goes on."""
    from kubernetes import client as k8s

    admission = k8s.AdmissionregistrationV1Api(api_client)
    name = f"deny-status-{namespace}"[:60]
    admission.create_validating_admission_policy({**DENY_STATUS_POLICY, "metadata": {"name": name}})
    admission.create_validating_admission_policy_binding(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        }
    )
    try:
        # The API server applies a new policy a moment later: wait until it refuses a write.
        engine.create(objects.task("canary", workflow_name="wf", function_name="f", mpe_name="m"))

        def refused() -> bool:
            try:
                probe.patch_task_status("canary", {"message": f"probe {time.monotonic()}"})
            except Exception:
                return True
            return False

        wait_for(refused, timeout=30, what="the admission policy in force")
        world(engine, objects.never_starting(objects.function("f")))
        ctl = controller_factory(start=False, api_error_max_backoff=1.0)
        delays: list[float] = []
        add = ctl.queue.add_rate_limited

        def recorded(
            key: str, max_delay: float | None = None, min_delay: float | None = None
        ) -> float:
            delay = add(key, max_delay=max_delay, min_delay=min_delay)
            if key.endswith("/t"):
                delays.append(delay)
            return delay

        ctl.queue.add_rate_limited = recorded  # type: ignore[method-assign]  # test instrumentation: replaces the method on this one object
        ctl.start()
        mpe_ready(engine)
        engine.create(objects.task("t", workflow_name="wf", function_name="f", mpe_name="m"))
        # 5 ms doubling passes 1 s at the 9th failure; wait well past it.
        wait_for(lambda: len(delays) >= 12, timeout=60, what="a dozen refused status writes")
    finally:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)
    assert max(delays) <= 1.0 * 1.1  # the cap, plus the queue's 10 % jitter
    probe.wait_phase("t", "Running", timeout=60)
