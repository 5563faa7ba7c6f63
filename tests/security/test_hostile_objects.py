"""No object of any kind or size stops or starves the controller (docs/security.md, "No object
stops the controller").

Whatever the API server admits -- nesting thousands of levels deep, long strings, odd unicode,
many keys, long lists -- costs bounded work, stops no watch, worker or start-up, and ends in a
clear status or Event on that object alone. Every test here ends with the tenant fixture's check:
the controller is ready and the bystander's new Task succeeds.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskfsm.kube.errors import KubeError
from taskfsm_dev import objects
from taskfsm_dev.waiting import wait_for
from tests.support.examples import examples
from tests.support.tenancy import Tenant


def nested(depth: int) -> dict:
    """``{"a": {"a": ... 1}}`` without recursion in the encoder."""
    inner: dict = {"x": 1}
    for _ in range(depth):
        inner = {"a": inner}
    return inner


def test_a_task_nested_thousands_deep_is_reported_and_stops_nothing(tenant: Tenant, controller):
    """The object that made every Task list fail:
    it is cached as its identity, its status says why, and a restarted controller starts."""
    tenant.basics()
    deep = objects.task("deep", workflow_name="wf", function_name="fn")
    deep["spec"]["templatePatches"] = {"spec": nested(5000)}
    _create_raw(tenant, "tasks", deep)
    wait_for(
        lambda: "nested deeper than" in str(tenant.status("Task", "deep").get("message") or ""),
        timeout=60,
        what=lambda: f"the deep Task reported: {tenant.status('Task', 'deep')}",
    )
    tenant.wait_event("deep", "ReconcileError")
    assert tenant.jobs() == []
    tenant.task_in_new_workflow("fine")
    tenant.wait_phase("fine", "Succeeded")
    assert controller.terminate(timeout=30) == 0
    controller.start()  # with the deep Task listed at start-up: ready again (no crash loop)


def _deep_json(obj: dict) -> bytes:
    """JSON for ``obj`` however deep (an explicit stack: the standard encoders recurse)."""
    out: list[str] = []
    stack: list[object] = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item.startswith("\0"):
            out.append(item[1:])
        elif isinstance(item, dict):
            out.append("{")
            parts: list[object] = []
            for i, (k, v) in enumerate(item.items()):
                parts.append("\0" + ("," if i else "") + _quote(k) + ":")
                parts.append(v)
            parts.append("\0}")
            stack.extend(reversed(parts))
        elif isinstance(item, list):
            out.append("[")
            parts = []
            for i, v in enumerate(item):
                if i:
                    parts.append("\0,")
                parts.append(v)
            parts.append("\0]")
            stack.extend(reversed(parts))
        else:
            out.append(_quote(item))
    return "".join(out).encode()


def _quote(value: object) -> str:
    import json

    return json.dumps(value)


def test_a_deep_function_and_task_template_are_refused_where_used(tenant: Tenant):
    tenant.create(objects.workflow("wf"))
    tenant.create(objects.local_mpe("local", default=True))
    function = objects.function("deep-fn")
    function["spec"]["template"]["x"] = nested(300)
    _create_raw(tenant, "functions", function)
    tenant.create(objects.task("uses-fn", workflow_name="wf", function_name="deep-fn"))
    wait_for(
        lambda: (
            "Function 'deep-fn' cannot be used"
            in str(tenant.status("Task", "uses-fn").get("message") or "")
        ),
        timeout=60,
        what=lambda: f"refusal: {tenant.status('Task', 'uses-fn')}",
    )
    template = objects.task_template("deep-template", templatePatches={"spec": nested(300)})
    _create_raw(tenant, "tasktemplates", template)
    tenant.create(objects.function("fn"))
    tenant.create(
        objects.task(
            "uses-template",
            workflow_name="wf",
            function_name="fn",
            taskTemplateRef={"kind": "TaskTemplate", "name": "deep-template"},
        )
    )
    wait_for(
        lambda: (
            "cannot be used" in str(tenant.status("Task", "uses-template").get("message") or "")
        ),
        timeout=60,
        what=lambda: f"refusal: {tenant.status('Task', 'uses-template')}",
    )


def _create_raw(tenant: Tenant, plural: str, obj: dict) -> None:
    from taskfsm.kube.rest import Resource

    res = Resource("engine.nagare.media", "v1alpha1", plural, obj["kind"])
    tenant.rest.request(
        "POST",
        res,
        res.path(tenant.namespace),
        body=_deep_json(obj),
        content_type="application/json",
    )


# -- hypothesis: hostile objects of every kind, against the real API server ----------------------

KINDS = ("Task", "TaskTemplate", "Function", "Workflow", "MediaLocation", "MediaProcessingEntity")

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=300
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_text, inner, max_size=6),
    max_leaves=40,
)


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, dict]:
    """A kind and a body: its spec's fields set to odd JSON, or nested very deep, or long."""
    kind = draw(st.sampled_from(KINDS))
    shape = draw(st.sampled_from(["fields", "deep", "long", "wide"]))
    spec: dict = {}
    if shape == "fields":
        spec = draw(st.dictionaries(st.sampled_from(_FIELDS[kind]), _json, max_size=5))
    elif shape == "deep":
        spec = {draw(st.sampled_from(_FIELDS[kind])): nested(draw(st.integers(60, 3000)))}
    elif shape == "long":
        spec = {draw(st.sampled_from(_FIELDS[kind])): "\U0001f600" * draw(st.integers(1000, 60000))}
    else:
        spec = {
            draw(st.sampled_from(_FIELDS[kind])): {
                f"k{i}": "v" for i in range(draw(st.integers(500, 5000)))
            }
        }
    name = draw(st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=20))
    return kind, {"kind": kind, "metadata": {"name": f"h-{name}"}, "spec": spec}


_FIELDS = {
    "Task": [
        "templatePatches",
        "config",
        "inputs",
        "functionSelector",
        "mediaProcessingEntitySelector",
        "workflowRef",
        "humanReadable",
    ],
    "TaskTemplate": ["templatePatches", "config", "functionSelector"],
    "Function": ["template", "defaultConfig", "version"],
    "Workflow": ["mediaLocations", "config", "inputs", "humanReadable"],
    "MediaLocation": ["s3", "http", "rtmp", "rtsp", "nats"],
    "MediaProcessingEntity": ["local", "remote"],
}

_PLURALS = {
    "Task": "tasks",
    "TaskTemplate": "tasktemplates",
    "Function": "functions",
    "Workflow": "workflows",
    "MediaLocation": "medialocations",
    "MediaProcessingEntity": "mediaprocessingentities",
}


def test_hostile_objects_of_every_kind_stop_nothing(tenant: Tenant, controller):
    """Admitted or refused by the API server, none of them stops the controller: after each
    batch it is ready and the tenant's own ordinary Task still succeeds."""
    tenant.basics()
    created: list[str] = []

    @settings(
        max_examples=examples(40),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
        derandomize=True,
    )
    @given(hostile())
    def create(item: tuple[str, dict]) -> None:
        kind, body = item
        body["apiVersion"] = "engine.nagare.media/v1alpha1"
        if kind == "Task":
            body["spec"].setdefault("workflowRef", {"name": "wf"})
        try:
            _create_raw(tenant, _PLURALS[kind], body)
            created.append(f"{kind}/{body['metadata']['name']}")
        except KubeError:
            pass  # refused at admission (or a duplicate name): fine

    create()
    print(f"hostile objects admitted: {len(created)}")
    controller.wait_ready(60)
    tenant.task_in_new_workflow("ordinary")
    tenant.wait_phase("ordinary", "Succeeded", timeout=120)
