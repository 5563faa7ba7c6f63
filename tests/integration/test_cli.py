"""The user-facing CLI verbs as a platform engineer runs them: a real kubectl (v1.35.4, built with
the control plane) with the ``kubectl-taskfsm`` plugin on PATH, against the local control plane
with the in-process controller and a simulated kubelet that serves container logs
(taskfsm_dev.podlogs). Each verb: ``list``, ``get``, ``logs`` (local and remote
MediaProcessingEntity, ``-f``), ``wait``, ``explain`` of a Job on a remote MPE (and what a user
who may not read its kubeconfig Secret sees), the namespace taken from the kubeconfig context,
and shell completion through kubectl's plugin completion."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from taskfsm.api import constants as c
from taskfsm.tools import rbac
from taskfsm_dev import objects
from taskfsm_dev.controlplane import ControlPlane
from taskfsm_dev.kubelet import SimulatedKubelet
from taskfsm_dev.podlogs import ANNOTATION_LOG
from taskfsm_dev.waiting import wait_for
from tests.integration.test_rbac import token_client
from tests.support import kubetools
from tests.support.namespaces import delete_namespace

LOG_LINES = ["reading input.mp4", "transcoding 1/2", "transcoding 2/2", "wrote output.mp4"]


def run(command: str, kubeconfig: Path | str, **options: Any) -> subprocess.CompletedProcess[str]:
    return kubetools.run(command, kubeconfig, with_helm=False, **options)


def logging_function(name: str, run_seconds: float, **options: Any) -> dict[str, Any]:
    """A Function whose pods write LOG_LINES over ``run_seconds``."""
    function = objects.function(name, run_seconds=run_seconds, **options)
    pod_meta = function["spec"]["template"]["spec"]["template"]["metadata"]
    pod_meta["annotations"][ANNOTATION_LOG] = "\n".join(LOG_LINES)
    return function


@pytest.fixture
def log_kubelet(api_client, namespace):
    """A simulated kubelet that binds its pods to a Node of its own and serves their logs."""
    with SimulatedKubelet(api_client, namespace=namespace, logs=True) as sim:
        yield sim


@pytest.fixture
def context_kubeconfig(control_plane, namespace, tmp_path) -> Path:
    """The admin kubeconfig whose context's namespace is the test's namespace."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(control_plane.kubeconfig_dict(namespace=namespace)))
    return path


@pytest.fixture
def two_tasks(engine, controller, log_kubelet) -> None:
    """Task ``ok`` Succeeded and Task ``bad`` Failed (exit code 3), both in Workflow ``wf``."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("fn"))
    engine.create(objects.function("boom", exit_code=3))
    engine.create(objects.local_mpe("local"))
    engine.create(objects.task("ok", workflow_name="wf", function_name="fn", mpe_name="local"))
    engine.create(objects.task("bad", workflow_name="wf", function_name="boom", mpe_name="local"))
    wait_for(
        lambda: (engine.phase("ok"), engine.phase("bad")) == ("Succeeded", "Failed"),
        timeout=60,
        what="ok Succeeded and bad Failed",
    )


def table(text: str) -> list[dict[str, str]]:
    """The rows of a kubectl-style table, cells split at the header's column starts."""
    header, *rows = text.splitlines()
    names = re.split(r"\s{2,}", header.strip())
    starts = [match.start() for match in re.finditer(r"\S+(?: \S+)*", header)]
    return [
        {
            name: line[a:b].strip()
            for name, a, b in zip(names, starts, [*starts[1:], None], strict=True)
        }
        for line in rows
    ]


def test_list_takes_the_namespace_from_the_kubeconfig_context(
    control_plane, engine, namespace, two_tasks, context_kubeconfig
):
    """`kubectl taskfsm list` without -n lists the Tasks of the kubeconfig context's namespace
    (not `default`): phase, reason, Workflow, MPE, Job and age per Task; -n another namespace
    lists none there; -A adds a NAMESPACE column and finds both."""
    rows = table(run("kubectl taskfsm list", context_kubeconfig).stdout)
    assert [list(r) for r in rows[:1]] == [
        ["NAME", "PHASE", "REASON", "WORKFLOW", "MPE", "JOB", "AGE"]
    ]
    by_name = {r["NAME"]: r for r in rows}
    assert set(by_name) == {"bad", "ok"}
    for name, phase, reason in (
        ("ok", "Succeeded", "JobSucceeded"),
        ("bad", "Failed", "JobFailed"),
    ):
        task = engine.task(name)
        assert by_name[name]["PHASE"] == phase
        assert by_name[name]["REASON"] == reason
        assert by_name[name]["WORKFLOW"] == "wf"
        assert by_name[name]["MPE"] == "local"
        assert by_name[name]["JOB"] == task["status"]["jobRef"]["name"]
        assert re.fullmatch(r"\d+s", by_name[name]["AGE"])

    elsewhere = run("kubectl taskfsm list -n kube-system", context_kubeconfig)
    assert elsewhere.stdout == ""
    assert "No Tasks found in namespace kube-system." in elsewhere.stderr

    everywhere = table(run("taskfsm ls -A", context_kubeconfig).stdout)
    assert {(r["NAMESPACE"], r["NAME"]) for r in everywhere} >= {
        (namespace, "ok"),
        (namespace, "bad"),
    }

    wide = table(run("kubectl taskfsm list -o wide --phase Failed", context_kubeconfig).stdout)
    assert [(r["NAME"], r["FUNCTION"]) for r in wide] == [("bad", "boom")]
    assert wide[0]["STARTED"] == engine.task("bad")["status"]["startTime"]


def test_list_and_get_print_json_yaml_and_names(
    control_plane, engine, namespace, two_tasks, context_kubeconfig
):
    """-o json and -o yaml print the stored objects (a v1 List for list, the object for get of
    one Task), -o name prints kubectl-style names, and get of a missing Task exits 1."""
    listed = json.loads(run("kubectl taskfsm list -o json", context_kubeconfig).stdout)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    assert [t["metadata"]["name"] for t in listed["items"]] == ["bad", "ok"]
    assert listed["items"][1]["status"] == engine.task("ok")["status"]

    got = yaml.safe_load(run("kubectl taskfsm get ok -o yaml", context_kubeconfig).stdout)
    assert got["kind"] == c.KIND_TASK
    assert got["metadata"]["uid"] == engine.task("ok")["metadata"]["uid"]

    names = run(f"taskfsm get ok bad -n {namespace} -o name", context_kubeconfig).stdout
    assert names.splitlines() == [f"task.{c.GROUP}/ok", f"task.{c.GROUP}/bad"]

    missing = run("kubectl taskfsm get nope", context_kubeconfig, check=False)
    assert missing.returncode == 1
    assert f'Task "nope" not found in namespace {namespace}' in missing.stderr


def test_wait_for_a_phase(control_plane, engine, controller, log_kubelet, context_kubeconfig):
    """`wait --for=phase=Succeeded` returns 0 once the Task succeeds; waiting for Succeeded on a
    Task that failed ends at once with exit 1; a Task that cannot get there in time times out."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.function("slow", run_seconds=2))
    engine.create(objects.function("boom", exit_code=1))
    engine.create(objects.never_starting(objects.function("stuck")))
    engine.create(objects.local_mpe("local"))
    engine.create(objects.task("t", workflow_name="wf", function_name="slow", mpe_name="local"))
    done = run("kubectl taskfsm wait t --for=phase=Succeeded --timeout 90s", context_kubeconfig)
    assert done.stdout.strip() == f"task.{c.GROUP}/t condition met (phase=Succeeded)"
    assert engine.phase("t") == "Succeeded"
    condition = run("taskfsm wait t --for=condition=Complete --timeout 5", context_kubeconfig)
    assert "condition met (condition=Complete)" in condition.stdout

    engine.create(objects.task("f", workflow_name="wf", function_name="boom", mpe_name="local"))
    failed = run(
        "kubectl taskfsm wait f --for=phase=Succeeded --timeout 90",
        context_kubeconfig,
        check=False,
    )
    assert failed.returncode == 1
    assert "f: the Task ended Failed; --for=phase=Succeeded cannot be met" in failed.stderr

    # In a Workflow of its own: f's failure terminated wf and would fail s as well.
    engine.create(objects.workflow("wf2"))
    engine.create(objects.task("s", workflow_name="wf2", function_name="stuck", mpe_name="local"))
    stuck = run("kubectl taskfsm wait s --timeout 3", context_kubeconfig, check=False)
    assert stuck.returncode == 1
    assert "timed out waiting for --for=phase=Succeeded on Task s" in stuck.stderr


def test_logs_follow_and_tail(control_plane, engine, controller, log_kubelet, context_kubeconfig):
    """`logs -f` started before the Task has a Job waits for it and its pod, streams the lines
    as the container writes them and ends when it exits; afterwards `logs` prints the whole
    log and `--tail 1` the last line (read from the simulated kubelet through the API
    server's pods/log, as kubectl logs reads it)."""
    engine.create(objects.workflow("wf"))
    engine.create(logging_function("fn", run_seconds=2))
    engine.create(objects.local_mpe("local"))
    follower = subprocess.Popen(
        ["bash", "-c", "kubectl taskfsm logs t -f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=kubetools.REPO_ROOT,
        env=kubetools.environment(context_kubeconfig, with_helm=False),
    )
    engine.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="local"))
    out, err = follower.communicate(timeout=120)
    assert follower.returncode == 0, err
    assert out.splitlines() == LOG_LINES
    wait_for(lambda: engine.phase("t") == "Succeeded", timeout=60, what="Task Succeeded")

    assert run("kubectl taskfsm logs t", context_kubeconfig).stdout.splitlines() == LOG_LINES
    assert run("taskfsm logs t --tail 1", context_kubeconfig).stdout == f"{LOG_LINES[-1]}\n"
    # The same log kubectl itself reads from the pod.
    pod = engine.task("t")["status"]["jobRef"]["name"]
    assert LOG_LINES[0] in run(f"kubectl logs job/{pod}", context_kubeconfig).stdout


def test_logs_of_a_task_without_a_job(control_plane, engine, context_kubeconfig):
    """A Task no controller has seen has no Job: one error line, exit 1."""
    engine.create(objects.task("quiet", workflow_name="wf"))
    proc = run("kubectl taskfsm logs quiet", context_kubeconfig, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: Task quiet has no Job (phase New)"


@pytest.fixture
def remote_cluster(remote_control_plane: ControlPlane):
    """A fresh namespace in the second cluster, with a log-serving simulated kubelet."""
    name = f"remote-{uuid.uuid4().hex[:8]}"
    with remote_control_plane.api_client() as api:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
        with SimulatedKubelet(api, namespace=name, logs=True):
            yield remote_control_plane, name
        delete_namespace(api, name)


def test_explain_and_logs_of_a_job_on_a_remote_mpe(
    control_plane, engine, controller, api_client, namespace, remote_cluster, context_kubeconfig
):
    """A Task whose Job runs in another cluster: `explain` reads that Job through the MPE's
    kubeconfig Secret and `logs` prints its pod's log. A user whose RBAC allows Tasks and MPEs
    but not Secrets gets explain's other facts with a line saying the Secret could not be read
    (exit 0), and `logs` says so in one line (exit 1)."""
    remote, remote_ns = remote_cluster
    secret = objects.kubeconfig_secret(
        "remote-kubeconfig", remote.kubeconfig_dict(namespace=remote_ns)
    )
    client.CoreV1Api(api_client).create_namespaced_secret(namespace, secret)
    engine.create(objects.remote_mpe("far", secret_name="remote-kubeconfig"))
    engine.create(objects.workflow("wf"))
    engine.create(logging_function("fn", run_seconds=0))
    engine.create(objects.task("t", workflow_name="wf", function_name="fn", mpe_name="far"))
    wait_for(lambda: engine.phase("t") == "Succeeded", timeout=90, what="remote Task Succeeded")
    job = engine.task("t")["status"]["jobRef"]
    assert job["namespace"] == remote_ns

    out = run("kubectl taskfsm explain t --diagram none", context_kubeconfig).stdout
    assert f"  Job:        {remote_ns}/{job['name']} (uid {job['uid']})" in out
    assert f"on remote MediaProcessingEntity {namespace}/far ({remote.server})" in out
    assert "              pods: active 0, succeeded 1, failed 0" in out
    assert "Complete" in out
    logs = run("kubectl taskfsm logs t", context_kubeconfig).stdout
    assert logs.splitlines() == LOG_LINES

    reader = [
        rbac.Rule((c.GROUP,), ("tasks", "mediaprocessingentities"), ("get", "list"), "cli"),
        rbac.Rule(("events.k8s.io",), ("events",), ("list",), "cli"),
    ]
    restricted = token_client(api_client, control_plane, namespace, reader, [])
    kubeconfig = control_plane.kubeconfig_dict(namespace=namespace)
    kubeconfig["users"][0]["user"] = {"token": restricted.configuration.api_key["BearerToken"]}
    limited = context_kubeconfig.parent / "limited"
    limited.write_text(yaml.safe_dump(kubeconfig))
    explained = run("kubectl taskfsm explain t --diagram none", limited)
    assert "  Phase:      Succeeded" in explained.stdout
    assert (
        f"cannot be read: your credentials may not read the kubeconfig Secret "
        f"{namespace}/remote-kubeconfig of MediaProcessingEntity {namespace}/far (forbidden)"
    ) in explained.stdout
    refused = run("kubectl taskfsm logs t", limited, check=False)
    assert refused.returncode == 1
    assert "may not read the kubeconfig Secret" in refused.stderr
    assert "Traceback" not in refused.stderr + explained.stderr


def test_shell_completion_through_kubectl(control_plane, engine, two_tasks, context_kubeconfig):
    """kubectl completes the plugin through kubectl_complete-taskfsm: the verbs, and Task names
    read from the kubeconfig context's namespace; `taskfsm completion bash` prints the code
    that registers both commands."""
    verbs = run("kubectl __complete taskfsm l", context_kubeconfig).stdout.splitlines()
    assert verbs[: verbs.index(":4")] == ["list", "ls", "logs"]
    names = run("kubectl __complete taskfsm logs ''", context_kubeconfig).stdout.splitlines()
    assert names[: names.index(":4")] == ["bad", "ok"]
    code = run("taskfsm completion bash", context_kubeconfig).stdout
    assert "complete" in code
    assert "kubectl-taskfsm" in code
    assert "taskfsm" in code


def test_kubectl_taskfsm_ui_serves_the_context_namespace(
    control_plane, namespace, crds, context_kubeconfig
):
    """`kubectl taskfsm ui` (the plugin) prints its loopback URL and serves the kubeconfig
    context's namespace; SIGTERM stops it with exit 0."""
    proc = subprocess.Popen(
        ["bash", "-c", "exec kubectl taskfsm ui"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=kubetools.REPO_ROOT,
        env=kubetools.environment(context_kubeconfig, with_helm=False),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert re.fullmatch(
            rf"taskfsm ui: http://127\.0\.0\.1:\d+/ \(namespace {namespace}; read-only; Ctrl-C stops\)\n",
            line,
        ), line
        url = line.split()[2]
        with urllib.request.urlopen(url + "api/meta") as answer:
            assert json.loads(answer.read())["namespace"] == namespace
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


# -- Workflows: workflow/NAME, list workflows, --watch ----------------------------------------


def test_list_and_get_workflows_with_their_tasks(
    control_plane, engine, namespace, two_tasks, context_kubeconfig
):
    """`list workflows` shows each Workflow's phase, its True conditions and its Tasks counted
    by phase; `get workflow/NAME` its row and then its Tasks' table (-o json: the Workflow
    itself, -o name its name); a missing Workflow is an error line and exit 1."""
    wait_for(
        lambda: (engine.get(c.KIND_WORKFLOW, "wf").get("status") or {}).get("phase") == "Failed",
        timeout=60,
        what="wf Failed",
    )
    rows = table(run("kubectl taskfsm list workflows", context_kubeconfig).stdout)
    columns = "NAME PHASE REASON CONDITIONS TASKS PENDING RUNNING SUCCEEDED FAILED AGE"
    assert list(rows[0]) == columns.split()
    (wf,) = rows
    assert (wf["NAME"], wf["PHASE"]) == ("wf", "Failed")
    assert "Failed" in wf["CONDITIONS"].split(",")
    counts = [wf[k] for k in ("TASKS", "PENDING", "RUNNING", "SUCCEEDED", "FAILED")]
    assert counts == ["2", "0", "0", "1", "1"]
    none = run("taskfsm ls wf --phase Succeeded", context_kubeconfig)
    assert none.stdout == ""
    assert f"No Workflows found in namespace {namespace}." in none.stderr

    got = run("kubectl taskfsm get workflow/wf", context_kubeconfig).stdout
    workflow_part, tasks_part = got.split("\n\n")
    assert [r["NAME"] for r in table(workflow_part)] == ["wf"]
    task_rows = table(tasks_part)
    assert [(r["NAME"], r["PHASE"], r["WORKFLOW"]) for r in task_rows] == [
        ("bad", "Failed", "wf"),
        ("ok", "Succeeded", "wf"),
    ]
    whole = json.loads(run("kubectl taskfsm get wf/wf -o json", context_kubeconfig).stdout)
    assert (whole["kind"], whole["status"]["phase"]) == (c.KIND_WORKFLOW, "Failed")
    named = run("taskfsm get workflow/wf ok -o name", context_kubeconfig).stdout
    assert named.splitlines() == [f"workflow.{c.GROUP}/wf", f"task.{c.GROUP}/ok"]

    missing = run("kubectl taskfsm get workflow/nope", context_kubeconfig, check=False)
    assert missing.returncode == 1
    assert f'Workflow "nope" not found in namespace {namespace}' in missing.stderr


def test_wait_for_and_logs_of_a_workflow(
    control_plane, engine, controller_factory, log_kubelet, context_kubeconfig
):
    """`wait workflow/NAME` returns 0 once the Workflow succeeds and 1 at once for one that
    failed; `logs workflow/NAME` prints each Task's Job log, its lines prefixed [TASK]."""
    controller_factory(workflow_termination_waiting=1.0)
    engine.create(objects.workflow("wf"))
    engine.create(logging_function("fn", run_seconds=1))
    engine.create(objects.function("boom", exit_code=2))
    engine.create(objects.local_mpe("local"))
    for name in ("a", "b"):
        engine.create(objects.task(name, workflow_name="wf", function_name="fn", mpe_name="local"))
    done = run("kubectl taskfsm wait workflow/wf --timeout 120s", context_kubeconfig)
    assert done.stdout.strip() == f"workflow.{c.GROUP}/wf condition met (phase=Succeeded)"

    logs = run("kubectl taskfsm logs workflow/wf", context_kubeconfig).stdout.splitlines()
    assert logs == [f"[{name}] {line}" for name in ("a", "b") for line in LOG_LINES]
    tail = run("taskfsm logs wf/wf --tail 1", context_kubeconfig).stdout.splitlines()
    assert tail == [f"[a] {LOG_LINES[-1]}", f"[b] {LOG_LINES[-1]}"]

    engine.create(objects.workflow("wf2"))
    engine.create(objects.task("f", workflow_name="wf2", function_name="boom", mpe_name="local"))
    failed = run("kubectl taskfsm wait workflow/wf2 --timeout 120", context_kubeconfig, check=False)
    assert failed.returncode == 1
    assert "wf2: the Workflow ended Failed; --for=phase=Succeeded cannot be met" in failed.stderr
    gone = run("kubectl taskfsm wait workflow/nope --timeout 5", context_kubeconfig, check=False)
    assert gone.returncode == 1
    assert 'Workflow "nope" not found' in gone.stderr


class Watcher:
    """`kubectl taskfsm ... -w` running in the background; its stdout lines read as they come."""

    def __init__(self, command: str, kubeconfig: Path) -> None:
        self.proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=kubetools.REPO_ROOT,
            env=kubetools.environment(kubeconfig, with_helm=False),
            # As a background job of a script starts it: SIGINT ignored, inherited across exec
            # (regression: the watch then never ended on Ctrl-C).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_line(self, timeout: float = 60) -> str:
        return self.lines.get(timeout=timeout)

    def until(self, prefix: str, timeout: float = 60) -> str:
        """The first line from now on that starts with ``prefix``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting with {prefix!r} within {timeout}s")

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: (exit code, stderr)."""
        self.proc.send_signal(signal.SIGINT)
        _out, err = self.proc.communicate(timeout=90)  # a bound for a loaded machine
        return self.proc.returncode, err


def test_list_watch_prints_changed_rows_until_ctrl_c(
    control_plane, engine, namespace, crds, context_kubeconfig
):
    """`list -w` prints the table, then a row for each Task created, changed or deleted (a
    deleted one reads Deleted); `list workflows -w` prints its Workflow's row again when a
    Task of it appears. Ctrl-C ends both with exit 0 and no traceback."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.task("first", workflow_name="wf"))
    tasks = Watcher("kubectl taskfsm list -w", context_kubeconfig)
    workflows = Watcher("kubectl taskfsm list workflows --watch", context_kubeconfig)
    try:
        assert " ".join(tasks.next_line().split()) == "NAME PHASE REASON WORKFLOW MPE JOB AGE"
        assert tasks.next_line().split()[:2] == ["first", "New"]
        assert workflows.next_line().split()[:5] == [
            "NAME",
            "PHASE",
            "REASON",
            "CONDITIONS",
            "TASKS",
        ]
        assert workflows.next_line().split()[:5] == ["wf", "New", "<none>", "1", "1"]
        engine.create(objects.task("second", workflow_name="wf"))
        assert tasks.until("second ").split()[:2] == [
            "second",
            "New",
        ]
        assert workflows.until("wf ").split()[:5] == [
            "wf",
            "New",
            "<none>",
            "2",
            "2",
        ]
        client.CustomObjectsApi(engine.api.api_client).delete_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, "tasks", "second"
        )
        deleted = tasks.until("second ")
        assert deleted.split()[:2] == ["second", "Deleted"]
    finally:
        results = [watcher.interrupt() for watcher in (tasks, workflows)]
    for code, err in results:
        assert code == 0, err
        assert "Traceback" not in err


def test_get_workflow_watch_prints_its_tasks_as_they_change(
    control_plane, engine, namespace, crds, context_kubeconfig
):
    """`get workflow/NAME -w` prints the Workflow and its Tasks, then a Task of it that
    appears (under the Task header) and the Workflow's row with the new count (under the
    Workflow header again); Tasks of other Workflows are not shown."""
    engine.create(objects.workflow("wf"))
    engine.create(objects.workflow("other"))
    watcher = Watcher("kubectl taskfsm get workflow/wf -w", context_kubeconfig)
    try:
        assert watcher.next_line().split()[:2] == ["NAME", "PHASE"]
        assert watcher.next_line().split()[:5] == ["wf", "New", "<none>", "0", "0"]
        engine.create(objects.task("elsewhere", workflow_name="other"))
        engine.create(objects.task("mine", workflow_name="wf"))
        lines = [watcher.next_line() for _ in range(4)]
        assert lines[0].split()[:4] == ["NAME", "PHASE", "REASON", "WORKFLOW"]
        assert lines[1].split()[:2] == ["mine", "New"]
        assert lines[2].split()[:2] == ["NAME", "PHASE"]
        assert lines[3].split()[:5] == ["wf", "New", "<none>", "1", "1"]
    finally:
        code, err = watcher.interrupt()
    assert code == 0, err
    assert "Traceback" not in err
    assert "elsewhere" not in "\n".join(lines)
