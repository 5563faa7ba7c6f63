"""deploy/ installs: every manifest passes server-side dry-run on a real API server."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client, utils

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_manifests_pass_server_side_dry_run(api_client, crds):
    """Namespace, RBAC, ConfigMap, Deployment and Service are valid objects for kube-apiserver."""
    docs = []
    for name in ("manager.yaml", "rbac.yaml"):
        docs += [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    core = client.CoreV1Api(api_client)
    core.create_namespace(namespace)  # dry-run of namespaced objects needs the namespace to exist
    try:
        created = []
        for doc in docs:
            if doc["kind"] == "Namespace":
                continue
            created.append(utils.create_from_dict(api_client, doc, dry_run="All")[0])
        kinds = sorted({type(o).__name__ for o in created})
        assert "V1Deployment" in kinds
        assert "V1ClusterRole" in kinds
    finally:
        core.delete_namespace(namespace["metadata"]["name"])


def test_deployment_runs_the_controller_as_non_root_with_probes():
    """The Deployment enables leader election, probes /healthz and /readyz, and runs non-root."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "manager.yaml").read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "--leader-elect" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == "taskfsm"
