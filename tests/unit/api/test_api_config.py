"""The process configuration file (docs/behaviour.md §1.12)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from taskfsm.api import InvalidObjectError, WorkflowManagerConfiguration

SEED_SHAPE = """\
apiVersion: engine.nagare.media/v1alpha1
kind: WorkflowManagerConfiguration
health:
  healthProbeBindAddress: :8081
leaderElection:
  leaderElect: false
  resourceName: a3df9e9e.engine.nagare.media
remoteMediaProcessingEntityStabilizingDuration: 1m
nats:
  url: nats://nats:4222
  username: user
  password: hunter2
futureOption: {enabled: true}
"""


def test_load_seed_shape(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(SEED_SHAPE, encoding="utf-8")
    config = WorkflowManagerConfiguration.load(path)
    assert config.nats is not None
    assert (config.nats.url, config.nats.username, config.nats.password) == (
        "nats://nats:4222",
        "user",
        "hunter2",
    )
    assert config.leader_election is not None
    assert config.leader_election.leader_elect is False
    assert config.remote_media_processing_entity_stabilizing == timedelta(minutes=1)
    assert config.workflow_termination_waiting == timedelta(seconds=20)  # default
    assert config.to_dict()["futureOption"] == {"enabled": True}
    assert "hunter2" not in repr(config)


def test_nats_url_only_is_enough() -> None:
    config = WorkflowManagerConfiguration.from_dict({"nats": {"url": "nats://n"}})
    assert config.nats is not None
    assert config.nats.username is None
    assert config.nats.password is None


def test_empty_file_is_all_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    config = WorkflowManagerConfiguration.load(path)
    assert config.nats is None
    assert config.remote_media_processing_entity_stabilizing == timedelta(seconds=5)


def test_invalid_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("nats: {username: u}\nsyncPeriod: soon\n", encoding="utf-8")
    with pytest.raises(InvalidObjectError) as caught:
        WorkflowManagerConfiguration.load(path)
    message = str(caught.value)
    assert message.startswith(f"WorkflowManagerConfiguration {path} is invalid: ")
    assert "syncPeriod: invalid duration 'soon'" in message
    assert "nats.url: field required" in message


def test_yaml_errors_do_not_quote_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("nats:\n  password: hunter2\n  url: [unclosed\n", encoding="utf-8")
    with pytest.raises(InvalidObjectError) as caught:
        WorkflowManagerConfiguration.load(path)
    assert "not valid YAML" in str(caught.value)
    assert "line" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n", encoding="utf-8")
    with pytest.raises(InvalidObjectError, match="must be a YAML mapping"):
        WorkflowManagerConfiguration.load(path)
