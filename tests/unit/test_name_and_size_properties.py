"""Every valid name works, and nothing taskfsm writes exceeds an API-server limit (D24; issue 30;
docs/security.md, "Names and sizes").

Property tests over names of every valid length, weighted to the limits (1, 52, 53, 63, 64, 253
characters; namespaces up to 63): the labels, annotations, Job and Secret names and Event names
derived from them are valid by the API server's rules (written out here from its validation
messages, independently of taskfsm's checks), a cut label reads back as exactly the name it
was cut from, and two names that share a long prefix are never confused. Then sizes: metadata
and Jobs at and just beyond the limits, messages and Event notes in bytes.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from machines.conditions import MAX_MESSAGE_BYTES, bounded_message, mark_condition
from taskfsm.api import constants as c
from taskfsm.api import names, server_limits
from taskfsm.controllers.task.inputs import JOB_MAX_BYTES, JobInputs, beyond_limits
from taskfsm.controllers.task.orphans import belongs_to
from taskfsm.controllers.workflow.member_tasks import labelled_workflow, workflow_labels
from taskfsm.kube.events import EventRecorder
from taskfsm.manifests import jobs
from tests.support.examples import examples

# The API server's rules (k8s.io/apimachinery/pkg/util/validation), as its messages state them.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

LIMIT_LENGTHS = (1, 2, 51, 52, 53, 62, 63, 64, 65, 100, 252, 253)
"""Name lengths at and around every limit: the label value (63), the cut's prefix (52), the
Event name's stem (240), a DNS subdomain (253)."""

ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and LABEL_VALUE.fullmatch(value) is not None


def valid_subdomain(value: str) -> bool:
    return 0 < len(value) <= 253 and DNS_SUBDOMAIN.fullmatch(value) is not None


@st.composite
def object_names(
    draw: st.DrawFn, max_length: int = 253, min_length: int = 1, dots: bool = True
) -> str:
    """A DNS subdomain (or, without dots, a DNS label), its length often at a limit."""
    lengths = [n for n in LIMIT_LENGTHS if min_length <= n <= max_length]
    length = draw(st.sampled_from(lengths) | st.integers(min_length, max_length))
    inner = ALNUM + "-" + ("." if dots else "")
    middle = draw(st.text(alphabet=inner, min_size=max(0, length - 2), max_size=max(0, length - 2)))
    edges = draw(st.text(alphabet=ALNUM, min_size=2, max_size=2))
    name = (edges[0] + middle + edges[1])[:length]
    # A dot only between letters or digits.
    name = re.sub(r"(?<=[-.])\.|\.(?=[-.])", "a", name)
    assert valid_subdomain(name), name
    return name


namespaces = object_names(max_length=63, dots=False)


def task_of(namespace: str, name: str, workflow: str, uid: str = "uid-1") -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_TASK,
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {"workflowRef": {"name": workflow}},
    }


FUNCTION = {
    "kind": c.KIND_FUNCTION,
    "metadata": {"name": "f"},
    "spec": {
        "version": "1.0.0",
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
    },
}


def built(task: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Job (as created: with a UID) and Secret taskfsm makes for ``task``."""
    job = jobs.build_job(task=task, function=FUNCTION, task_template=None, namespace="jobs")
    job["metadata"]["uid"] = "job-uid"
    return job, jobs.build_secret(task=task, job=job, payload=b"{}")


# -- names ------------------------------------------------------------------------------------


@given(object_names())
def test_a_name_is_its_own_label_when_it_fits_and_a_valid_cut_label_when_not(name):
    label = names.label_value(name)
    assert valid_label_value(label)
    if len(name) <= 63:
        assert label == name  # D24: exactly as before
    else:
        assert len(label) == 63
        assert label.startswith(name[:52].rstrip("-."))
        assert label.endswith("_" + names.digest(name))


@given(object_names(), st.data())
def test_names_that_share_a_prefix_get_different_labels(name, data):
    """Two different names never get the same label, also when they share the first 52 (or
    more) characters the cut keeps."""
    keep = data.draw(st.integers(min(52, len(name)), len(name)))
    other = (name[:keep] + data.draw(object_names(max_length=max(1, 253 - keep))))[:253]
    assume(valid_subdomain(other) and other != name)
    assert names.label_value(name) != names.label_value(other)


@given(object_names(), object_names())
def test_a_cut_label_reads_back_as_exactly_its_name_and_never_as_another(name, other):
    labels, annotations = names.labels_and_annotations({"k": name})
    meta = {"labels": labels, "annotations": annotations}
    assert names.full_value(meta, "k") == name
    # Another name's annotation next to this label is never believed.
    forged = {"labels": labels, "annotations": {"k": other}}
    assert names.full_value(forged, "k") in ({name, None} if other != name else {name})
    if len(name) > 63:
        assert names.full_value({"labels": labels}, "k") is None  # no annotation: nothing
        assert names.full_value({"labels": labels}, "k", known=name) == name


@given(namespaces, object_names(), object_names())
def test_the_job_and_secret_of_any_task_are_valid_and_name_exactly_their_task(ns, name, wf):
    task = task_of(ns, name, wf)
    job, secret = built(task)
    job_name = job["metadata"]["name"]
    assert len(job_name) <= 63
    assert DNS_LABEL.fullmatch(job_name)
    assert secret["metadata"]["name"] == job_name
    for obj in (job, secret):
        meta = obj["metadata"]
        assert all(valid_label_value(v) for v in meta["labels"].values())
        assert server_limits.metadata_problem(meta, "metadata") == ""
        cut = {k for k, v in jobs.task_names(task).items() if len(v) > 63}
        assert set(meta.get("annotations") or {}) & set(jobs.task_names(task)) == cut
        assert jobs.task_key_of(obj) == f"{ns}/{name}"
        assert jobs.owns(obj, task)
        assert belongs_to(obj, task) or obj is secret  # a Secret is judged with its Job
    assert beyond_limits(JobInputs(job, b"{}")) == ""


@given(namespaces, object_names(min_length=53), st.data())
def test_a_task_whose_long_name_shares_a_prefix_never_owns_anothers_children(ns, name, data):
    other = name[:52] + data.draw(object_names(max_length=201))
    assume(valid_subdomain(other) and other != name)
    mine, theirs = task_of(ns, name, "wf", "uid-1"), task_of(ns, other, "wf", "uid-2")
    for child in built(theirs):
        assert jobs.task_key_of(child) == f"{ns}/{other}"
        assert not jobs.owns(child, mine)
        assert not belongs_to(child, mine)


@given(namespaces, object_names(), object_names())
def test_a_tasks_workflow_labels_name_its_workflow_exactly(ns, name, wf):
    """The labels the controller puts on a Task (cut or not) count it for its Workflow, found
    through ``spec.workflowRef.name`` when cut; the Workflow's own labels are valid."""
    task = task_of(ns, name, wf)
    task["metadata"]["labels"] = jobs.task_labels(task)
    assert labelled_workflow(task) == f"{ns}/{wf}"
    assert all(valid_label_value(v) for v in workflow_labels(ns, wf).values())
    assert all(valid_label_value(v) for v in task["metadata"]["labels"].values())


@given(object_names(min_length=64), object_names())
def test_a_cut_workflow_label_naming_another_workflow_counts_for_none(wf, other):
    assume(other != wf)
    task = task_of("ns", "t", other)  # spec names another Workflow than the (cut) label
    task["metadata"]["labels"] = workflow_labels("ns", wf)
    assert labelled_workflow(task) is None


@given(object_names())
def test_an_event_name_is_a_valid_name_for_every_object_name(name):
    event = names.name_with_suffix(name, "0123456789ab")
    assert valid_subdomain(event)
    if len(name) <= 240:
        assert event == f"{name}.0123456789ab"


class CreatedEvents:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def create(self, res: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return body


@given(object_names(), st.text(min_size=0, max_size=3000))
@settings(max_examples=examples(100))
def test_every_event_recorded_fits_the_api_server(name, note):
    """Regression (issue 30): a Task named with 253 characters got no Event at all (its name
    plus a suffix exceeded 253), and a note of 1,024 characters could be 4,096 bytes."""
    rest = CreatedEvents()
    recorder = EventRecorder(rest, instance="test")  # type: ignore[arg-type]
    task = {"apiVersion": c.API_VERSION, "kind": c.KIND_TASK}
    task["metadata"] = {"name": name, "namespace": "ns", "uid": "u"}
    recorder.record(task, "Warning", "R", note)
    (body,) = rest.bodies
    assert valid_subdomain(body["metadata"]["name"])
    assert len(body["note"].encode()) <= 1024
    assert note.startswith(body["note"])
    assert body["regarding"]["name"] == name


# -- sizes ------------------------------------------------------------------------------------


def test_annotations_at_the_limit_pass_and_one_byte_more_is_refused_naming_field_and_limit():
    at_limit = {"a": "x" * (server_limits.MAX_ANNOTATIONS_BYTES - 1)}
    assert server_limits.metadata_problem({"annotations": at_limit}, "metadata") == ""
    over = {"a": "x" * server_limits.MAX_ANNOTATIONS_BYTES}
    why = server_limits.metadata_problem({"annotations": over}, "metadata")
    assert why.startswith("metadata.annotations are 262145 bytes")
    assert "262144" in why


def test_annotation_size_counts_bytes_not_characters():
    value = "é" * (server_limits.MAX_ANNOTATIONS_BYTES // 2)  # 2 bytes each
    assert server_limits.metadata_problem({"annotations": {"a": value}}, "m") != ""


def test_label_rules_are_those_of_the_api_server():
    ok = {"labels": {"example.com/x": "v", "y": "", "z": "a" * 63}}
    assert server_limits.metadata_problem(ok, "metadata") == ""
    for labels, part in [
        ({"x": "a" * 64}, "metadata.labels['x']"),
        ({"x": "has space"}, "metadata.labels['x']"),
        ({"x": "-a"}, "metadata.labels['x']"),
        ({"Bad_Prefix/x": "v"}, "prefix of key"),
        ({"x" * 64: "v"}, "name part of key"),
        ({"-x": "v"}, "key '-x'"),
    ]:
        assert part in server_limits.metadata_problem({"labels": labels}, "metadata")


def test_template_metadata_and_job_size_are_checked_before_anything_is_made():
    task = task_of("ns", "t", "wf")
    job, _ = built(task)
    job["spec"]["template"]["metadata"] = {"labels": {"app": "x" * 64}}
    why = beyond_limits(JobInputs(job, b""))
    assert "spec.template.metadata.labels['app']" in why
    assert "no more than 63 characters" in why

    job, _ = built(task)
    env = [{"name": f"E{i}", "value": "x" * 1000} for i in range(JOB_MAX_BYTES // 1000)]
    job["spec"]["template"]["spec"]["containers"][0]["env"] = env
    why = beyond_limits(JobInputs(job, b""))
    assert "as JSON; taskfsm makes Jobs of at most 1048576 bytes (1 MiB)" in why


@given(st.text(min_size=0, max_size=20000), st.integers(0, 4096))
def test_cut_utf8_fits_in_bytes_and_is_a_prefix(text, limit):
    cut = server_limits.cut_utf8(text, limit)
    assert len(cut.encode()) <= limit
    assert text.startswith(cut)
    if len(text.encode()) <= limit:
        assert cut == text


@given(st.sampled_from(["m", "é", "😀"]), st.integers(0, 20000))
def test_messages_are_cut_to_the_condition_message_limit_and_stay_stable(char, count):
    text = char * count
    message = bounded_message(text)
    assert len(message.encode()) <= MAX_MESSAGE_BYTES
    assert text.startswith(message)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    first = mark_condition((), "Ready", "False", now=now, reason="R", message=text)
    assert first[0].message == message
    later = datetime(2026, 1, 2, tzinfo=UTC)
    # Marking the same long message again changes nothing (no new lastTransitionTime).
    assert mark_condition(first, "Ready", "False", now=later, reason="R", message=text) == first
