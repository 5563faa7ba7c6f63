"""taskfsm render-job: the offline Job/Secret preview users run before applying objects."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from taskfsm.cli import main
from taskfsm_dev.demo import SAMPLES


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    path = tmp_path / "objects.yaml"
    path.write_text(SAMPLES.read_text())
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["render-job", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_a_job_and_a_secret_with_masked_credentials(capsys, samples):
    """The Job carries the data volume; the Secret's credentials are masked by default."""
    code, out, _ = run(capsys, str(samples), "--task", "sleep")
    assert code == 0
    job, secret = list(yaml.safe_load_all(out))
    assert job["kind"] == "Job"
    assert (
        job["spec"]["template"]["spec"]["volumes"][-1]["secret"]["secretName"]
        == job["metadata"]["name"]
    )
    data = json.loads(secret["stringData"]["data.json"])
    creds = data["mediaLocations"]["s3"]["s3"]["auth"]["aws"]["secretRef"]["data"]
    assert creds == {"accessKeyID": "***", "secretAccessKey": "***"}
    assert "demo-secret-key-not-real" not in out
    assert data["task"]["config"] == {"sleep.engine.nagare.media/duration": "3s"}  # Task wins (D2)


def test_show_secrets_reveals_the_base64_values(capsys, samples):
    """--show-secrets prints the credentials as the helper would read them (base64)."""
    code, out, _ = run(capsys, str(samples), "--task", "sleep", "--show-secrets")
    assert code == 0
    data = json.loads(list(yaml.safe_load_all(out))[1]["stringData"]["data.json"])
    creds = data["mediaLocations"]["s3"]["s3"]["auth"]["aws"]["secretRef"]["data"]
    assert base64.b64decode(creds["secretAccessKey"]) == b"demo-secret-key-not-real"


def test_template_patches_are_applied(capsys, samples):
    """The Task's templatePatches add env to the named container instead of a new container."""
    code, out, _ = run(capsys, str(samples), "--task", "patched")
    assert code == 0
    containers = next(yaml.safe_load_all(out))["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["function"]
    assert containers[0]["env"] == [{"name": "LOG_LEVEL", "value": "debug"}]


def test_missing_function_is_a_readable_error(capsys, tmp_path):
    """A Task whose Function is not in the files fails with the controller's message, no traceback."""
    docs = [d for d in yaml.safe_load_all(SAMPLES.read_text()) if d and d["kind"] != "Function"]
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code, out, err = run(capsys, str(path), "--task", "sleep")
    assert code == 1
    assert out == ""
    assert 'functions.engine.nagare.media "sleep" not found' in err
    assert "Traceback" not in err


def test_several_tasks_need_a_name(capsys, samples):
    """With several Tasks in the files, --task is required and the error says so."""
    code, _, err = run(capsys, str(samples))
    assert code == 1
    assert "--task" in err
