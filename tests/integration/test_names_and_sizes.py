"""Names and sizes at their limits, end to end on the real control plane (D24; issue 30;
docs/security.md, "Names and sizes").

Names of 1, 63, 64 and 253 characters for Task, Workflow, Function, TaskTemplate,
MediaProcessingEntity, ClusterMediaProcessingEntity and MediaLocation, in namespaces of 1 and
63 characters, and two Tasks whose 253-character names share 252: every Task gets its Job and
Secret with valid labels, a lookup by label finds exactly its Job, the Workflows count exactly
their Tasks, Events are recorded about every object however long its name, an orphaned Job is
collected without touching the Job of the Task that shares its prefix, and deleting the Tasks
leaves no Job or Secret. Then sizes: a Job the API server would refuse fails its Task at once,
with one Event and nothing made.

Regressions (issue 30): a Task named with 64 characters sat in JobPending for ever, retrying a
label the API server refused, with a ReconcileError Event per retry; a Task named with 253
characters got no Event at all and never ran.
"""

from __future__ import annotations

import contextlib
import random
import re
import string
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.api import names
from taskfsm.controllers.workflow.member_tasks import workflow_labels
from taskfsm.kube.errors import NotFound
from taskfsm.kube.resources import BY_KIND, TASKS, WORKFLOWS
from taskfsm.kube.rest import EVENTS, JOBS, SECRETS, Rest
from taskfsm.manifests import jobs
from taskfsm_dev import objects
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.waiting import wait_for
from tests.support.probes import failed_message, failed_reason

LENGTHS = (1, 63, 64, 253)
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def long_name(prefix: str, length: int) -> str:
    """A valid object name of exactly ``length`` characters starting with ``prefix``'s first
    letter (dots and dashes included, as real names have them)."""
    if length == 1:
        return prefix[0]
    text = (prefix + "-media.processing-" * 20)[:length]
    return text if text[-1].isalnum() else text[:-1] + "z"


def valid_label(value: str) -> bool:
    return len(value) <= 63 and LABEL_VALUE.fullmatch(value) is not None


@pytest.fixture
def cluster(api_client: client.ApiClient, crds: list[str]) -> Iterator[dict[str, Any]]:
    """Namespaces of 1 and 63 characters, a controller and a simulated kubelet for all
    namespaces; the namespaces are deleted (in the background) afterwards."""
    core = client.CoreV1Api(api_client)
    made: list[str] = []
    for _ in range(26):  # a free one-letter namespace
        short = random.choice(string.ascii_lowercase)
        with contextlib.suppress(client.ApiException):
            core.create_namespace({"metadata": {"name": short}})
            made.append(short)
            break
    wide = f"w{uuid.uuid4().hex}".ljust(63, "9")
    core.create_namespace({"metadata": {"name": wide}})
    made.append(wide)
    assert [len(n) for n in made] == [1, 63]
    yield {"short": made[0], "wide": made[1]}
    for namespace in made:
        with contextlib.suppress(client.ApiException):
            core.delete_namespace(namespace, propagation_policy="Background")


def create(rest: Rest, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
    res = SECRETS if obj["kind"] == c.KIND_SECRET else BY_KIND[obj["kind"]]
    return rest.create(res, namespace, obj)


def task_key(task: dict[str, Any]) -> str:
    return f"{task['metadata']['namespace']}/{task['metadata']['name']}"


def wait_phase(rest: Rest, namespace: str, name: str, phase: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        task = rest.get(TASKS, namespace, name)
        return task if (task.get("status") or {}).get("phase") == phase else None

    return wait_for(probe, timeout=120, what=f"Task {namespace}/{name[:20]}… {phase}")


def events_about(rest: Rest, namespace: str, name: str) -> list[dict[str, Any]]:
    items = rest.list(EVENTS, namespace).get("items") or []
    return [e for e in items if (e.get("regarding") or {}).get("name") == name]


def test_names_of_every_valid_length_run_end_to_end(
    api_client, cluster, controller_factory, cluster_scoped
):
    rest = Rest(api_client)
    wide, short = cluster["wide"], cluster["short"]
    # --task-phase-events: every Task, however long its name, gets Events written about it.
    controller = controller_factory(namespace=None, task_phase_events=True)
    tasks: list[dict[str, Any]] = []  # (as created) with the namespace the Job runs in
    job_namespaces: dict[str, str] = {}

    with SimulatedKubelet(api_client):
        # In the 63-character namespace: every kind at every length.
        for length in LENGTHS:
            workflow, function = long_name("wf", length), long_name("fn", length)
            template, mpe = long_name("tt", length), long_name("mpe", length)
            location, secret = long_name("loc", length), long_name("creds", length)
            create(rest, wide, objects.secret(secret, {"accessKeyID": "a", "secretAccessKey": "b"}))
            create(rest, wide, objects.s3_location(location, secret_name=secret))
            create(
                rest,
                wide,
                objects.workflow(
                    workflow, media_locations=[objects.location_entry("in", location)]
                ),
            )
            create(rest, wide, objects.function(function))
            create(rest, wide, objects.task_template(template, config={"k": "v"}))
            create(rest, wide, objects.local_mpe(mpe))
            names_here = [long_name("task", length)]
            if length == 253:  # two long names that share all but their last two characters
                names_here += [names_here[0][:-2] + "-1", names_here[0][:-2] + "-2"]
            for name in names_here:
                body = objects.task(
                    name, workflow_name=workflow, function_name=function, mpe_name=mpe
                )
                body["spec"]["taskTemplateRef"] = {"kind": c.KIND_TASK_TEMPLATE, "name": template}
                tasks.append(create(rest, wide, body))
                job_namespaces[task_key(tasks[-1])] = wide
        # In the 1-character namespace: a ClusterMediaProcessingEntity of 253 characters.
        cmpe = long_name(f"cmpe-{short}-{uuid.uuid4().hex[:6]}", 253)
        cluster_scoped.create(objects.local_mpe(cmpe, namespace=short, cluster=True))
        create(rest, short, objects.workflow("w"))
        create(rest, short, objects.function("f"))
        body = objects.task(long_name("short-ns", 253), workflow_name="w", function_name="f")
        body["spec"]["mediaProcessingEntityRef"] = objects.mpe_ref(cmpe, cluster=True)
        tasks.append(create(rest, short, body))
        job_namespaces[task_key(tasks[-1])] = short

        done = {task_key(t): wait_phase(rest, *task_key(t).split("/"), "Succeeded") for t in tasks}

    for key, task in done.items():
        namespace, name = key.split("/")
        where = job_namespaces[key]
        labels = task["metadata"]["labels"]
        assert {k: labels[k] for k in jobs.task_labels(task)} == jobs.task_labels(task)
        assert all(valid_label(v) for v in labels.values())
        job = rest.get(JOBS, where, jobs.job_name(task))
        secret = rest.get(SECRETS, where, jobs.job_name(task))
        for child in (job, secret):
            meta = child["metadata"]
            assert {k: meta["labels"][k] for k in jobs.task_labels(task)} == jobs.task_labels(task)
            full = {k: v for k, v in jobs.task_names(task).items() if len(v) > 63}
            assert {k: (meta.get("annotations") or {}).get(k) for k in full} == full
            assert jobs.task_key_of(child) == key
        # A lookup by label (what kubectl -l does) finds exactly this Task's Job.
        selector = (
            f"{c.LABEL_TASK_NAMESPACE}={namespace},{c.LABEL_TASK_NAME}={names.label_value(name)}"
        )
        found = rest.list(JOBS, where, label_selector=selector)["items"]
        assert [j["metadata"]["uid"] for j in found] == [job["metadata"]["uid"]]
        # Events about every Task, however long its name (the phase path ends in Succeeded).
        assert any(e["reason"] == "Succeeded" for e in events_about(rest, namespace, name))

    # The Workflows count exactly their Tasks through the (cut) workflow labels.
    for length, expected in zip(LENGTHS, (1, 1, 1, 3), strict=True):
        workflow = long_name("wf", length)
        wait_for(
            lambda w=workflow, n=expected: (
                (rest.get(WORKFLOWS, wide, w).get("status") or {}).get("succeeded") == n
            ),
            timeout=60,
            what=f"Workflow of {length} characters counts {expected} succeeded Tasks",
        )
        stored = rest.get(WORKFLOWS, wide, workflow)
        assert stored["status"]["total"] == expected
        assert {k: stored["metadata"]["labels"][k] for k in workflow_labels(wide, workflow)} == (
            workflow_labels(wide, workflow)
        )
        assert events_about(rest, wide, workflow)

    # An orphaned Job is collected, and never the Job of the Task that shares its prefix. The
    # Task goes while no controller runs: one that saw the finalizer stripped would put it
    # back and delete the Job as any Task's deletion does, and nothing would be an orphan.
    stem = long_name("task", 253)[:-2]
    first, second = done[f"{wide}/{stem}-1"], done[f"{wide}/{stem}-2"]
    controller.stop()
    rest.patch(TASKS, wide, first["metadata"]["name"], {"metadata": {"finalizers": None}})
    with contextlib.suppress(NotFound):
        rest.delete(TASKS, wide, first["metadata"]["name"])
    wait_for(
        lambda: _gone(rest, TASKS, wide, first["metadata"]["name"]), timeout=30, what="Task gone"
    )
    controller_factory(namespace=None)
    gone_job = jobs.job_name(first)
    wait_for(lambda: _gone(rest, JOBS, wide, gone_job), timeout=60, what="the orphaned Job gone")
    wait_for(lambda: _gone(rest, SECRETS, wide, gone_job), timeout=60, what="its Secret gone")
    # The Event is recorded after the deletions: wait for it, do not read it once.
    wait_for(
        lambda: any(
            e["reason"] == "OrphanDeleted"
            for e in events_about(rest, wide, first["metadata"]["name"])
        ),
        timeout=60,
        what="an OrphanDeleted Event on the deleted Task",
    )
    kept = jobs.job_name(second)
    assert rest.get(JOBS, wide, kept)["metadata"]["labels"][c.LABEL_TASK_NAME] != (
        names.label_value(first["metadata"]["name"])
    )
    assert rest.get(SECRETS, wide, kept)
    assert rest.get(TASKS, wide, second["metadata"]["name"])["status"]["phase"] == "Succeeded"

    # Deleting the Tasks leaves no Job and no Secret of theirs anywhere.
    for task in tasks:
        with contextlib.suppress(NotFound):
            rest.delete(TASKS, task["metadata"]["namespace"], task["metadata"]["name"])
    for namespace in (wide, short):
        wait_for(
            lambda ns=namespace: not _labelled(rest, JOBS, ns) and not _labelled(rest, SECRETS, ns),
            timeout=90,
            what=f"no task-labelled Job or Secret left in {namespace}",
        )
        wait_for(
            lambda ns=namespace: not rest.list(TASKS, ns)["items"], timeout=60, what="Tasks gone"
        )


def _gone(rest: Rest, res: Any, namespace: str, name: str) -> bool:
    try:
        rest.get(res, namespace, name)
    except NotFound:
        return True
    return False


def _labelled(rest: Rest, res: Any, namespace: str) -> list[dict[str, Any]]:
    return rest.list(res, namespace, label_selector=c.LABEL_TASK_NAME)["items"]


def test_a_mediaprocessingentity_of_253_characters_gets_its_events(
    api_client, engine, controller, namespace
):
    """An MPE refused by policy says so in a Warning Event, whatever the length of its name
    (Events about objects named with 241 characters and more were refused: their name plus
    the suffix exceeded 253)."""
    rest = Rest(api_client)
    name = long_name("refused-mpe", 253)
    engine.create(objects.local_mpe(name, namespace="kube-system"))
    wait_for(
        lambda: any(
            e["reason"] == "NamespaceNotAllowed" for e in events_about(rest, namespace, name)
        ),
        timeout=60,
        what="a NamespaceNotAllowed Event about the MPE",
    )


def test_a_job_beyond_the_api_servers_limits_fails_its_task_once(
    api_client, engine, controller, probe, namespace
):
    """The Function's template has 300,000 bytes of annotations (the API server allows 262,144
    on one object), or a patch adds a label value of 64 characters: the Task fails at once with
    reason JobBeyondLimits and a message naming the field and the limit, one Event, no retry
    and no Job."""
    big = objects.function("big")
    big["spec"]["template"]["metadata"] = {"annotations": {"note": "x" * 300_000}}
    engine.create(big)
    engine.create(objects.function("f"))
    engine.create(objects.workflow("wf"))
    engine.create(objects.local_mpe("m"))
    # The Tasks come after their Function, Workflow and MPE are in the controller's caches: a
    # Task seen first fails its selection once ("not found", a ReconcileError), which is not
    # what this test is about (each kind has its own watch; the 300 kB Function arrives last).
    caches = controller.caches.informers
    wait_for(
        lambda: all(
            caches[kind].get(namespace, name) is not None
            for kind, name in (
                (c.KIND_FUNCTION, "big"),
                (c.KIND_FUNCTION, "f"),
                (c.KIND_WORKFLOW, "wf"),
                (c.KIND_MEDIA_PROCESSING_ENTITY, "m"),
            )
        ),
        timeout=60,
        what="the Functions, Workflow and MPE in the controller's caches",
    )
    engine.create(objects.task("annotated", workflow_name="wf", function_name="big", mpe_name="m"))
    patch = {"spec": {"template": {"metadata": {"labels": {"app": "v" * 64}}}}}
    engine.create(
        objects.task(
            "labelled", workflow_name="wf", function_name="f", mpe_name="m", templatePatches=patch
        )
    )
    annotated = probe.wait_phase("annotated", "Failed")
    assert failed_reason(annotated) == "JobBeyondLimits"
    assert "metadata.annotations are" in failed_message(annotated)
    assert "262144 bytes" in failed_message(annotated)
    labelled = probe.wait_phase("labelled", "Failed")
    assert failed_reason(labelled) == "JobBeyondLimits"
    assert "spec.template.metadata.labels['app']" in failed_message(labelled)
    assert "no more than 63 characters" in failed_message(labelled)
    time.sleep(3)  # a retry loop would show by now: the failure is written once
    for name in ("annotated", "labelled"):
        reasons = probe.event_reasons(name)
        assert reasons.count("Failed") == 1, reasons
        assert "ReconcileError" not in reasons
    assert probe.jobs() == []
    assert probe.secrets() == []
