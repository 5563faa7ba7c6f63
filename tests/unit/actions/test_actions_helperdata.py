"""Helper payload assembly with MediaLocation credentials (§1.11, §3.7 steps 8-11, D15, D16)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from taskfsm import constants as c
from taskfsm.actions import helperdata
from taskfsm.actions.helperdata import HelperDataError
from taskfsm.kube.errors import NotFound
from taskfsm.testing.catalog import DictCatalog

NS = "ns"
VALUES = {"accessKeyID": "AKIA-value", "secretAccessKey": "very-secret-value"}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def s3(name: str, secret_ref: dict[str, Any], *, cluster: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if not cluster:
        meta["namespace"] = NS
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_CLUSTER_MEDIA_LOCATION if cluster else c.KIND_MEDIA_LOCATION,
        "metadata": meta,
        "spec": {
            "s3": {
                "bucket": "b",
                "region": "r",
                "usePathStyle": False,
                "auth": {"aws": {"secretRef": secret_ref}},
            }
        },
    }


class Secrets:
    """A fake Secret reader recording the (namespace, name) it was asked for."""

    def __init__(self, secrets: dict[tuple[str, str], dict[str, str]]) -> None:
        self.secrets = secrets
        self.reads: list[tuple[str, str]] = []

    def __call__(self, namespace: str, name: str) -> dict[str, Any]:
        self.reads.append((namespace, name))
        if (namespace, name) not in self.secrets:
            raise NotFound(f'secrets "{name}" not found')
        return {"data": {k: b64(v) for k, v in self.secrets[(namespace, name)].items()}}


def payload(
    locations: list[dict[str, Any]], catalog: DictCatalog, secrets: Secrets
) -> dict[str, Any]:
    task = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_TASK,
        "metadata": {"name": "t", "namespace": NS},
        "spec": {"workflowRef": {"name": "wf"}},
    }
    workflow = {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_WORKFLOW,
        "metadata": {"name": "wf", "namespace": NS},
        "spec": {"mediaLocations": locations},
    }
    raw = helperdata.build_payload(
        task=task,
        workflow=workflow,
        function={"spec": {}},
        task_template=None,
        catalog=catalog,
        read_secret=secrets,
        nats=None,
    )
    return json.loads(raw)


def entry(name: str, kind: str = c.KIND_MEDIA_LOCATION) -> dict[str, Any]:
    return {"name": "loc", "ref": {"kind": kind, "name": name}}


def test_d15_media_location_secret_defaults_to_its_namespace():
    """D15: a MediaLocation's secretRef without namespace is read from the ML's namespace and
    every key is copied."""
    secrets = Secrets({(NS, "creds"): VALUES})
    out = payload([entry("ml")], DictCatalog(s3("ml", {"name": "creds"})), secrets)
    assert secrets.reads == [(NS, "creds")]
    assert out["mediaLocations"]["loc"]["s3"]["auth"]["aws"]["secretRef"] == {
        "data": {k: b64(v) for k, v in VALUES.items()}
    }


def test_d15_key_copies_only_that_key():
    """D15: with key set, only that key is in the payload."""
    secrets = Secrets({(NS, "creds"): VALUES})
    out = payload(
        [entry("ml")], DictCatalog(s3("ml", {"name": "creds", "key": "accessKeyID"})), secrets
    )
    assert out["mediaLocations"]["loc"]["s3"]["auth"]["aws"]["secretRef"] == {
        "data": {"accessKeyID": b64(VALUES["accessKeyID"])}
    }


def test_d15_cluster_media_location_uses_the_named_namespace_only():
    """D15: a ClusterMediaLocation's Secret is read from the namespace it names; without one it
    is an error (never the Task's namespace)."""
    secrets = Secrets({("vault", "creds"): VALUES})
    cml = s3("cml", {"name": "creds", "namespace": "vault"}, cluster=True)
    payload([entry("cml", c.KIND_CLUSTER_MEDIA_LOCATION)], DictCatalog(cml), secrets)
    assert secrets.reads == [("vault", "creds")]
    cml = s3("cml", {"name": "creds"}, cluster=True)
    with pytest.raises(HelperDataError, match="has no namespace"):
        payload([entry("cml", c.KIND_CLUSTER_MEDIA_LOCATION)], DictCatalog(cml), secrets)


def test_d15_namespaced_location_cannot_read_another_namespace():
    """A namespaced MediaLocation naming another namespace's Secret is refused before reading."""
    secrets = Secrets({("vault", "creds"): VALUES})
    with pytest.raises(HelperDataError, match=r"different namespace \(vault\)"):
        payload(
            [entry("ml")], DictCatalog(s3("ml", {"name": "creds", "namespace": "vault"})), secrets
        )
    assert secrets.reads == []


@pytest.mark.parametrize(
    ("secret_ref", "secrets", "fragment"),
    [
        (
            {"name": "creds", "key": "sessionToken"},
            {(NS, "creds"): VALUES},
            f"Secret '{NS}/creds' has no key 'sessionToken'",
        ),
        ({"name": "absent"}, {}, 'secrets "absent" not found'),
    ],
    ids=["missing-key", "missing-secret"],
)
def test_errors_name_secrets_never_values(secret_ref, secrets, fragment):
    """Errors name the Secret, key and location path, and contain no Secret value."""
    with pytest.raises(HelperDataError) as err:
        payload([entry("ml")], DictCatalog(s3("ml", secret_ref)), Secrets(secrets))
    text = str(err.value)
    assert fragment in text
    assert "s3.auth.aws.secretRef" in text
    for value in VALUES.values():
        assert value not in text
        assert b64(value) not in text


def test_d16_wrong_kind_names_media_location():
    """D16: a mediaLocations ref of another kind says MediaLocation, not MediaProcessingEntity."""
    with pytest.raises(
        HelperDataError, match="does not reference a MediaLocation or ClusterMediaLocation"
    ):
        payload(
            [entry("ml", c.KIND_FUNCTION)], DictCatalog(s3("ml", {"name": "creds"})), Secrets({})
        )


def test_missing_media_location_is_not_found_text():
    """A mediaLocations ref to nothing reports Kubernetes' NotFound wording."""
    with pytest.raises(
        HelperDataError, match=r'medialocations\.engine\.nagare\.media "nope" not found'
    ):
        payload([entry("nope")], DictCatalog(), Secrets({}))
