"""WorkflowManagerConfiguration: the process configuration file (docs/behaviour.md §1.12).

The workflow-manager process of nagare reads a YAML file of kind ``WorkflowManagerConfiguration``
(``--config``). taskfsm accepts the same file unchanged: the controller-runtime manager options
it inlines, the two waiting durations, and ``nats`` (``url`` plus optional ``username`` and
``password``, docs/behaviour.md §1.12), which is copied into every helper payload (§1.11). Unknown
members are kept, so a newer nagare configuration still loads.

``WorkflowManagerConfiguration.load(path)`` reads a file; ``from_dict`` parses a mapping. Both
raise ``InvalidObjectError`` naming the file (or kind) and each invalid field.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import Field, ValidationError

from taskfsm.api import duration
from taskfsm.api.base import K8sModel
from taskfsm.api.constants import API_VERSION, KIND_WORKFLOW_MANAGER_CONFIGURATION
from taskfsm.api.errors import InvalidObjectError, describe_validation_error
from taskfsm.api.scalars import GoDuration, Int32, OpaqueObject


class NatsConfiguration(K8sModel):
    """How Functions reach NATS; copied verbatim into the helper payload's ``system.nats``."""

    url: str
    """NATS server URL, e.g. ``nats://nats:4222``."""
    username: str | None = None
    """NATS user name."""
    password: str | None = Field(default=None, repr=False)
    """NATS password (never shown in ``repr``)."""


class LeaderElection(K8sModel):
    """controller-runtime leader election options."""

    leader_elect: bool | None = Field(default=None, alias="leaderElect")
    resource_name: str | None = Field(default=None, alias="resourceName")
    resource_namespace: str | None = Field(default=None, alias="resourceNamespace")
    resource_lock: str | None = Field(default=None, alias="resourceLock")
    lease_duration: GoDuration | None = Field(default=None, alias="leaseDuration")
    renew_deadline: GoDuration | None = Field(default=None, alias="renewDeadline")
    retry_period: GoDuration | None = Field(default=None, alias="retryPeriod")


class ControllerOptions(K8sModel):
    """controller-runtime controller options."""

    group_kind_concurrency: dict[str, int] | None = Field(
        default=None, alias="groupKindConcurrency"
    )
    cache_sync_timeout: GoDuration | None = Field(default=None, alias="cacheSyncTimeout")
    recover_panic: bool | None = Field(default=None, alias="recoverPanic")


class MetricsOptions(K8sModel):
    """Where metrics are served."""

    bind_address: str | None = Field(default=None, alias="bindAddress")


class HealthOptions(K8sModel):
    """Where health probes are served."""

    health_probe_bind_address: str | None = Field(default=None, alias="healthProbeBindAddress")
    readiness_endpoint_name: str | None = Field(default=None, alias="readinessEndpointName")
    liveness_endpoint_name: str | None = Field(default=None, alias="livenessEndpointName")


class WebhookOptions(K8sModel):
    """Where admission webhooks are served (taskfsm serves none; accepted for compatibility)."""

    port: Int32 | None = None
    host: str | None = None
    cert_dir: str | None = Field(default=None, alias="certDir")


class WorkflowManagerConfiguration(K8sModel):
    """The process configuration (§1.12); every member optional."""

    api_version: Literal["engine.nagare.media/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion"
    )
    kind: Literal["WorkflowManagerConfiguration"] = "WorkflowManagerConfiguration"
    metadata: OpaqueObject | None = None
    sync_period: GoDuration | None = Field(default=None, alias="syncPeriod")
    leader_election: LeaderElection | None = Field(default=None, alias="leaderElection")
    cache_namespace: str | None = Field(default=None, alias="cacheNamespace")
    graceful_shut_down: GoDuration | None = Field(default=None, alias="gracefulShutDown")
    controller: ControllerOptions | None = None
    metrics: MetricsOptions | None = None
    health: HealthOptions | None = None
    webhook: WebhookOptions | None = None
    workflow_termination_waiting_duration: GoDuration = Field(
        default="20s", alias="workflowTerminationWaitingDuration"
    )
    """How long the Workflow controller waits for Tasks to terminate."""
    remote_media_processing_entity_stabilizing_duration: GoDuration = Field(
        default="5s", alias="remoteMediaProcessingEntityStabilizingDuration"
    )
    """How long a remote MPE's Job watch must run before the MPE counts as Ready."""
    nats: NatsConfiguration | None = None
    """NATS connection handed to Functions; absent means empty strings in the payload."""

    @property
    def workflow_termination_waiting(self) -> timedelta:
        """``workflowTerminationWaitingDuration`` as a ``timedelta``."""
        return duration.to_timedelta(self.workflow_termination_waiting_duration)

    @property
    def remote_media_processing_entity_stabilizing(self) -> timedelta:
        """``remoteMediaProcessingEntityStabilizingDuration`` as a ``timedelta``."""
        return duration.to_timedelta(self.remote_media_processing_entity_stabilizing_duration)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str | None = None) -> Self:
        """Parse a configuration mapping; raises ``InvalidObjectError`` naming ``source``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            what = f"{KIND_WORKFLOW_MANAGER_CONFIGURATION} {source}".rstrip()
            # ``from None``: pydantic's own error text is not chained into tracebacks.
            raise InvalidObjectError(what, describe_validation_error(exc)) from None

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Read a YAML (or JSON) configuration file.

        Raises ``OSError`` when the file cannot be read and ``InvalidObjectError`` when it is not
        a YAML mapping or a field is invalid.
        """
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            # Only the problem and its line: PyYAML's full text quotes the file, which may hold
            # the NATS password.
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "syntax error"
            raise InvalidObjectError(
                f"{KIND_WORKFLOW_MANAGER_CONFIGURATION} {path}", f"not valid YAML: {problem}{where}"
            ) from None
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise InvalidObjectError(
                f"{KIND_WORKFLOW_MANAGER_CONFIGURATION} {path}", "must be a YAML mapping"
            )
        return cls.from_dict(data, source=str(path))
