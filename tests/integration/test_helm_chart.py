"""deploy/chart: helm lint, helm template, the rendered objects on a real API server, and the chart
with its defaults rendering what the plain manifests in deploy/ hold."""

from __future__ import annotations

import copy
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskfsm.tools import deploygen
from taskfsm_dev.controlplane import ControlPlane
from tests.support import kubetools

REPO = Path(__file__).resolve().parents[2]
CHART = "deploy/chart"
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version")


def helm(*args: str) -> str:
    """Run the project's helm (no cluster needed) and return its stdout."""
    return kubetools.run(kubetools.quote("helm", *args), "/dev/null").stdout


def render(*args: str, release: str = "taskfsm", namespace: str = "taskfsm-system") -> list[dict]:
    return kubetools.documents(helm("template", release, CHART, "-n", namespace, *args))


def by_kind(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def plain_manifests() -> list[dict]:
    docs = []
    for name in ("crds.yaml", "manager.yaml", "rbac.yaml"):
        docs += kubetools.documents((REPO / "deploy" / name).read_text())
    return docs


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` without what only Helm adds (its labels, the instance label and the config
    checksum) and with the configuration parsed, so equal objects compare equal."""
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    for key in (*HELM_ONLY_LABELS, "app.kubernetes.io/instance"):
        (meta.get("labels") or {}).pop(key, None)
    spec = doc.get("spec") or {}
    for labels in (
        (spec.get("selector") or {}).get("matchLabels"),
        spec.get("selector") if doc["kind"] == "Service" else None,
        ((spec.get("template") or {}).get("metadata") or {}).get("labels"),
        (spec.get("podSelector") or {}).get("matchLabels"),
    ):
        if labels:
            labels.pop("app.kubernetes.io/instance", None)
    template_meta = (spec.get("template") or {}).get("metadata") or {}
    template_meta.pop("annotations", None)
    if doc["kind"] == "ConfigMap":
        doc["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
    return doc


def test_chart_passes_helm_lint_with_defaults_and_every_option():
    """`helm lint --strict` finds nothing to complain about, with the default values and with
    every optional object switched on."""
    helm("lint", "--strict", CHART)
    helm(
        "lint",
        "--strict",
        CHART,
        "--set",
        "metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true",
        "--set",
        "metrics.dashboard.enabled=true,metrics.certManager.enabled=true,metrics.certManager.issuerRef.name=ca",
        "--set",
        "podDisruptionBudget.enabled=true,watchNamespace=media,leaderElection.enabled=false",
        "--set",
        "jobPolicy.enabled=true,metrics.tenantLabels=true",
    )
    helm("lint", "--strict", CHART, "--set", "metrics.secure=false,metrics.port=8080")


def test_defaults_render_the_plain_manifests():
    """Release `taskfsm` in `taskfsm-system` with the default values renders exactly the objects
    of deploy/crds.yaml, manager.yaml and rbac.yaml (but the Namespace, which `helm install
    --create-namespace` makes), apart from Helm's own labels."""
    plain = by_kind(plain_manifests())
    namespace = plain.pop(("Namespace", "taskfsm-system"))
    assert namespace
    chart = by_kind(render("--include-crds"))
    assert sorted(chart) == sorted(plain)
    for key, doc in plain.items():
        assert comparable(chart[key]) == comparable(doc), key


def test_chart_versions_come_from_the_one_version_source():
    """Chart version and appVersion are taskfsm's version; the default image is
    ghcr.io/nagare-media/taskfsm tagged with it."""
    chart = yaml.safe_load((REPO / CHART / "Chart.yaml").read_text())
    version = deploygen.project_version()
    assert chart["version"] == chart["appVersion"] == version
    deployment = by_kind(render())[("Deployment", "taskfsm-controller")]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/nagare-media/taskfsm:{version}" == deploygen.image()


def test_chart_states_the_minimum_kubernetes_version():
    """Chart.yaml's kubeVersion is the stated minimum (docs/install.md): helm renders for it and
    for managed clusters' pre-release-suffixed versions, and refuses the version before it."""
    chart = yaml.safe_load((REPO / CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">= {deploygen.MIN_KUBERNETES}.0-0"
    assert (
        f"Kubernetes {deploygen.MIN_KUBERNETES} or later"
        in (REPO / "docs" / "install.md").read_text()
    )
    major, minor = (int(p) for p in deploygen.MIN_KUBERNETES.split("."))
    assert render("--kube-version", f"v{major}.{minor}.0")
    assert render("--kube-version", f"v{major}.{minor}.2-eks-1234")
    proc = kubetools.run(
        kubetools.quote(
            "helm", "template", "t", CHART, "--kube-version", f"v{major}.{minor - 1}.9"
        ),
        "/dev/null",
        check=False,
    )
    assert proc.returncode != 0
    assert "kubeVersion" in proc.stderr or "incompatible" in proc.stderr, proc.stderr


def test_values_change_what_they_say():
    """Image, replicas, workers, namespace, leader election, log format, metrics, probes,
    resources, ServiceMonitor, PodDisruptionBudget, ServiceAccount and RBAC values show up in the
    rendered objects as values.yaml describes."""
    docs = by_kind(
        render(
            "--set",
            "image.repository=registry.example.com/taskfsm,image.tag=1.2.3,replicaCount=3",
            "--set",
            "workers=8,watchNamespace=media,leaderElection.enabled=false,logging.format=text",
            "--set",
            "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=prom",
            "--set",
            "metrics.serviceMonitor.caSecret=prom-ca",
            "--set",
            "podDisruptionBudget.enabled=true,resources.limits.memory=1Gi",
            "--set",
            "livenessProbe.periodSeconds=7,extraArgs[0]=--job-ttl-seconds=60",
            "--set",
            "serviceAccount.create=false,serviceAccount.name=existing",
            release="edge",
            namespace="media",
        )
    )
    deployment = docs[("Deployment", "edge-taskfsm-controller")]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example.com/taskfsm:1.2.3"
    assert container["args"] == [
        "run",
        "--config=/etc/taskfsm/config.yaml",
        "--no-leader-elect",
        "--workers=8",
        "--namespace=media",
        "--log-format=text",
        "--log-level=INFO",
        "--metrics-bind-address=:8443",
        "--metrics-secure",
        "--health-probe-bind-address=:8081",
        "--job-ttl-seconds=60",
    ]
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert container["livenessProbe"]["periodSeconds"] == 7
    assert pod["serviceAccountName"] == "existing"
    assert ("ServiceAccount", "existing") not in docs
    assert ("ClusterRoleBinding", "edge-taskfsm-controller") in docs
    monitor = docs[("ServiceMonitor", "edge-taskfsm-controller")]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["media"]}
    service = docs[("Service", "edge-taskfsm-controller-metrics")]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert docs[("PodDisruptionBudget", "edge-taskfsm-controller")]["spec"]["minAvailable"] == 1

    bare = by_kind(
        render("--set", "metrics.enabled=false,rbac.create=false,networkPolicy.enabled=false")
    )
    kinds = {kind for kind, _ in bare}
    assert kinds == {"ServiceAccount", "ConfigMap", "Deployment"}
    container = bare[("Deployment", "taskfsm-controller")]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert "--metrics-bind-address=" in container["args"]
    assert [p["name"] for p in container["ports"]] == ["health"]


def _args(docs: dict, name: str = "taskfsm-controller") -> list[str]:
    return docs[("Deployment", name)]["spec"]["template"]["spec"]["containers"][0]["args"]


def test_buckets_and_controllers_values_become_flags():
    """`buckets` and `controllers` become `--buckets` and `--controllers` when they differ from
    the flags' defaults (1; task,workflow,mpe), and are left out otherwise; buckets above 1
    without leader election is a render error."""
    defaults = _args(by_kind(render()))
    assert not [a for a in defaults if a.startswith(("--buckets", "--controllers"))]
    explicit = _args(by_kind(render("--set", "buckets=1,controllers=task\\,workflow\\,mpe")))
    assert explicit == defaults
    args = _args(by_kind(render("--set", "buckets=3,controllers=task\\,mpe")))
    assert "--buckets=3" in args
    assert "--controllers=task,mpe" in args
    assert args.index("--leader-elect") < args.index("--buckets=3")
    proc = kubetools.run(
        kubetools.quote(
            "helm", "template", "t", CHART, "--set", "buckets=2,leaderElection.enabled=false"
        ),
        "/dev/null",
        check=False,
    )
    assert proc.returncode != 0
    assert "buckets above 1 needs leaderElection.enabled" in proc.stderr


def test_queue_fairness_values_become_flags():
    """`queueFairness` becomes `--queue-fairness`, `--namespace-weights` (sorted by namespace)
    and `--max-in-flight-per-namespace` when they differ from the defaults, and is left out
    otherwise; the flags parse."""
    from taskfsm import cli
    from taskfsm.cli.run import parse_namespace_weights

    flags = ("--queue-fairness", "--namespace-weights", "--max-in-flight-per-namespace")
    assert not [a for a in _args(by_kind(render())) if a.startswith(flags)]
    args = _args(
        by_kind(
            render(
                "--set",
                "queueFairness.mode=fifo,queueFairness.maxInFlightPerNamespace=3,"
                "queueFairness.namespaceWeights.media-live=4,queueFairness.namespaceWeights.batch=2",
            )
        )
    )
    chosen = [a for a in args if a.startswith(flags)]
    assert chosen == [
        "--queue-fairness=fifo",
        "--namespace-weights=batch=2,media-live=4",
        "--max-in-flight-per-namespace=3",
    ]
    parsed = cli.build_parser().parse_args(["run", *chosen])
    assert parse_namespace_weights(parsed.namespace_weights) == (("batch", 2), ("media-live", 4))
    assert parsed.max_in_flight_per_namespace == 3


def test_finished_ttl_value_becomes_the_flag():
    """`finishedTTL` becomes `--finished-ttl` when set and is left out by default (kept
    forever); the schema refuses what is no duration."""
    assert not [a for a in _args(by_kind(render())) if a.startswith("--finished-ttl")]
    assert "--finished-ttl=168h" in _args(by_kind(render("--set", "finishedTTL=168h")))
    assert "--finished-ttl=3600" in _args(by_kind(render("--set-string", "finishedTTL=3600")))
    proc = kubetools.run(
        kubetools.quote("helm", "template", "t", CHART, "--set", "finishedTTL=a week"),
        "/dev/null",
        check=False,
    )
    assert proc.returncode != 0
    assert "/finishedTTL" in proc.stderr


def test_extra_env_reaches_the_container_so_an_operators_malloc_arena_max_wins():
    """`extraEnv` entries follow POD_NAMESPACE in the controller's env (none by default, so the
    controller's own cap of 2 glibc heaps applies; a MALLOC_ARENA_MAX set here replaces it,
    taskfsm/manager/memory.py)."""

    def env(*args: str) -> list[dict[str, Any]]:
        deployment = by_kind(render(*args))[("Deployment", "taskfsm-controller")]
        return deployment["spec"]["template"]["spec"]["containers"][0]["env"]

    assert [e["name"] for e in env()] == ["POD_NAMESPACE"]
    assert env("--set", "extraEnv[0].name=MALLOC_ARENA_MAX", "--set-string", "extraEnv[0].value=4")[
        1:
    ] == [{"name": "MALLOC_ARENA_MAX", "value": "4"}]


def test_prometheus_rule_selects_the_release_scrape_job():
    """With metrics.prometheusRule.enabled every alert selects the job a ServiceMonitor gives
    this release's metrics Service (`<prefix>-controller-metrics`), or jobSelector when set."""

    def expressions(*args: str, release: str) -> list[str]:
        docs = by_kind(
            render("--set", "metrics.prometheusRule.enabled=true", *args, release=release)
        )
        prefix = "taskfsm" if release == "taskfsm" else f"{release}-taskfsm"
        rule = docs[("PrometheusRule", f"{prefix}-alerts")]
        return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]

    default = expressions(release="taskfsm")
    assert default
    assert all('job="taskfsm-controller-metrics"' in e for e in default)
    edge = expressions(release="edge")
    assert all('job="edge-taskfsm-controller-metrics"' in e for e in edge)
    assert not any('job="taskfsm-controller-metrics"' in e for e in edge)
    chosen = expressions(
        "--set-string", 'metrics.prometheusRule.jobSelector=job="scraped"', release="edge"
    )
    assert all('job="scraped"' in e and "controller-metrics" not in e for e in chosen)


def test_service_account_name_is_required_without_creating_one():
    """serviceAccount.create=false without a name is a render error naming the value."""
    proc = kubetools.run(
        kubetools.quote("helm", "template", "t", CHART, "--set", "serviceAccount.create=false"),
        "/dev/null",
        check=False,
    )
    assert proc.returncode != 0
    assert "serviceAccount.name is required" in proc.stderr


def test_crds_come_only_from_the_crds_directory():
    """The CRDs are the chart's crds/ files (deploy/crds.yaml), which Helm installs but never
    templates: `helm template` shows them only with --include-crds."""
    assert (REPO / CHART / "crds" / "crds.yaml").read_text() == (
        REPO / "deploy" / "crds.yaml"
    ).read_text()
    assert {d["kind"] for d in render()} >= {"Deployment"}
    assert "CustomResourceDefinition" not in {d["kind"] for d in render()}
    crds = [d for d in render("--include-crds") if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 10


@pytest.mark.parametrize("options", ["", "podDisruptionBudget.enabled=true,workers=2"])
def test_rendered_chart_passes_server_side_dry_run(control_plane, crds, namespace, options):
    """Every object the chart renders (CRDs included) is accepted by kube-apiserver (server-side
    dry-run of `kubectl apply`). The ServiceMonitor needs the Prometheus Operator's CRDs, which
    this API server does not have; its fields are checked in test_values_change_what_they_say."""
    set_args = f"--set {options}" if options else ""
    proc = kubetools.run(
        f"helm template taskfsm {CHART} -n {namespace} --include-crds {set_args}"
        " | kubectl apply --dry-run=server -f -",
        control_plane.kubeconfig,
    )
    lines = proc.stdout.splitlines()
    assert all(line.endswith("(server dry run)") for line in lines), proc.stdout
    assert any(line.startswith("deployment.apps/taskfsm-controller") for line in lines)
    assert len([line for line in lines if "customresourcedefinition" in line]) == 10


def test_schema_refuses_values_the_chart_does_not_know():
    """values.schema.json (generated from values.yaml) makes every render fail on a wrong type,
    a misspelt key or a value outside its enum, naming it; the defaults and a percentage for the
    PodDisruptionBudget pass."""
    refused = {
        "replicaCount=two": "/replicaCount",
        "replicas=3": "'replicas' not allowed",
        "logging.format=xml": "/logging/format",
        "metrics.serviceMonitr.enabled=true": "'serviceMonitr' not allowed",
        "controllers=task\\,jobs": "/controllers",
        "buckets=0": "/buckets",
    }
    for option, message in refused.items():
        proc = kubetools.run(
            kubetools.quote("helm", "template", "t", CHART, "--set", option),
            "/dev/null",
            check=False,
        )
        assert proc.returncode != 0, option
        assert message in proc.stderr, (option, proc.stderr)
    assert render("--set-string", "podDisruptionBudget.minAvailable=50%")
    assert render("--set", "global.anything=1")  # what a parent chart passes


def _notes_commands(notes: str, chart: Path) -> list[str]:
    """The command lines NOTES.txt shows (indented by two spaces), with CHART filled in."""
    return [
        line.strip().replace("CHART", str(chart))
        for line in notes.splitlines()
        if line.startswith("  ") and line.split()[0] in ("kubectl", "helm")
    ]


def test_packaged_chart_installs_from_its_tgz_and_its_notes_are_true(tmp_path):
    """`helm package` makes taskfsm-<version>.tgz with everything the chart needs (the schema,
    the README, the CRDs, the rule file); `helm lint --strict` passes on it; installed from the
    .tgz on a fresh API server it creates the CRDs and the release's objects; and every command
    its NOTES show works as written (CHART: the .tgz), naming nothing outside the package."""
    version = deploygen.project_version()
    out = helm("package", CHART, "--destination", str(tmp_path))
    package = tmp_path / f"taskfsm-{version}.tgz"
    assert str(package) in out
    with tarfile.open(package) as tar:
        names = set(tar.getnames())
    for member in (
        "Chart.yaml",
        "values.yaml",
        "values.schema.json",
        "README.md",
        "crds/crds.yaml",
        "files/prometheus-rules.yaml",
        "templates/NOTES.txt",
        "templates/deployment.yaml",
    ):
        assert f"taskfsm/{member}" in names, member
    helm("lint", "--strict", str(package))

    with ControlPlane(name="taskfsm-helm-package") as cluster:
        install = kubetools.run(
            kubetools.quote(
                "helm", "install", "edge", str(package), "-n", "media", "--create-namespace",
                "--set", "metrics.prometheusRule.enabled=false",
            ),
            cluster.kubeconfig,
        ).stdout  # fmt: skip
        assert "STATUS: deployed" in install
        notes = kubetools.run(
            kubetools.quote("helm", "get", "notes", "edge", "-n", "media"), cluster.kubeconfig
        ).stdout
        assert f"taskfsm {version} (chart taskfsm-{version})" in notes
        assert "deploy/" not in notes
        assert "docs/" not in notes
        commands = _notes_commands(notes, package)
        assert commands == [
            "kubectl -n media get deployment edge-taskfsm-controller",
            "kubectl get tasks -A",
            f"helm show crds {package} | kubectl apply -f -",
        ]
        outputs = [kubetools.run(command, cluster.kubeconfig) for command in commands]
        assert "edge-taskfsm-controller" in outputs[0].stdout
        assert "No resources found" in outputs[1].stderr
        assert outputs[2].stdout.count("customresourcedefinition") == 10
        assert f"helm show readme {package}".replace(str(package), "CHART") in notes
        readme = helm("show", "readme", str(package))
        assert "helm show crds CHART | kubectl apply -f -" in readme
        kubetools.run(
            kubetools.quote("helm", "uninstall", "edge", "-n", "media"), cluster.kubeconfig
        )


def test_watch_namespace_grants_a_role_there_and_cluster_rules_for_cluster_kinds_only():
    """With ``watchNamespace`` the namespaced rules are a Role in that namespace; the ClusterRole
    holds only the cluster-scoped kinds' rules (docs/security.md)."""
    from taskfsm.tools import rbac

    docs = by_kind(render("--set", "watchNamespace=media"))
    role = docs[("Role", "taskfsm-controller")]
    assert role["metadata"]["namespace"] == "media"
    assert role["rules"] == [r.policy_rule() for r in rbac.NAMESPACED_RULES]
    cluster_role = docs[("ClusterRole", "taskfsm-controller")]
    assert cluster_role["rules"] == [r.policy_rule() for r in rbac.CLUSTER_RULES]
    namespaced = {res for rule in rbac.NAMESPACED_RULES for res in rule.resources}
    assert not namespaced & {res for rule in cluster_role["rules"] for res in rule["resources"]}
    binding = docs[("RoleBinding", "taskfsm-controller")]
    assert binding["metadata"]["namespace"] == "media"


def test_network_policy_admits_only_the_metrics_and_probe_ports():
    docs = by_kind(
        render(
            "--set-json",
            'networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"team":"monitoring"}}}]',
        )
    )
    policy = docs[("NetworkPolicy", "taskfsm-controller")]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = [rule["ports"][0]["port"] for rule in policy["spec"]["ingress"]]
    assert ports == [8443, 8081]
    assert policy["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}
    ]
    assert "from" not in policy["spec"]["ingress"][1]


def test_dashboard_config_map_carries_the_generated_dashboard_and_the_sidecar_label():
    """metrics.dashboard.enabled renders the dashboard of deploy/monitoring in a ConfigMap
    labelled grafana_dashboard: "1" (or metrics.dashboard.labels)."""
    import json

    assert ("ConfigMap", "taskfsm-dashboard") not in by_kind(render())
    docs = by_kind(render("--set", "metrics.dashboard.enabled=true"))
    config_map = docs[("ConfigMap", "taskfsm-dashboard")]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads((REPO / "deploy" / "monitoring" / "grafana-dashboard.json").read_text())
    assert json.loads(config_map["data"]["taskfsm.json"]) == dashboard


def test_network_policy_admits_metrics_only_from_labelled_namespaces_by_default():
    """Without metricsFrom the metrics port admits only Pods of namespaces labelled
    `taskfsm.nagare.media/scrape-metrics: "true"`; an empty list admits anyone."""
    policy = by_kind(render())[("NetworkPolicy", "taskfsm-controller")]
    assert policy["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"taskfsm.nagare.media/scrape-metrics": "true"}}}
    ]
    anyone = by_kind(render("--set-json", "networkPolicy.metricsFrom=[]"))
    assert "from" not in anyone[("NetworkPolicy", "taskfsm-controller")]["spec"]["ingress"][0]


def test_metrics_are_https_with_authentication_by_default_and_http_only_when_asked():
    """The defaults serve /metrics with --metrics-secure on 8443 (Pod, Service, NetworkPolicy);
    metrics.secure=false is plain HTTP; tenantLabels becomes --metrics-tenant-labels."""
    docs = by_kind(render())
    container = docs[("Deployment", "taskfsm-controller")]["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert "--metrics-secure" in container["args"]
    assert "--metrics-bind-address=:8443" in container["args"]
    assert "--metrics-tenant-labels" not in container["args"]
    assert container["ports"][0] == {"name": "metrics", "containerPort": 8443}
    assert docs[("Service", "taskfsm-controller-metrics")]["spec"]["ports"][0]["port"] == 8443
    plain = _args(by_kind(render("--set", "metrics.secure=false,metrics.port=8080")))
    assert "--metrics-secure" not in plain
    assert "--metrics-bind-address=:8080" in plain
    named = _args(by_kind(render("--set", "metrics.tenantLabels=true")))
    assert "--metrics-tenant-labels" in named


def test_secure_metrics_values_become_flags_a_mounted_secret_and_an_https_service_monitor():
    docs = by_kind(
        render(
            "--set",
            "metrics.secure=true,metrics.certSecret=metrics-tls,metrics.serviceMonitor.enabled=true",
        )
    )
    pod = docs[("Deployment", "taskfsm-controller")]["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert "--metrics-secure" in args
    assert "--metrics-cert-dir=/etc/taskfsm/metrics-certs" in args
    assert {"name": "metrics-certs", "secret": {"secretName": "metrics-tls"}} in pod["volumes"]
    endpoint = docs[("ServiceMonitor", "taskfsm-controller")]["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert "insecureSkipVerify" not in endpoint["tlsConfig"]
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "metrics-tls", "key": "ca.crt"}}


def test_cert_manager_certificate_is_mounted_and_verified_by_the_service_monitor():
    """metrics.certManager makes a Certificate for the metrics Service's DNS names, whose Secret
    the Pod mounts and whose ca.crt the ServiceMonitor verifies the endpoint with."""
    docs = by_kind(
        render(
            "--set",
            "metrics.certManager.enabled=true,metrics.certManager.issuerRef.name=ca,"
            "metrics.certManager.issuerRef.kind=ClusterIssuer,metrics.serviceMonitor.enabled=true",
            release="edge",
            namespace="media",
        )
    )
    certificate = docs[("Certificate", "edge-taskfsm-controller-metrics")]["spec"]
    assert certificate["secretName"] == "edge-taskfsm-controller-metrics-tls"
    assert certificate["dnsNames"][0] == "edge-taskfsm-controller-metrics.media.svc"
    assert certificate["issuerRef"] == {
        "name": "ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }
    pod = docs[("Deployment", "edge-taskfsm-controller")]["spec"]["template"]["spec"]
    assert "--metrics-cert-dir=/etc/taskfsm/metrics-certs" in pod["containers"][0]["args"]
    assert {
        "name": "metrics-certs",
        "secret": {"secretName": "edge-taskfsm-controller-metrics-tls"},
    } in pod["volumes"]
    tls = docs[("ServiceMonitor", "edge-taskfsm-controller")]["spec"]["endpoints"][0]["tlsConfig"]
    assert tls == {
        "serverName": "edge-taskfsm-controller-metrics.media.svc",
        "ca": {"secret": {"name": "edge-taskfsm-controller-metrics-tls", "key": "ca.crt"}},
    }


def test_service_monitor_without_a_known_ca_skips_verification_only_when_asked():
    """A secure ServiceMonitor with no CA to verify against is a render error naming the
    values; insecureSkipVerify=true is the explicit way to scrape the self-signed certificate."""
    proc = kubetools.run(
        kubetools.quote(
            "helm", "template", "t", CHART, "--set", "metrics.serviceMonitor.enabled=true"
        ),
        "/dev/null",
        check=False,
    )
    assert proc.returncode != 0
    assert "metrics.serviceMonitor.insecureSkipVerify=true" in proc.stderr
    docs = by_kind(
        render(
            "--set",
            "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.insecureSkipVerify=true",
        )
    )
    endpoint = docs[("ServiceMonitor", "taskfsm-controller")]["spec"]["endpoints"][0]
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
