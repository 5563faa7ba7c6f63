"""deploy/ as a kustomize base and deploy/components/*: each component rendered over the base with
`kubectl kustomize`, its objects the chart renders for the matching option, the alerts selecting
the job the ServiceMonitor creates, and the rendered objects accepted by a real API server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from taskfsm.tools import deploygen
from tests.integration.test_helm_chart import by_kind, comparable, render
from tests.support import kubetools

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPONENTS = ("monitoring", "cert-manager-metrics", "job-policy", "pdb", "namespaced")
OPT_OUTS = ("plain-metrics",)
"""Components that undo a default; not combined with the others in the dry-run."""
WATCHED = "media"
"""The namespace the overlays give the namespaced component (its local-config ConfigMap)."""
NEEDS_OTHER_CRDS = {"ServiceMonitor", "PrometheusRule", "Certificate"}
"""Kinds of the Prometheus Operator and cert-manager, whose CRDs the test API server lacks."""


def kustomize(tmp_path: Path, *components: str, namespace: str | None = None) -> list[dict]:
    """`kubectl kustomize` of an overlay of deploy/ with ``components`` (and ``namespace``)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir(exist_ok=True)
    base = os.path.relpath(DEPLOY, overlay)
    body: dict = {"resources": [base]}
    if "namespaced" in components:
        watch = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": deploygen.WATCH_CONFIG,
                "annotations": {"config.kubernetes.io/local-config": "true"},
            },
            "data": {"namespace": WATCHED},
        }
        (overlay / "watch.yaml").write_text(yaml.safe_dump(watch))
        body["resources"].append("watch.yaml")
    if components:
        body["components"] = [f"{base}/components/{c}" for c in components]
    if namespace:
        body["namespace"] = namespace
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(body))
    out = kubetools.run(kubetools.quote("kubectl", "kustomize", str(overlay)), "/dev/null")
    return kubetools.documents(out.stdout)


def test_every_component_is_listed_and_renders_over_the_base(tmp_path):
    """deploy/components holds exactly the documented components; each adds its objects to the
    base's and changes nothing else but what it says."""
    assert sorted(p.name for p in (DEPLOY / "components").iterdir()) == sorted(
        COMPONENTS + OPT_OUTS
    )
    base = by_kind(kustomize(tmp_path))
    added = {
        "monitoring": {
            ("ServiceMonitor", "taskfsm-controller"),
            ("PrometheusRule", "taskfsm"),
            ("ConfigMap", "taskfsm-dashboard"),
        },
        "cert-manager-metrics": {("Certificate", "taskfsm-controller-metrics")},
        "job-policy": {
            ("ValidatingAdmissionPolicy", "taskfsm-job-bounds"),
            ("ValidatingAdmissionPolicyBinding", "taskfsm-job-bounds"),
        },
        "pdb": {("PodDisruptionBudget", "taskfsm-controller")},
        "namespaced": {("Role", "taskfsm-controller"), ("RoleBinding", "taskfsm-controller")},
        "plain-metrics": set(),
    }
    changes = {
        "cert-manager-metrics": {("Deployment", "taskfsm-controller")},
        "namespaced": {("Deployment", "taskfsm-controller"), ("ClusterRole", "taskfsm-controller")},
        "plain-metrics": {
            ("Deployment", "taskfsm-controller"),
            ("Service", "taskfsm-controller-metrics"),
            ("NetworkPolicy", "taskfsm-controller"),
        },
    }
    for component, objects in added.items():
        docs = by_kind(kustomize(tmp_path, component))
        assert set(docs) - set(base) == objects, component
        changed = {k for k in base if docs[k] != base[k]}
        assert changed == changes.get(component, set()), component


def test_components_render_what_the_chart_renders_for_the_same_options(tmp_path):
    """Base + components = the chart (release taskfsm in taskfsm-system) with the matching
    values, apart from Helm's labels and the issuer (yours to patch in)."""
    kustomized = by_kind(
        kustomize(tmp_path, "monitoring", "cert-manager-metrics", "job-policy", "pdb")
    )
    chart = by_kind(
        render(
            "--set",
            "metrics.serviceMonitor.enabled=true,podDisruptionBudget.enabled=true,"
            "metrics.dashboard.enabled=true,"
            "jobPolicy.enabled=true,metrics.certManager.enabled=true,"
            "metrics.certManager.issuerRef.name=taskfsm-metrics-issuer,"
            "metrics.certManager.issuerRef.kind=ClusterIssuer",
        )
    )
    for key in (
        ("ServiceMonitor", "taskfsm-controller"),
        ("ConfigMap", "taskfsm-dashboard"),
        ("PodDisruptionBudget", "taskfsm-controller"),
        ("Certificate", "taskfsm-controller-metrics"),
        ("Deployment", "taskfsm-controller"),
        ("NetworkPolicy", "taskfsm-controller"),
        ("Service", "taskfsm-controller-metrics"),
    ):
        assert comparable(kustomized[key]) == comparable(chart[key]), key
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        assert (
            kustomized[(kind, "taskfsm-job-bounds")]["spec"]
            == chart[(kind, "taskfsm-job-bounds")]["spec"]
        )


def test_namespaced_component_renders_what_the_chart_renders_with_watch_namespace(tmp_path):
    """With the namespace from the overlay's local-config ConfigMap (which is not rendered), the
    component gives the chart's watchNamespace objects: --namespace, a Role and RoleBinding
    there, a ClusterRole for the cluster-scoped kinds only."""
    kustomized = by_kind(kustomize(tmp_path, "namespaced"))
    assert ("ConfigMap", deploygen.WATCH_CONFIG) not in kustomized
    chart = by_kind(render("--set", f"watchNamespace={WATCHED}"))
    for key in (
        ("Role", "taskfsm-controller"),
        ("RoleBinding", "taskfsm-controller"),
        ("ClusterRole", "taskfsm-controller"),
        ("Deployment", "taskfsm-controller"),
    ):
        assert comparable(kustomized[key]) == comparable(chart[key]), key
    assert kustomized[("Role", "taskfsm-controller")]["metadata"]["namespace"] == WATCHED


def test_plain_metrics_component_is_the_charts_explicit_opt_out(tmp_path):
    """plain-metrics renders what the chart renders with metrics.secure=false,metrics.port=8080:
    no --metrics-secure, HTTP on 8080 in the Pod, the Service and the NetworkPolicy."""
    kustomized = by_kind(kustomize(tmp_path, "plain-metrics"))
    chart = by_kind(render("--set", "metrics.secure=false,metrics.port=8080"))
    for key in (
        ("Deployment", "taskfsm-controller"),
        ("Service", "taskfsm-controller-metrics"),
        ("NetworkPolicy", "taskfsm-controller"),
    ):
        assert comparable(kustomized[key]) == comparable(chart[key]), key
    args = kustomized[("Deployment", "taskfsm-controller")]["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert "--metrics-secure" not in args


@pytest.mark.parametrize("components", [OPT_OUTS])
def test_opt_out_components_pass_server_side_dry_run(
    control_plane, crds, namespace, tmp_path, components
):
    docs = kustomize(tmp_path, *components, namespace=namespace)
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    proc = kubetools.run(
        kubetools.quote("kubectl", "apply", "--dry-run=server", "-f", str(manifest)),
        control_plane.kubeconfig,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == len(docs)
    assert all(line.endswith("(server dry run)") for line in lines), proc.stdout


def test_alerts_select_the_job_the_service_monitor_creates(tmp_path):
    """The ServiceMonitor's targets get the job label of the Service it selects; every alert of
    the PrometheusRule selects that job."""
    docs = by_kind(kustomize(tmp_path, "monitoring"))
    monitor = docs[("ServiceMonitor", "taskfsm-controller")]["spec"]
    selector = monitor["selector"]["matchLabels"]
    services = [
        name
        for (kind, name), doc in docs.items()
        if kind == "Service" and selector.items() <= doc["metadata"]["labels"].items()
    ]
    assert services == [deploygen.METRICS_SERVICE]
    rule = docs[("PrometheusRule", "taskfsm")]
    expressions = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert expressions
    for expr in expressions:
        assert f'job="{services[0]}"' in expr
    endpoint = monitor["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert "insecureSkipVerify" not in endpoint["tlsConfig"]
    assert endpoint["tlsConfig"]["ca"]["secret"]["name"] == deploygen.METRICS_TLS_SECRET


def test_dashboard_config_map_carries_the_grafana_sidecar_label_and_the_dashboard(tmp_path):
    docs = by_kind(kustomize(tmp_path, "monitoring"))
    config_map = docs[("ConfigMap", "taskfsm-dashboard")]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads((DEPLOY / "monitoring" / "grafana-dashboard.json").read_text())
    assert json.loads(config_map["data"]["taskfsm.json"]) == dashboard


@pytest.mark.parametrize("components", [(), COMPONENTS])
def test_rendered_components_pass_server_side_dry_run(
    control_plane, crds, namespace, tmp_path, components
):
    """Every object of the base with and without all components, in a namespace of the test's,
    is accepted by kube-apiserver (server-side dry-run of `kubectl apply`); the ServiceMonitor,
    PrometheusRule and Certificate need CRDs this API server lacks, their fields are checked
    above against the chart's."""
    docs = [
        d
        for d in kustomize(tmp_path, *components, namespace=namespace)
        if d["kind"] not in NEEDS_OTHER_CRDS
    ]
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    proc = kubetools.run(
        kubetools.quote("kubectl", "apply", "--dry-run=server", "-f", str(manifest)),
        control_plane.kubeconfig,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == len(docs)
    assert all(line.endswith("(server dry run)") for line in lines), proc.stdout
    assert any(line.startswith("deployment.apps/taskfsm-controller") for line in lines)
    if components:
        assert any("poddisruptionbudget" in line for line in lines)
        assert any("validatingadmissionpolicy." in line for line in lines)


def test_base_with_every_component_applies_on_a_fresh_api_server(tmp_path):
    """`kubectl apply` (for real, not a dry-run) of the base with every component on an API
    server of its own creates every object (but the ServiceMonitor, PrometheusRule and
    Certificate, whose CRDs it lacks): the CRDs before the Namespace's objects, the Role in the
    watched namespace, the admission policy and the PodDisruptionBudget."""
    from taskfsm_dev.controlplane import ControlPlane

    docs = [d for d in kustomize(tmp_path, *COMPONENTS) if d["kind"] not in NEEDS_OTHER_CRDS]
    manifest = tmp_path / "rendered.yaml"
    manifest.write_text(yaml.safe_dump_all(docs))
    with ControlPlane(name="taskfsm-kustomize") as cluster:
        kubetools.run(
            kubetools.quote("kubectl", "create", "namespace", WATCHED), cluster.kubeconfig
        )
        proc = kubetools.run(
            kubetools.quote("kubectl", "apply", "--server-side", "-f", str(manifest)),
            cluster.kubeconfig,
        )
        assert len(proc.stdout.splitlines()) == len(docs), proc.stdout
        got = kubetools.run(
            kubetools.quote(
                "kubectl", "get", "-n", "taskfsm-system",
                "deployment/taskfsm-controller", "poddisruptionbudget/taskfsm-controller",
                "networkpolicy/taskfsm-controller", "service/taskfsm-controller-metrics",
                "-o", "name",
            ),
            cluster.kubeconfig,
        ).stdout.split()  # fmt: skip
        assert len(got) == 4, got
        role = kubetools.run(
            kubetools.quote(
                "kubectl", "get", "-n", WATCHED, "role/taskfsm-controller", "-o", "name"
            ),
            cluster.kubeconfig,
        ).stdout.strip()
        assert role == "role.rbac.authorization.k8s.io/taskfsm-controller"
        policy = kubetools.run(
            kubetools.quote("kubectl", "get", "validatingadmissionpolicy", "-o", "name"),
            cluster.kubeconfig,
        ).stdout
        assert "taskfsm-job-bounds" in policy
