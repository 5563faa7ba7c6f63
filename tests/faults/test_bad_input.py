"""Bad input: objects the CRD schemas accept but that make no sense.

Hypothesis draws batches of broken cases — references to nothing, junk label selectors, Function
templates and ``templatePatches`` with random JSON grafted into real Job templates (both are
free-form in the schema), TaskTemplates that do the same, MediaLocations whose credentials are
missing or incomplete, remote MediaProcessingEntities with unusable kubeconfigs — and creates
each next to a good Task, with one ``taskfsm run`` process for the whole test. Then:

* the controller never crashes (the process runs throughout, its log has no traceback);
* each bad Task ends either in a terminal phase (the input was harmless after all, or the Job
  ran and failed) or with a clear ``status.message``: not empty, not Python's own words for an
  unexpected exception, naming what is wrong, and never showing a Secret value;
* the good Tasks all succeed with exactly one Job.

Bounded: ``EXAMPLES`` batches of at most ``MAX_CASES`` cases, derandomised (the same inputs on
every run; ``TASKFSM_FUZZ_EXAMPLES``/``TASKFSM_FUZZ_RANDOM=1`` explore more), no shrinking.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from taskfsm.api import constants as c
from taskfsm.kube.errors import KubeError
from taskfsm.kube.resources import BY_KIND, TASKS
from taskfsm.kube.rest import SECRETS, Rest
from taskfsm_dev import objects
from taskfsm_dev.objects import kubeconfig_secret, remote_mpe

EXAMPLES = int(os.environ.get("TASKFSM_FUZZ_EXAMPLES", "6"))
MAX_CASES = 8
SETTLE_SECONDS = 45
SECRET_VALUE = "s3cr3t-VALUE-never-shown"

#: Python's own wording for an exception nobody meant to raise: never a clear status message.
RAW_PYTHON = re.compile(
    r"object has no attribute|'NoneType'|unhashable type|indices must be|is not subscriptable|"
    r"not iterable|argument of type|can only concatenate|unsupported operand|object is not callable|"
    r"expected string or bytes|takes \d+ positional|missing \d+ required|^'[^']*'$|internal error|Traceback"
)

# -- strategies ---------------------------------------------------------------------------------

#: Keys of real Job templates (and patch directives), so random JSON lands where the merge looks.
JOB_KEYS = (
    "spec",
    "template",
    "metadata",
    "containers",
    "initContainers",
    "name",
    "image",
    "volumes",
    "volumeMounts",
    "mountPath",
    "env",
    "value",
    "ports",
    "containerPort",
    "restartPolicy",
    "backoffLimit",
    "labels",
    "annotations",
    "selector",
    "command",
    "args",
    "secret",
    "secretName",
    "$patch",
    "$retainKeys",
    "$setElementOrder/containers",
    "$deleteFromPrimitiveList/args",
    "parallelism",
    "completions",
    "managedBy",
)
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.sampled_from(
        ["", "x", "delete", "replace", "merge", "Always", "Never", "/", c.TASK_DATA_VOLUME_NAME]
    ),
    st.text(alphabet="abc-/.$ ", max_size=6),
)
keys = st.one_of(st.sampled_from(JOB_KEYS), st.text(alphabet="abcz$/", min_size=1, max_size=5))
json_value = st.recursive(
    leaf,
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(keys, kids, max_size=3)),
    max_leaves=10,
)


def valid_template() -> dict[str, Any]:
    return copy.deepcopy(objects.function("x")["spec"]["template"])


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def grafted(draw: st.DrawFn, base: dict[str, Any] | None = None) -> Any:
    """A copy of ``base`` (a valid Job template) with random JSON grafted in 1-3 places, a key
    removed, or a value replaced: mostly still JSON objects, mostly wrong."""
    value = copy.deepcopy(base if base is not None else valid_template())
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(value) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = value
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = draw(json_value)
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(keys)] = draw(json_value)
        else:
            parent[path[-1]] = draw(json_value)
    return value if isinstance(value, dict) else {"spec": value}


@dataclass
class Case:
    """One broken input: objects to create first, the Task's spec changes, and the words one
    of which a clear message must contain."""

    kind: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    task: dict[str, Any] = field(default_factory=dict)
    workflow: dict[str, Any] = field(default_factory=dict)
    hints: tuple[str, ...] = ()


BATCH = "@@"
"""Placeholder in generated names, replaced by the example's number (names are unique per run)."""


def _name(draw: st.DrawFn) -> str:
    return (
        "n"
        + draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=3, max_size=6))
        + "-"
        + BATCH
    )


def _numbered(value: Any, n: int) -> Any:
    if isinstance(value, str):
        return value.replace(BATCH, f"b{n}")
    if isinstance(value, dict):
        return {_numbered(k, n): _numbered(v, n) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_numbered(v, n) for v in value)
    return value


@st.composite
def bad_case(draw: st.DrawFn) -> Case:
    kind = draw(
        st.sampled_from(
            [
                "missing-function",
                "missing-mpe",
                "missing-template",
                "missing-workflow",
                "junk-function-selector",
                "junk-mpe-selector",
                "junk-function-template",
                "junk-patches",
                "junk-task-template",
                "bad-media-location",
                "bad-remote-mpe",
            ]
        )
    )
    name = _name(draw)
    # A kind the field does not allow is refused at admission (the CRDs' CEL rules,
    # tests/integration/test_admission_rules.py); the controller's message for one stored before
    # the rules: tests/integration/test_without_admission_rules.py.
    ref_kind = draw(st.sampled_from([None, "Function", "ClusterFunction"]))
    if kind == "missing-function":
        return Case(
            kind,
            task={"functionRef": objects.function_ref(name, kind=ref_kind)},
            hints=(name,),
        )
    if kind == "missing-mpe":
        mpe_kind = draw(
            st.sampled_from([None, "MediaProcessingEntity", "ClusterMediaProcessingEntity"])
        )
        return Case(
            kind,
            task={"mediaProcessingEntityRef": objects.mpe_ref(name, kind=mpe_kind)},
            hints=(name,),
        )
    if kind == "missing-template":
        return Case(
            kind,
            task={
                "taskTemplateRef": {
                    "name": name,
                    "kind": draw(st.sampled_from(["TaskTemplate", "ClusterTaskTemplate"])),
                }
            },
            hints=(name,),
        )
    if kind == "missing-workflow":
        return Case(kind, task={"workflowRef": {"name": name}}, hints=(name,))
    if kind == "junk-function-selector":
        selector = draw(
            st.one_of(
                json_value.filter(lambda v: isinstance(v, dict)),
                st.builds(lambda v: {"matchExpressions": [v]}, json_value),
                st.builds(lambda v: {"matchLabels": v}, json_value),
            )
        )
        return Case(
            kind,
            task={"functionRef": None, "functionSelector": selector},
            hints=("functionSelector", "Function", "selector"),
        )
    if kind == "junk-mpe-selector":
        selector = draw(
            st.one_of(
                json_value.filter(lambda v: isinstance(v, dict)),
                st.builds(lambda v: {"matchExpressions": [v]}, json_value),
                st.builds(lambda v: {"matchLabels": v}, json_value),
            )
        )
        return Case(
            kind,
            task={"mediaProcessingEntityRef": None, "mediaProcessingEntitySelector": selector},
            hints=("mediaProcessingEntitySelector", "MediaProcessingEntity", "selector"),
        )
    if kind == "junk-function-template":
        function = objects.function(name)
        function["spec"]["template"] = draw(grafted(function["spec"]["template"]))
        return Case(
            kind,
            objects=[function],
            task={"functionRef": objects.function_ref(name)},
            hints=(name, "template", "Job", "spec"),
        )
    if kind == "junk-patches":
        patch = draw(st.one_of(grafted(), json_value.filter(lambda v: isinstance(v, dict))))
        return Case(
            kind,
            task={"templatePatches": patch},
            hints=("templatePatches", "template", "Job", "spec", "patch"),
        )
    if kind == "junk-task-template":
        spec = {
            "templatePatches": draw(
                st.one_of(grafted(), json_value.filter(lambda v: isinstance(v, dict)))
            )
        }
        if draw(st.booleans()):
            spec["functionSelector"] = draw(json_value.filter(lambda v: isinstance(v, dict)))
        template = objects.task_template(name, **spec)
        return Case(
            kind,
            objects=[template],
            task={"taskTemplateRef": {"name": name, "kind": "TaskTemplate"}},
            hints=(name, "templatePatches", "template", "Job", "spec", "selector"),
        )
    if kind == "bad-media-location":
        problem = draw(
            st.sampled_from(
                ["no-secret", "no-key", "missing-keys", "no-location", "cluster-no-namespace"]
            )
        )
        secret_name = f"{name}-creds"
        objs: list[dict[str, Any]] = []
        location_kind = c.KIND_MEDIA_LOCATION
        if problem == "no-location":
            pass
        elif problem == "cluster-no-namespace":
            location_kind = c.KIND_CLUSTER_MEDIA_LOCATION
            objs.append(objects.s3_location(name, secret_name=secret_name, cluster=True))
        else:
            key = "absent" if problem == "no-key" else None
            objs.append(objects.s3_location(name, secret_name=secret_name, key=key))
            if problem != "no-secret":
                data = (
                    {"unrelated": SECRET_VALUE}
                    if problem == "missing-keys"
                    else {"accessKeyID": SECRET_VALUE, "secretAccessKey": SECRET_VALUE}
                )
                objs.append(objects.secret(secret_name, data))
        entry = objects.location_entry("media", name, kind=location_kind)
        return Case(
            kind,
            objects=objs,
            workflow={"mediaLocations": [entry]},
            hints=(name, secret_name, "MediaLocation", "secret", "Secret"),
        )
    # bad-remote-mpe
    junk = draw(st.sampled_from(["no-secret", "junk-kubeconfig", "no-server"]))
    secret_name = f"{name}-kubeconfig"
    objs = [remote_mpe(name, secret_name)]
    if junk == "junk-kubeconfig":
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret_name},
                "stringData": {"kubeconfig": "{not: [yaml"},
            }
        )
    elif junk == "no-server":
        objs.append(
            kubeconfig_secret(
                secret_name,
                {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []},
            )
        )
    return Case(
        kind,
        objects=objs,
        task={"mediaProcessingEntityRef": objects.mpe_ref(name)},
        hints=(name, "MediaProcessingEntity"),
    )


# -- the run ------------------------------------------------------------------------------------

_counter = itertools.count()


class Batch:
    """Creates one example's objects with unique names and judges its outcome."""

    def __init__(self, rest: Rest, namespace: str, cases: list[Case]) -> None:
        self.n = next(_counter)
        self.rest, self.namespace = rest, namespace
        self.cases = [
            Case(
                c_.kind,
                _numbered(c_.objects, self.n),
                _numbered(c_.task, self.n),
                _numbered(c_.workflow, self.n),
                _numbered(c_.hints, self.n),
            )
            for c_ in cases
        ]
        self.bad: dict[str, Case] = {}
        self.good: list[str] = []
        self.cluster_objects: list[tuple[Any, str]] = []
        self.seen: dict[str, str] = {}

    def _create(self, obj: dict[str, Any]) -> None:
        res = BY_KIND.get(obj["kind"]) or SECRETS
        created = self.rest.create(res, self.namespace if res.namespaced else None, obj)
        if not res.namespaced:
            self.cluster_objects.append((res, created["metadata"]["name"]))

    def create(self) -> None:
        for i, case in enumerate(self.cases):
            for obj in case.objects:
                self._create(copy.deepcopy(obj))
            task_name = f"bad-{self.n}-{i}-{case.kind}"
            workflow = objects.workflow(f"wf-{task_name}", **case.workflow)
            self._create(workflow)
            task = objects.task(
                task_name,
                workflow_name=workflow["metadata"]["name"],
                function_name="ok",
                mpe_name="local",
            )
            for key, value in case.task.items():
                if value is None:
                    task["spec"].pop(key, None)
                else:
                    task["spec"][key] = value
            self._create(task)
            self.bad[task_name] = case
            good = f"good-{self.n}-{i}"
            self._create(objects.workflow(f"wf-{good}"))
            self._create(
                objects.task(good, workflow_name=f"wf-{good}", function_name="ok", mpe_name="local")
            )
            self.good.append(good)

    def verdicts(self) -> tuple[list[str], bool]:
        """(problems, settled): settled once every Task is terminal or has a message."""
        tasks = {t["metadata"]["name"]: t for t in self.rest.list(TASKS, self.namespace)["items"]}
        problems, settled = [], True
        for name in self.good:
            status = (tasks.get(name) or {}).get("status") or {}
            if status.get("phase") != "Succeeded":
                settled = settled and status.get("phase") != "Failed"
                problems.append(
                    f"good Task {name}: phase {status.get('phase')!r}, message {status.get('message')!r}"
                )
        for name, case in self.bad.items():
            status = (tasks.get(name) or {}).get("status") or {}
            phase, message = status.get("phase") or "", status.get("message") or ""
            self.seen[name] = f"{phase or '-'}: {message}"
            if phase in ("Succeeded", "Failed") and not message:
                continue  # harmless after all, or a Job that ran and failed: a normal outcome
            if not message:
                settled = False
                problems.append(f"{name} ({case.kind}): no message in phase {phase!r}")
                continue
            if RAW_PYTHON.search(message):
                problems.append(f"{name} ({case.kind}): unclear message {message!r}")
            elif case.hints and not any(h.lower() in message.lower() for h in case.hints):
                problems.append(
                    f"{name} ({case.kind}): message {message!r} names none of {case.hints}"
                )
            if SECRET_VALUE in message:
                problems.append(f"{name} ({case.kind}): message shows a Secret value")
        return problems, settled

    def cleanup(self) -> None:
        for res, name in self.cluster_objects:
            with contextlib.suppress(KubeError):
                self.rest.delete(res, None, name)


@pytest.fixture
def fuzz_controller(fleet, faults_kubelet, controller_process):
    """One controller process for all examples; the Fleet provides ``local`` and ``ok``."""
    proc = controller_process()
    proc.start()
    return proc


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("TASKFSM_FUZZ_RANDOM") != "1",
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
    database=None,
)
@given(cases=st.lists(bad_case(), min_size=3, max_size=MAX_CASES))
def test_bad_input_gets_a_clear_message_and_harms_nothing_else(
    cases, fuzz_controller, faults_api, faults_namespace
):
    batch = Batch(Rest(faults_api), faults_namespace, cases)
    try:
        batch.create()
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            problems, settled = batch.verdicts()
            if (
                (settled and not problems)
                or time.monotonic() >= deadline
                or not fuzz_controller.running
            ):
                break
            time.sleep(0.5)
        time.sleep(1.0)  # a message may still be refined by the next pass: judge the latest
        problems, _ = batch.verdicts()
    finally:
        batch.cleanup()
    for name, outcome in batch.seen.items():
        print(f"{name}: {outcome}")
    assert fuzz_controller.running, f"the controller exited ({fuzz_controller.returncode})"
    assert "Traceback" not in fuzz_controller.log_text(), fuzz_controller.tail(80)
    assert problems == [], [c.kind for c in cases]
