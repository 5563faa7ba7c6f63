"""The generated RBAC is sufficient and minimal.

The controller runs with a ServiceAccount token bound to exactly the rules of ``taskfsm.tools.rbac``
(leader election on, so the Lease rules are exercised) and takes a Task to Succeeded and through
deletion; then, for each rule in turn, a controller bound to all rules but that one hits a 403.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client

from taskfsm.kube.client import configured
from taskfsm.kube.rest import Rest
from taskfsm.manager.manager import Manager, Settings
from taskfsm.tools import rbac
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for


def token_client(api_client, control_plane, namespace, rules, lease_rules) -> client.ApiClient:
    """An ApiClient authenticated as a fresh ServiceAccount bound to exactly ``rules``."""
    core = client.CoreV1Api(api_client)
    rbac_api = client.RbacAuthorizationV1Api(api_client)
    name = f"taskfsm-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    rbac_api.create_cluster_role(
        {"metadata": {"name": name}, "rules": [r.policy_rule() for r in rules]}
    )
    rbac_api.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": subject,
        }
    )
    rbac_api.create_namespaced_role(
        namespace, {"metadata": {"name": name}, "rules": [r.policy_rule() for r in lease_rules]}
    )
    rbac_api.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
    )
    token = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    configuration = client.Configuration()
    configuration.host = control_plane.server
    configuration.ssl_ca_cert = str(control_plane.ca_file)
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return configured(configuration)


class Forbidden:
    """Records the requests answered 403 (the Rest observer)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.event = threading.Event()

    def __call__(self, method: str, resource: str, code: int) -> None:
        if code == 403:
            self.seen.append((method, resource))
            self.event.set()


def start_controller(
    api: client.ApiClient, namespace: str, forbidden: Forbidden, **more: Any
) -> Manager:
    settings = Settings(
        namespace=namespace,
        metrics_address=None,
        health_address=None,
        leader_election=True,
        lease_namespace=namespace,
        lease_name="rbac-test",
        watch_timeout=10,
        read_margin=5,
        shutdown_timeout=5,
        cache_sync_timeout=15,
        **more,
    )
    return Manager(api, settings, rest_factory=lambda a: Rest(a, observer=forbidden))


def describe(api_client, namespace: str, engine, forbidden: Forbidden) -> str:
    """What a failed wait shows: the Task's status, its Job, the namespace's Events, the 403s."""
    jobs = client.BatchV1Api(api_client).list_namespaced_job(namespace).items
    events = client.CoreV1Api(api_client).list_namespaced_event(namespace).items
    return (
        f"Task Succeeded; status {engine.task('ok').get('status')}; "
        f"jobs {[(j.metadata.name, j.status) for j in jobs]}; "
        f"events {[(e.involved_object.name, e.reason, e.message) for e in events]}; "
        f"403s {forbidden.seen}"
    )


def scenario(engine, name: str) -> None:
    engine.create(objects.task(name, workflow_name="wf", function_name="fn", mpe_name="local"))


REFUSE = "taskfsm-test/refuse"


def refuse_labelled_pods(api_client, namespace: str):
    """A ValidatingAdmissionPolicy refusing pods labelled :data:`REFUSE` in ``namespace``;
    returns its removal."""
    name = f"refuse-{namespace}"[:63]
    api = client.AdmissionregistrationV1Api(api_client)
    api.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                },
                "matchConditions": [
                    {
                        "name": "labelled",
                        "expression": f"has(object.metadata.labels) && '{REFUSE}' in object.metadata.labels",
                    }
                ],
                "validations": [{"expression": "false", "message": "refused by the RBAC test"}],
            },
        }
    )
    api.create_validating_admission_policy_binding(
        {"metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    )
    # The API server loads a new policy from its own watch: until then labelled pods are let
    # through. A labelled pod created with dry run shows when the policy is in force.
    core = client.CoreV1Api(api_client)
    probe = {
        "metadata": {"name": "refuse-probe", "labels": {REFUSE: "yes"}},
        "spec": {"containers": [{"name": "c", "image": "example.invalid/none"}]},
    }

    def in_force() -> bool:
        try:
            core.create_namespaced_pod(namespace, probe, dry_run="All")
        except client.ApiException as exc:
            return "refused by the RBAC test" in (exc.body or "")
        return False

    wait_for(in_force, timeout=30, what="the pod-refusing admission policy in force")

    def remove() -> None:
        with contextlib.suppress(client.ApiException):
            api.delete_validating_admission_policy_binding(name)
        with contextlib.suppress(client.ApiException):
            api.delete_validating_admission_policy(name)

    return remove


@pytest.fixture
def basics(engine, api_client, control_plane, namespace):
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("fn"))
    engine.create(objects.local_mpe("local"))
    # A remote MPE (reaching this cluster with admin credentials) makes the controller read and
    # watch its kubeconfig Secret.
    admin = control_plane.kubeconfig_dict(namespace=namespace)
    kubeconfig = objects.kubeconfig_secret("edge-kubeconfig", admin)
    client.CoreV1Api(api_client).create_namespaced_secret(namespace, kubeconfig)
    engine.create(objects.remote_mpe("edge", secret_name="edge-kubeconfig"))
    # A ClusterMediaProcessingEntity (Jobs in this namespace) exercises the cluster-scoped rules:
    # its cache and its finalizer and status writes.
    cluster_mpe = f"cl-{namespace}"
    engine.create(objects.local_mpe(cluster_mpe, namespace=namespace, cluster=True))
    # A Task whose pods an admission policy refuses: the controller reads the Job's FailedCreate
    # Events (the core Events list rule) to say why.
    policy = refuse_labelled_pods(api_client, namespace)
    engine.create(
        objects.task(
            "refused",
            workflow_name="wf",
            function_name="fn",
            mpe_name="local",
            templatePatches={"spec": {"template": {"metadata": {"labels": {REFUSE: "yes"}}}}},
        )
    )
    # A Task whose pod never starts: the controller lists the Job's pods (the pods list rule) to
    # say why none is ready.
    engine.create(objects.never_starting(objects.function("fn-waiting")))
    engine.create(
        objects.task("waiting", workflow_name="wf", function_name="fn-waiting", mpe_name="local")
    )
    yield engine
    policy()
    # The controller is stopped by now: drop its finalizer so the object really goes.
    with contextlib.suppress(client.ApiException):
        engine.api.patch_cluster_custom_object(
            "engine.nagare.media",
            "v1alpha1",
            "clustermediaprocessingentities",
            cluster_mpe,
            {"metadata": {"finalizers": None}},
        )
        engine.api.delete_cluster_custom_object(
            "engine.nagare.media", "v1alpha1", "clustermediaprocessingentities", cluster_mpe
        )


def test_controller_works_with_exactly_the_generated_rules(
    api_client, control_plane, namespace, basics, kubelet
):
    """Bound to the generated rules only, the controller runs a Task to Succeeded and deletes it,
    and deletes a finished Workflow after `--finished-ttl` (retention)."""
    api = token_client(api_client, control_plane, namespace, rbac.RULES, rbac.LEASE_RULES)
    forbidden = Forbidden()
    controller = start_controller(
        api, namespace, forbidden, workflow_termination_waiting=1.0, finished_ttl=2.0
    )
    try:
        controller.start()
        basics.create(objects.workflow("short"))
        basics.create(
            objects.task("short-a", workflow_name="short", function_name="fn", mpe_name="local")
        )
        scenario(basics, "ok")
        wait_for(
            lambda: basics.phase("ok") == "Succeeded",
            timeout=60,
            what=lambda: describe(api_client, namespace, basics, forbidden),
        )
        basics.api.delete_namespaced_custom_object(
            "engine.nagare.media", "v1alpha1", namespace, "tasks", "ok"
        )

        def gone():
            items = basics.api.list_namespaced_custom_object(
                "engine.nagare.media", "v1alpha1", namespace, "tasks"
            )["items"]
            return "ok" not in {t["metadata"]["name"] for t in items}

        wait_for(gone, timeout=60, what="Task deleted")

        def retained() -> list[str]:
            workflows = basics.api.list_namespaced_custom_object(
                "engine.nagare.media", "v1alpha1", namespace, "workflows"
            )["items"]
            return [w["metadata"]["name"] for w in workflows if w["metadata"]["name"] == "short"]

        wait_for(lambda: not retained(), timeout=60, what="finished Workflow deleted by its TTL")
    finally:
        controller.stop()
    assert forbidden.seen == []


ALL_RULES = [("cluster", i) for i in range(len(rbac.RULES))] + [
    ("lease", i) for i in range(len(rbac.LEASE_RULES))
]


@pytest.mark.parametrize(("scope", "index"), ALL_RULES, ids=lambda v: str(v))
def test_every_rule_is_needed(api_client, control_plane, namespace, basics, kubelet, scope, index):
    """Without any single generated rule, some request of a normal Task's life is forbidden."""
    rules = [r for i, r in enumerate(rbac.RULES) if not (scope == "cluster" and i == index)]
    lease_rules = [
        r for i, r in enumerate(rbac.LEASE_RULES) if not (scope == "lease" and i == index)
    ]
    removed = (rbac.RULES if scope == "cluster" else rbac.LEASE_RULES)[index]
    api = token_client(api_client, control_plane, namespace, rules, lease_rules)
    forbidden = Forbidden()
    controller = start_controller(api, namespace, forbidden)

    def refused() -> bool:
        return forbidden.event.is_set() or (scope == "lease" and lease_refusals(controller) > 0)

    starting = threading.Thread(target=start_quietly, args=(controller,), daemon=True)
    try:
        # A cache that may not list never syncs: stop waiting for it once the 403 is recorded
        # (a stop ends the start; the sync timeout would cost every such case 15 s).
        starting.start()
        while starting.is_alive() and not refused():
            starting.join(0.1)
        if not refused():
            scenario(basics, "probe")
            wait_until(refused, 45)
            if not refused() and basics.phase("probe") == "Succeeded":
                basics.api.delete_namespaced_custom_object(
                    "engine.nagare.media", "v1alpha1", namespace, "tasks", "probe"
                )
                wait_until(refused, 30)
    finally:
        controller.stop()
        starting.join(30)
    # Lease requests go through the controller's own metered Rest, not the test's: without the
    # Lease rule they are answered 403 (counted in rest_client_requests_total) and the
    # controller never leads (and so never reconciles).
    never_led = (
        scope == "lease" and lease_refusals(controller) > 0 and not controller.leading.is_set()
    )
    assert forbidden.seen or never_led, (
        f"nothing failed without the rule for {removed.resources} {removed.verbs}"
    )


def start_quietly(controller: Manager) -> None:
    with contextlib.suppress(TimeoutError):
        controller.start()


def wait_until(condition: Any, seconds: float) -> None:
    """Poll ``condition`` until it holds or ``seconds`` pass (the caller then asserts)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def lease_refusals(controller: Manager) -> float:
    """Requests of the controller's metered Rests (the Lease's) answered 403: the test's Rest
    observer does not see them."""
    return sum(
        sample.value
        for metric in controller.metrics.registry.collect()
        if metric.name == "rest_client_requests"
        for sample in metric.samples
        if sample.name == "rest_client_requests_total" and sample.labels.get("code") == "403"
    )
