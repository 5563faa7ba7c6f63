"""Assembling a Task's helper-data payload (``data.json``; docs/behaviour.md §1.11, §3.7).

The payload carries the Workflow and Task identities, the merged configuration, every MediaLocation
of the Workflow with its credentials resolved, and the NATS settings of the process configuration.
MediaLocation credentials follow docs/behaviour.md D15 (the reference looked every Secret up in the
Task's namespace and copied all of its keys):

* a MediaLocation's ``secretRef`` defaults to the MediaLocation's own namespace and may not name
  another one (as for remote MediaProcessingEntities);
* a ClusterMediaLocation's ``secretRef`` must name its namespace;
* only the keys the auth method uses are copied (:data:`taskfsm.api.medialocation.CREDENTIAL_KEYS`,
  e.g. ``accessKeyID`` and ``secretAccessKey`` for ``s3.auth.aws``), never the rest of the Secret;
  each of them must be present;
* ``key`` narrows that to the one key it names, which must be one of the method's keys (naming
  any other key is an error: the Job would never read it);
* Secret values never appear in errors: messages name the Secret, the key and the location only.

docs/api.md ("Credentials in the helper data") lists the keys per kind.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from taskfsm.api import constants as c
from taskfsm.api.config import NatsConfiguration
from taskfsm.api.errors import describe_validation_error
from taskfsm.api.helperdata import WorkflowManagerHelperData
from taskfsm.api.medialocation import MediaLocationSpec, credential_keys
from taskfsm.api.meta import ConfigMapOrSecretReference
from taskfsm.api.task import Task
from taskfsm.api.workflow import Workflow
from taskfsm.manifests.task_config import merge_config
from taskfsm.selection.choose import Catalog, KindPair, SelectionError, resolve_ref

MEDIA_LOCATION = KindPair(
    c.KIND_MEDIA_LOCATION,
    c.KIND_CLUSTER_MEDIA_LOCATION,
    c.PLURAL_MEDIA_LOCATIONS,
    c.PLURAL_CLUSTER_MEDIA_LOCATIONS,
)

SecretReader = Callable[[str, str], Mapping[str, Any]]
"""(namespace, name) → the Secret as a dict; raises (e.g. NotFound) when it cannot be read."""


class HelperDataError(Exception):
    """The payload cannot be built; the message is the ``status.message`` (no secret values)."""


def merged_config(
    function: Mapping[str, Any], task_template: Mapping[str, Any] | None, task: Mapping[str, Any]
) -> dict[str, str]:
    """Function ``defaultConfig`` < TaskTemplate ``config`` < Task ``config`` (D2, later wins)."""
    return merge_config(
        (function.get("spec") or {}).get("defaultConfig"),
        ((task_template or {}).get("spec") or {}).get("config"),
        (task.get("spec") or {}).get("config"),
    )


def _identity_and_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What of ``obj`` the payload reads (its name, namespace and spec): validating the whole
    object, its status and metadata bookkeeping, cost a Task a fifth of a millisecond and could
    only fail on fields the payload never uses."""
    view = {key: obj[key] for key in ("apiVersion", "kind", "spec") if key in obj}
    meta = obj.get("metadata") or {}
    view["metadata"] = {key: meta[key] for key in ("name", "namespace") if key in meta}
    return view


def build_payload(
    *,
    task: Mapping[str, Any],
    workflow: Mapping[str, Any],
    function: Mapping[str, Any],
    task_template: Mapping[str, Any] | None,
    catalog: Catalog,
    read_secret: SecretReader,
    nats: NatsConfiguration | None,
) -> bytes:
    """The ``data.json`` bytes for ``task``.

    Raises:
        HelperDataError: a MediaLocation is missing or of the wrong kind, a credential Secret or
            key is missing, or an object does not parse (message names the field).
    """
    try:
        task_model = Task.model_validate(_identity_and_spec(task))
        workflow_model = Workflow.model_validate(_identity_and_spec(workflow))
    except ValidationError as exc:
        raise HelperDataError(describe_validation_error(exc)) from None
    namespace = task["metadata"]["namespace"]
    locations: dict[str, MediaLocationSpec] = {}
    for entry in (workflow.get("spec") or {}).get("mediaLocations") or []:
        locations[entry["name"]] = _resolved_location(entry, namespace, catalog, read_secret)
    payload = WorkflowManagerHelperData.build(
        workflow=workflow_model,
        task=task_model,
        config=merged_config(function, task_template, task),
        media_locations=locations,
        nats=nats,
    )
    return payload.to_payload()


def _resolved_location(
    entry: Mapping[str, Any], namespace: str, catalog: Catalog, read_secret: SecretReader
) -> MediaLocationSpec:
    field = f"workflow.spec.mediaLocations[{entry.get('name')}].ref"
    try:
        obj = resolve_ref(entry.get("ref") or {}, MEDIA_LOCATION, namespace, catalog, field=field)
    except SelectionError as exc:
        if "does not reference" in str(exc):
            # D16: the reference's text named MediaProcessingEntity here by mistake.
            raise HelperDataError(
                f"{field} does not reference a MediaLocation or ClusterMediaLocation"
            ) from None
        raise HelperDataError(str(exc)) from None
    try:
        spec = MediaLocationSpec.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        raise HelperDataError(
            f"{obj['kind']} {obj['metadata']['name']!r}: {describe_validation_error(exc)}"
        ) from None
    cluster_scoped = obj["kind"] == c.KIND_CLUSTER_MEDIA_LOCATION
    owner = f"{obj['kind']} {obj['metadata']['name']!r}"

    def resolve(path: str, ref: ConfigMapOrSecretReference) -> Mapping[str, bytes]:
        secret_ns = ref.namespace or ""
        if not secret_ns:
            if cluster_scoped:
                raise HelperDataError(
                    f"{owner} {path} has no namespace (required for cluster-scoped locations)"
                )
            secret_ns = obj["metadata"]["namespace"]
        elif not cluster_scoped and secret_ns != obj["metadata"]["namespace"]:
            # Like a remote MediaProcessingEntity (§1.7): a namespaced object may only use its own
            # namespace's Secrets, or anyone able to create one could copy any Secret into a Job.
            raise HelperDataError(
                f"{owner} {path} references a Secret in a different namespace ({secret_ns})"
            )
        if not ref.name:
            raise HelperDataError(f"{owner} {path} has no name")
        try:
            secret = read_secret(secret_ns, ref.name)
        except Exception as exc:  # the API's own text names the Secret, never its data
            raise HelperDataError(f"{owner} {path}: {exc}") from None
        wanted = needed_keys(path, ref.key, owner)
        return pick_credentials(secret, wanted, f"{secret_ns}/{ref.name}", f"{owner} {path}")

    return spec.resolve_secret_refs(resolve)


def needed_keys(path: str, key: str | None, owner: str) -> tuple[str, ...]:
    """The Secret keys to copy for the ``secretRef`` at ``path``: the auth method's keys, or only
    ``key`` when set (it must be one of them)."""
    keys = credential_keys(path)
    if not key:
        return keys
    if key not in keys:
        uses = ", ".join(f"'{k}'" for k in keys)
        raise HelperDataError(
            f"{owner} {path}: key '{key}' is not a credential of this auth method (it uses {uses})"
        )
    return (key,)


def pick_credentials(
    secret: Mapping[str, Any], keys: tuple[str, ...], secret_name: str, used_by: str
) -> dict[str, bytes]:
    """``keys`` of ``secret`` (base64-decoded), nothing else; a missing key is an error naming
    the Secret, the key and its user, never a value."""
    data = secret.get("data") or {}
    missing = [k for k in keys if k not in data]
    if missing:
        names = ", ".join(f"'{k}'" for k in missing)
        noun = "key" if len(missing) == 1 else "keys"
        raise HelperDataError(f"Secret '{secret_name}' has no {noun} {names} (needed by {used_by})")
    return {k: base64.b64decode(data[k]) for k in keys}
