"""Choosing a Task's MediaProcessingEntity and Function against the real API (§3.6).

Each precedence rule of both selections, the multiple-match tie-breaks (D12), kind defaulting
(D13), a missing TaskTemplate as a clear error (D11), the Task spec left untouched (D14), and
selected references being sticky once written to status. Every Function here never starts its
pods, so a Task stays Running and its status shows what was chosen.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.probes import now_rfc3339

TIER = "example.com/tier"


class SeenFirst:
    """Creates through ``inner`` (the Engine or the ClusterScoped tracker); a Task only once the
    controller's caches hold every object created before it. Selection reads those caches, and
    the Task's watch event can reach the controller before an MPE's or a Function's created a
    moment earlier (each kind is its own watch): the newest candidate, still unseen, would lose
    (a clean-clone run picked the older MPE of two)."""

    def __init__(self, inner: Any, controller: Any, created: list[dict[str, Any]]) -> None:
        self.inner, self.controller, self.created = inner, controller, created

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == c.KIND_TASK:
            for each in self.created:
                meta = each["metadata"]
                wait_for(
                    lambda m=meta, k=each["kind"]: self.controller.caches.get(
                        k, m.get("namespace"), m["name"]
                    ),
                    timeout=30,
                    what=f"the controller's cache to hold {each['kind']} {meta['name']}",
                )
        made: dict[str, Any] = self.inner.create(obj)
        self.created.append(made)
        return made

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def created() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def engine(engine, controller, created):
    return SeenFirst(engine, controller, created)


@pytest.fixture
def cluster_scoped(cluster_scoped, controller, created):
    return SeenFirst(cluster_scoped, controller, created)


def chosen(probe, name: str, *, timeout: float = 60) -> tuple[dict[str, Any], dict[str, Any]]:
    """Wait until the Task's status names both its MPE and its Function; return the two refs."""

    def probe_refs():
        status = probe.status(name)
        mpe, fn = status.get("mediaProcessingEntityRef"), status.get("functionRef")
        return (mpe, fn) if mpe and fn else None

    what = f"Task {name} selections (message: {probe.status(name).get('message')!r})"
    return wait_for(probe_refs, timeout=timeout, what=what)


def mpe_ref(name: str, namespace: str | None) -> dict[str, str]:
    ref = {"apiVersion": c.API_VERSION, "name": name}
    if namespace is None:
        return {**ref, "kind": c.KIND_CLUSTER_MEDIA_PROCESSING_ENTITY}
    return {**ref, "kind": c.KIND_MEDIA_PROCESSING_ENTITY, "namespace": namespace}


def fn_ref(name: str, namespace: str | None) -> dict[str, str]:
    ref = {"apiVersion": c.API_VERSION, "name": name}
    if namespace is None:
        return {**ref, "kind": c.KIND_CLUSTER_FUNCTION}
    return {**ref, "kind": c.KIND_FUNCTION, "namespace": namespace}


def fn(name: str, **kwargs: Any) -> dict[str, Any]:
    return objects.never_starting(objects.function(name, **kwargs))


def wait_next_second(created: dict[str, Any]) -> None:
    """Wait until the clock is past ``created``'s creationTimestamp (second precision)."""
    stamp = created["metadata"]["creationTimestamp"]
    wait_for(lambda: now_rfc3339() > stamp, timeout=5, what="the next second")


def task(name: str, **spec: Any) -> dict[str, Any]:
    return objects.task(name, workflow_name="wf", **spec)


# -- MediaProcessingEntity precedence ----------------------------------------------------------


def test_mpe_ref_wins_over_selector_template_and_default(engine, controller, probe, namespace):
    """spec.mediaProcessingEntityRef is used even when a selector, a TaskTemplate and a default
    would each choose another MPE."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.local_mpe("by-ref"))
    engine.create(objects.labelled(objects.local_mpe("by-selector"), **{TIER: "gold"}))
    engine.create(objects.local_mpe("by-template"))
    engine.create(objects.default_mpe(objects.local_mpe("by-default")))
    engine.create(
        objects.task_template("tt", mediaProcessingEntityRef=objects.mpe_ref("by-template"))
    )
    engine.create(
        task(
            "t",
            function_name="f",
            mpe_name="by-ref",
            mediaProcessingEntitySelector={"matchLabels": {TIER: "gold"}},
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
        )
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("by-ref", namespace)


def test_mpe_selector_wins_over_task_template_and_default(engine, controller, probe, namespace):
    """spec.mediaProcessingEntitySelector comes before the TaskTemplate and the defaults."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.labelled(objects.local_mpe("by-selector"), **{TIER: "gold"}))
    engine.create(objects.local_mpe("by-template"))
    engine.create(objects.default_mpe(objects.local_mpe("by-default")))
    engine.create(
        objects.task_template("tt", mediaProcessingEntityRef=objects.mpe_ref("by-template"))
    )
    engine.create(
        task(
            "t",
            function_name="f",
            mediaProcessingEntitySelector={"matchLabels": {TIER: "gold"}},
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
        )
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("by-selector", namespace)


def test_mpe_selector_without_match_falls_through_to_task_template(
    engine, controller, probe, namespace
):
    """A Task selector matching nothing is skipped; the TaskTemplate's ref decides."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.local_mpe("by-template"))
    engine.create(objects.default_mpe(objects.local_mpe("by-default")))
    engine.create(
        objects.task_template("tt", mediaProcessingEntityRef=objects.mpe_ref("by-template"))
    )
    engine.create(
        task(
            "t",
            function_name="f",
            mediaProcessingEntitySelector={"matchLabels": {TIER: "nothing-has-this"}},
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
        )
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("by-template", namespace)


def test_task_template_mpe_ref_wins_over_its_selector(engine, controller, probe, namespace):
    """Within the TaskTemplate, mediaProcessingEntityRef comes before its selector."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.local_mpe("tt-ref"))
    engine.create(objects.labelled(objects.local_mpe("tt-selector"), **{TIER: "gold"}))
    engine.create(
        objects.task_template(
            "tt",
            mediaProcessingEntityRef=objects.mpe_ref("tt-ref"),
            mediaProcessingEntitySelector={"matchLabels": {TIER: "gold"}},
        )
    )
    engine.create(
        task("t", function_name="f", taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"})
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("tt-ref", namespace)


def test_task_template_mpe_selector_wins_over_default(engine, controller, probe, namespace):
    """The TaskTemplate's selector is used before any default MediaProcessingEntity."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.labelled(objects.local_mpe("tt-selector"), **{TIER: "gold"}))
    engine.create(objects.default_mpe(objects.local_mpe("by-default")))
    engine.create(
        objects.task_template("tt", mediaProcessingEntitySelector={"matchLabels": {TIER: "gold"}})
    )
    engine.create(
        task("t", function_name="f", taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"})
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("tt-selector", namespace)


def test_d1_namespaced_default_mpe_is_selected_before_cluster_default(
    engine, controller, probe, namespace, cluster_scoped
):
    """D1: with no ref or selector, the namespace's default MPE is chosen (and the Task runs),
    even when a cluster-wide default exists."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    cluster_scoped.create(
        objects.default_mpe(
            objects.local_mpe(f"cluster-default-{namespace}", cluster=True, namespace=namespace)
        )
    )
    engine.create(objects.default_mpe(objects.local_mpe("ns-default")))
    engine.create(objects.local_mpe("not-default"))
    # Selection reads the controller's cache and is sticky: a Task created before the controller
    # has seen the namespace's default would rightly get the cluster default.
    probe.wait_mpe_ready("ns-default")
    engine.create(task("t", function_name="f"))
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("ns-default", namespace)
    probe.wait_phase("t", "Running")


def test_d1_cluster_default_mpe_is_selected_when_namespace_has_none(
    engine, controller, probe, namespace, cluster_scoped
):
    """D1: without a namespaced default, the cluster-wide default is chosen and the Task runs."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    name = f"cluster-default-{namespace}"
    cluster_scoped.create(
        objects.default_mpe(objects.local_mpe(name, cluster=True, namespace=namespace))
    )
    engine.create(objects.local_mpe("not-default"))
    engine.create(task("t", function_name="f"))
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref(name, None)
    probe.wait_phase("t", "Running")
    assert [j["metadata"]["namespace"] for j in probe.jobs()] == [namespace]


def test_d12_newest_default_mpe_wins(engine, controller, probe, namespace):
    """D12: of several namespaced defaults the newest creationTimestamp is chosen."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    older = engine.create(objects.default_mpe(objects.local_mpe("a-older")))
    wait_next_second(older)
    engine.create(objects.default_mpe(objects.local_mpe("b-newer")))
    engine.create(task("t", function_name="f"))
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("b-newer", namespace)


def test_d12_selector_matching_several_mpes_picks_the_newest(engine, controller, probe, namespace):
    """D12: a selector matching several MPEs is no error; the newest one is chosen."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    older = engine.create(objects.labelled(objects.local_mpe("z-older"), **{TIER: "gold"}))
    wait_next_second(older)
    engine.create(objects.labelled(objects.local_mpe("a-newer"), **{TIER: "gold"}))
    engine.create(
        task("t", function_name="f", mediaProcessingEntitySelector={"matchLabels": {TIER: "gold"}})
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("a-newer", namespace)


def test_mpe_selector_prefers_namespaced_kind_over_cluster_kind(
    engine, controller, probe, namespace, cluster_scoped
):
    """A selector matching an MPE in the namespace never falls through to a ClusterMPE,
    even a newer one; matchExpressions work like in Kubernetes."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    older = engine.create(objects.labelled(objects.local_mpe("ns-gold"), **{TIER: "gold"}))
    wait_next_second(older)
    cluster_scoped.create(
        objects.labelled(
            objects.local_mpe(f"cl-gold-{namespace}", cluster=True, namespace=namespace),
            **{TIER: "gold"},
        )
    )
    selector = {"matchExpressions": [{"key": TIER, "operator": "In", "values": ["gold", "silver"]}]}
    engine.create(task("t", function_name="f", mediaProcessingEntitySelector=selector))
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref("ns-gold", namespace)


def test_mpe_selector_falls_back_to_cluster_kind(
    engine, controller, probe, namespace, cluster_scoped
):
    """A selector with no namespaced match chooses a matching ClusterMediaProcessingEntity."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    name = f"cl-gold-{namespace}"
    cluster_scoped.create(
        objects.labelled(
            objects.local_mpe(name, cluster=True, namespace=namespace), **{TIER: namespace}
        )
    )
    engine.create(objects.default_mpe(objects.local_mpe("ns-default")))
    engine.create(
        task(
            "t", function_name="f", mediaProcessingEntitySelector={"matchLabels": {TIER: namespace}}
        )
    )
    mpe, _ = chosen(probe, "t")
    assert mpe == mpe_ref(name, None)


def test_no_mpe_is_a_clear_error(engine, controller, probe):
    """Without ref, selector match or default, the Task stays Initializing with a message
    saying what was tried."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.local_mpe("not-default"))
    engine.create(task("t", function_name="f"))
    task_obj = probe.wait_message("t", "failed to reconcile MediaProcessingEntity")
    assert task_obj["status"]["phase"] == "Initializing"
    assert c.ANNOTATION_IS_DEFAULT_MEDIA_PROCESSING_ENTITY in task_obj["status"]["message"]
    assert "mediaProcessingEntityRef" not in task_obj["status"]


# test_mpe_ref_of_wrong_kind_is_a_clear_error: such a Task is refused at admission now (CEL
# rules); the controller's message for one stored before them is in test_without_admission_rules.py.


def test_malformed_selector_is_a_clear_error(engine, controller, probe):
    """A selector with an unknown operator names the field and the operator."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.default_mpe(objects.local_mpe("m")))
    selector = {"matchExpressions": [{"key": TIER, "operator": "Near", "values": ["x"]}]}
    engine.create(task("t", function_name="f", mediaProcessingEntitySelector=selector))
    task_obj = probe.wait_message(
        "t", "spec.mediaProcessingEntitySelector.matchExpressions[0].operator"
    )
    assert "'Near'" in task_obj["status"]["message"]


# -- Function precedence -----------------------------------------------------------------------


def test_function_ref_wins_over_selector_and_template(engine, controller, probe, namespace):
    """spec.functionRef is used even when a selector and a TaskTemplate would choose others."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("by-ref"))
    engine.create(fn("by-selector", labels={TIER: "gold"}))
    engine.create(fn("by-template"))
    engine.create(objects.task_template("tt", functionRef=objects.function_ref("by-template")))
    engine.create(
        task(
            "t",
            mpe_name="m",
            function_name="by-ref",
            functionSelector={"matchLabels": {TIER: "gold"}},
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
        )
    )
    _, function = chosen(probe, "t")
    assert function == fn_ref("by-ref", namespace)


def test_function_selector_wins_over_template(engine, controller, probe, namespace):
    """spec.functionSelector comes before the TaskTemplate's functionRef."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("by-selector", labels={TIER: "gold"}))
    engine.create(fn("by-template"))
    engine.create(objects.task_template("tt", functionRef=objects.function_ref("by-template")))
    engine.create(
        task(
            "t",
            mpe_name="m",
            functionSelector={"matchLabels": {TIER: "gold"}},
            taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"},
        )
    )
    _, function = chosen(probe, "t")
    assert function == fn_ref("by-selector", namespace)


def test_task_template_function_ref_then_selector(
    engine, controller, probe, namespace, cluster_scoped
):
    """The TaskTemplate's functionRef wins over its functionSelector; a ClusterTaskTemplate works
    like a TaskTemplate."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("tt-ref"))
    engine.create(fn("tt-selector", labels={TIER: "gold"}))
    ctt = f"ctt-{namespace}"
    cluster_scoped.create(
        objects.task_template(
            ctt,
            cluster=True,
            functionRef=objects.function_ref("tt-ref"),
            functionSelector={"matchLabels": {TIER: "gold"}},
        )
    )
    engine.create(objects.task_template("tt", functionSelector={"matchLabels": {TIER: "gold"}}))
    engine.create(
        task(
            "t1", mpe_name="m", taskTemplateRef={"kind": c.KIND_CLUSTER_TASK_TEMPLATE, "name": ctt}
        )
    )
    engine.create(
        task("t2", mpe_name="m", taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"})
    )
    assert chosen(probe, "t1")[1] == fn_ref("tt-ref", namespace)
    assert chosen(probe, "t2")[1] == fn_ref("tt-selector", namespace)


def test_d12_function_selector_picks_highest_semver(engine, controller, probe, namespace):
    """D12: a selector matching several Functions chooses the highest SemVer version (1.10.0 >
    1.9.0 > 1.10.0-rc.1), not the newest object or the first name."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("a-1-9", version="1.9.0", labels={TIER: "gold"}))
    engine.create(fn("b-1-10", version="1.10.0", labels={TIER: "gold"}))
    engine.create(fn("c-rc", version="1.10.0-rc.1", labels={TIER: "gold"}))
    engine.create(task("t", mpe_name="m", functionSelector={"matchLabels": {TIER: "gold"}}))
    _, function = chosen(probe, "t")
    assert function == fn_ref("b-1-10", namespace)


def test_function_selector_prefers_namespaced_over_cluster_function(
    engine, controller, probe, namespace, cluster_scoped
):
    """A namespaced Function match wins over a ClusterFunction with a higher version; without a
    namespaced match the ClusterFunction is chosen."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("ns-fn", version="1.0.0", labels={TIER: "gold"}))
    cl = f"cl-fn-{namespace}"
    cluster_scoped.create(
        fn(cl, version="9.0.0", cluster=True, labels={TIER: "gold", "ns": namespace})
    )
    engine.create(task("t1", mpe_name="m", functionSelector={"matchLabels": {TIER: "gold"}}))
    engine.create(task("t2", mpe_name="m", functionSelector={"matchLabels": {"ns": namespace}}))
    assert chosen(probe, "t1")[1] == fn_ref("ns-fn", namespace)
    assert chosen(probe, "t2")[1] == fn_ref(cl, None)


def test_no_function_is_a_clear_error(engine, controller, probe):
    """Without functionRef or a selector match the Task stays Initializing with
    'failed to reconcile Function'."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("f", labels={TIER: "gold"}))
    engine.create(task("t", mpe_name="m", functionSelector={"matchLabels": {TIER: "silver"}}))
    task_obj = probe.wait_message("t", "failed to reconcile Function")
    assert task_obj["status"]["phase"] == "Initializing"


def test_function_ref_to_missing_function_is_a_clear_error(engine, controller, probe):
    """A functionRef naming no Function reports Kubernetes' NotFound wording."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(task("t", mpe_name="m", function_name="nope"))
    probe.wait_message("t", 'functions.engine.nagare.media "nope" not found')


# -- D13 kind defaulting, D11 TaskTemplate NotFound, D14 no mutation ---------------------------


def test_d13_function_ref_without_kind_prefers_function_then_cluster_function(
    engine, controller, probe, namespace, cluster_scoped
):
    """D13: a functionRef without kind names the Function when one exists in the namespace,
    else the ClusterFunction of that name."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    shared = f"shared-{namespace}"
    only_cluster = f"only-cluster-{namespace}"
    engine.create(fn(shared))
    cluster_scoped.create(fn(shared, cluster=True))
    cluster_scoped.create(fn(only_cluster, cluster=True))
    engine.create(task("t1", mpe_name="m", functionRef=objects.function_ref(shared, kind=None)))
    engine.create(
        task("t2", mpe_name="m", functionRef=objects.function_ref(only_cluster, kind=None))
    )
    assert chosen(probe, "t1")[1] == fn_ref(shared, namespace)
    assert chosen(probe, "t2")[1] == fn_ref(only_cluster, None)
    probe.wait_phase("t2", "Running")


def test_d13_mpe_ref_without_kind_is_defaulted(
    engine, controller, probe, namespace, cluster_scoped
):
    """D13: a mediaProcessingEntityRef without kind names the namespaced MPE if it exists, else
    the ClusterMediaProcessingEntity."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(objects.local_mpe("ns-mpe"))
    cl = f"cl-mpe-{namespace}"
    cluster_scoped.create(objects.local_mpe(cl, cluster=True, namespace=namespace))
    engine.create(
        task("t1", function_name="f", mediaProcessingEntityRef=objects.mpe_ref("ns-mpe", kind=None))
    )
    engine.create(
        task("t2", function_name="f", mediaProcessingEntityRef=objects.mpe_ref(cl, kind=None))
    )
    assert chosen(probe, "t1")[0] == mpe_ref("ns-mpe", namespace)
    assert chosen(probe, "t2")[0] == mpe_ref(cl, None)


def test_d13_task_template_ref_without_kind_is_defaulted(
    engine, controller, probe, namespace, cluster_scoped
):
    """D13: a taskTemplateRef without kind finds a ClusterTaskTemplate when the namespace has no
    TaskTemplate of that name."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("f"))
    ctt = f"ctt-{namespace}"
    cluster_scoped.create(
        objects.task_template(ctt, cluster=True, functionRef=objects.function_ref("f"))
    )
    engine.create(task("t", mpe_name="m", taskTemplateRef={"name": ctt}))
    assert chosen(probe, "t")[1] == fn_ref("f", namespace)
    probe.wait_phase("t", "Running")


def test_d11_missing_task_template_is_a_clear_error_then_recovers(
    engine, controller, probe, namespace
):
    """D11: a taskTemplateRef naming no TaskTemplate stops selection with Kubernetes' NotFound
    text (it is not silently skipped); creating the TaskTemplate lets the Task proceed."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("f"))
    engine.create(
        task("t", mpe_name="m", taskTemplateRef={"kind": c.KIND_TASK_TEMPLATE, "name": "tt"})
    )
    task_obj = probe.wait_message("t", 'tasktemplates.engine.nagare.media "tt" not found')
    assert task_obj["status"]["phase"] == "Initializing"
    assert "functionRef" not in task_obj["status"]
    engine.create(objects.task_template("tt", functionRef=objects.function_ref("f")))
    probe.wait_phase("t", "Running")
    assert probe.status("t")["message"] == ""
    assert probe.status("t")["functionRef"] == fn_ref("f", namespace)


def test_d14_task_spec_is_not_mutated(engine, controller, probe, namespace):
    """D14: refs without kind or apiVersion are resolved on a copy: the stored spec and its
    generation stay exactly as the user wrote them."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    engine.create(fn("f"))
    engine.create(objects.task_template("tt", functionRef={"name": "f"}))
    created = engine.create(
        task(
            "t",
            mediaProcessingEntityRef={"name": "m"},
            taskTemplateRef={"name": "tt"},
        )
    )
    probe.wait_phase("t", "Running")
    stored = probe.task("t")
    assert stored["spec"] == created["spec"]
    assert stored["metadata"]["generation"] == created["metadata"]["generation"] == 1


# -- sticky selections -------------------------------------------------------------------------


def test_selected_refs_are_sticky(engine, controller, probe, namespace, api_client):
    """Once written to status, the chosen MPE and Function stay, even when a retry happens after
    the selector would now match other objects."""
    engine.create(
        objects.workflow("wf", media_locations=[objects.location_entry("store", "store")])
    )
    engine.create(
        objects.s3_location("store", secret_name="creds")
    )  # Secret missing: JobPending waits
    engine.create(fn("f-old", version="1.0.0", labels={TIER: "gold"}))
    engine.create(objects.labelled(objects.local_mpe("m-old"), **{TIER: "gold"}))
    engine.create(
        task(
            "t",
            functionSelector={"matchLabels": {TIER: "gold"}},
            mediaProcessingEntitySelector={"matchLabels": {TIER: "gold"}},
        )
    )
    mpe, function = chosen(probe, "t")
    probe.wait_message("t", 'secrets "creds" not found')
    assert probe.phase("t") == "JobPending"
    client.CoreV1Api(api_client).create_namespaced_secret(
        namespace, objects.secret("creds", {"accessKeyID": "AKIA", "secretAccessKey": "s3cr3t"})
    )
    # Now better matches exist: a newer MPE and a higher Function version (whose creation also
    # requeues the waiting Task).
    engine.create(objects.labelled(objects.local_mpe("m-new"), **{TIER: "gold"}))
    engine.create(fn("f-new", version="2.0.0", labels={TIER: "gold"}))
    probe.wait_phase("t", "Running")
    status = probe.status("t")
    assert status["mediaProcessingEntityRef"] == mpe == mpe_ref("m-old", namespace)
    assert status["functionRef"] == function == fn_ref("f-old", namespace)


def test_default_mpe_created_later_is_picked_up(engine, controller, probe, namespace):
    """A Task waiting for any MediaProcessingEntity proceeds once a default one is created."""
    engine.create(objects.workflow("wf"))
    engine.create(fn("f"))
    engine.create(task("t", function_name="f"))
    probe.wait_message("t", "failed to reconcile MediaProcessingEntity")
    engine.create(objects.default_mpe(objects.local_mpe("late-default")))
    mpe, _ = chosen(probe, "t", timeout=30)
    assert mpe == mpe_ref("late-default", namespace)
