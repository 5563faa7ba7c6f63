"""Helper payload assembly with MediaLocation credentials (§1.11, §3.7 steps 2-3, D15, D16)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from taskfsm.api import constants as c
from taskfsm.kube.errors import NotFound
from taskfsm.manifests import helper_payload
from taskfsm.manifests.helper_payload import HelperDataError
from tests.support.catalog import DictCatalog

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
    raw = helper_payload.build_payload(
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
    the S3 keys are copied."""
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
            {"name": "creds", "key": "secretAccessKey"},
            {(NS, "creds"): {"accessKeyID": VALUES["accessKeyID"]}},
            f"Secret '{NS}/creds' has no key 'secretAccessKey'",
        ),
        (
            {"name": "creds"},
            {(NS, "creds"): {"secretAccessKey": VALUES["secretAccessKey"]}},
            f"Secret '{NS}/creds' has no key 'accessKeyID' (needed by MediaLocation 'ml'",
        ),
        (
            {"name": "creds", "key": "sessionToken"},
            {(NS, "creds"): VALUES},
            "key 'sessionToken' is not a credential of this auth method"
            " (it uses 'accessKeyID', 'secretAccessKey')",
        ),
        ({"name": "absent"}, {}, 'secrets "absent" not found'),
    ],
    ids=["missing-named-key", "missing-method-key", "key-not-used-by-method", "missing-secret"],
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


# -- only the keys each auth method uses -------------------------------------

EXTRA = {"unrelated": "unrelated-secret-value", "other-password": "other-secret-value"}
USER_PASSWORD = {"username": "user-value", "password": "password-value"}

KINDS: list[tuple[str, dict[str, Any], tuple[str, ...], dict[str, str]]] = [
    (
        "http-basic",
        {"http": {"baseURL": "https://h", "auth": {"basic": {"secretRef": {"name": "creds"}}}}},
        ("http", "auth", "basic", "secretRef"),
        USER_PASSWORD,
    ),
    (
        "http-digest",
        {"http": {"baseURL": "https://h", "auth": {"digest": {"secretRef": {"name": "creds"}}}}},
        ("http", "auth", "digest", "secretRef"),
        USER_PASSWORD,
    ),
    (
        "http-token",
        {"http": {"baseURL": "https://h", "auth": {"token": {"secretRef": {"name": "creds"}}}}},
        ("http", "auth", "token", "secretRef"),
        {"token": "token-value"},
    ),
    (
        "s3-aws",
        {"s3": {"bucket": "b", "region": "r", "auth": {"aws": {"secretRef": {"name": "creds"}}}}},
        ("s3", "auth", "aws", "secretRef"),
        VALUES,
    ),
    (
        "opencast-basic",
        {
            "opencast": {
                "serviceRegistryURL": "https://oc",
                "auth": {"basic": {"secretRef": {"name": "creds"}}},
            }
        },
        ("opencast", "auth", "basic", "secretRef"),
        USER_PASSWORD,
    ),
    (
        "rtmp-basic",
        {"rtmp": {"baseURL": "rtmp://r", "auth": {"basic": {"secretRef": {"name": "creds"}}}}},
        ("rtmp", "auth", "basic", "secretRef"),
        USER_PASSWORD,
    ),
    (
        "rtmp-streaming-key",
        {
            "rtmp": {
                "baseURL": "rtmp://r",
                "auth": {"streamingKey": {"secretRef": {"name": "creds"}}},
            }
        },
        ("rtmp", "auth", "streamingKey", "secretRef"),
        {"streamingKey": "streaming-key-value"},
    ),
    (
        "rtsp-basic",
        {"rtsp": {"baseURL": "rtsp://r", "auth": {"basic": {"secretRef": {"name": "creds"}}}}},
        ("rtsp", "auth", "basic", "secretRef"),
        USER_PASSWORD,
    ),
    (
        "rist-encryption",
        {
            "rist": {
                "baseURL": "rist://r",
                "encryption": {"type": "aes-128", "secretRef": {"name": "creds"}},
            }
        },
        ("rist", "encryption", "secretRef"),
        {"secret": "pre-shared-key-value"},
    ),
]


def location(spec: dict[str, Any], *, cluster: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "loc"}
    if not cluster:
        meta["namespace"] = NS
    kind = c.KIND_CLUSTER_MEDIA_LOCATION if cluster else c.KIND_MEDIA_LOCATION
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def resolved_ref(out: dict[str, Any], path: tuple[str, ...]) -> Any:
    node = out["mediaLocations"]["loc"]
    for key in path:
        node = node[key]
    return node


BY_KIND = pytest.mark.parametrize(
    ("spec", "path", "needed"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS]
)


@BY_KIND
def test_each_kind_copies_only_the_keys_its_auth_method_uses(spec, path, needed):
    """A secretRef without key copies exactly the keys its auth method uses,
    never the Secret's other keys."""
    secrets = Secrets({(NS, "creds"): {**needed, **EXTRA}})
    out = payload([entry("loc")], DictCatalog(location(spec)), secrets)
    assert resolved_ref(out, path) == {"data": {k: b64(v) for k, v in sorted(needed.items())}}
    assert "unrelated" not in json.dumps(out)
    for value in EXTRA.values():
        assert b64(value) not in json.dumps(out)


@BY_KIND
def test_each_kind_reports_a_missing_key_by_name_never_value(spec, path, needed):
    """A Secret lacking one of the method's keys is an error naming the Secret,
    the key and the ClusterMediaLocation, with no value of the Secret in it."""
    missing = sorted(needed)[-1]
    present = {k: v for k, v in needed.items() if k != missing}
    spec = copy.deepcopy(spec)
    ref = spec
    for key in path:
        ref = ref[key]
    ref["namespace"] = "vault"
    secrets = Secrets({("vault", "creds"): {**present, **EXTRA}})
    with pytest.raises(HelperDataError) as err:
        payload(
            [entry("loc", c.KIND_CLUSTER_MEDIA_LOCATION)],
            DictCatalog(location(spec, cluster=True)),
            secrets,
        )
    text = str(err.value)
    assert f"Secret 'vault/creds' has no key '{missing}'" in text
    assert f"ClusterMediaLocation 'loc' {'.'.join(path)}" in text
    for value in (*present.values(), *EXTRA.values()):
        assert value not in text
        assert b64(value) not in text


def test_a_secret_missing_several_keys_names_them_all():
    """Every missing key is named at once."""
    with pytest.raises(HelperDataError, match="has no keys 'accessKeyID', 'secretAccessKey'"):
        payload(
            [entry("ml")], DictCatalog(s3("ml", {"name": "creds"})), Secrets({(NS, "creds"): EXTRA})
        )


def test_key_narrows_to_one_of_the_method_keys():
    """SecretRef.key copies only that key, and only if the method uses it (a
    key the Job never reads is refused rather than copied)."""
    spec = {
        "http": {
            "baseURL": "https://h",
            "auth": {"basic": {"secretRef": {"name": "creds", "key": "username"}}},
        }
    }
    secrets = Secrets({(NS, "creds"): {**USER_PASSWORD, **EXTRA}})
    out = payload([entry("loc")], DictCatalog(location(spec)), secrets)
    assert resolved_ref(out, ("http", "auth", "basic", "secretRef")) == {
        "data": {"username": b64("user-value")}
    }
    spec["http"]["auth"]["basic"]["secretRef"]["key"] = "unrelated"
    with pytest.raises(HelperDataError, match="key 'unrelated' is not a credential") as err:
        payload([entry("loc")], DictCatalog(location(spec)), secrets)
    assert "'username', 'password'" in str(err.value)
    assert "unrelated-secret-value" not in str(err.value)


def model_secret_ref_paths(model: type, prefix: str = "") -> set[str]:
    """Every path at which ``model``'s field types can hold a ConfigMapOrSecretReference."""
    import typing

    from pydantic import BaseModel

    from taskfsm.api.meta import ConfigMapOrSecretReference

    out: set[str] = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        for arg in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(arg, type) and issubclass(arg, ConfigMapOrSecretReference):
                out.add(path)
            elif isinstance(arg, type) and issubclass(arg, BaseModel):
                out |= model_secret_ref_paths(arg, path + ".")
    return out


def test_every_secret_ref_path_has_its_keys():
    """Every secretRef the MediaLocation models can hold has its keys in
    CREDENTIAL_KEYS (a new auth method cannot silently copy a whole Secret), and KINDS above
    tests each of them."""
    from taskfsm.api.medialocation import CREDENTIAL_KEYS, MediaLocationSpec

    paths = model_secret_ref_paths(MediaLocationSpec)
    assert paths == set(CREDENTIAL_KEYS)
    assert {".".join(path) for _, _, path, _ in KINDS} == paths
    for _, spec, path, needed in KINDS:
        refs = MediaLocationSpec.model_validate(spec).secret_refs()
        assert [p for p, _ in refs] == [".".join(path)]
        assert CREDENTIAL_KEYS[".".join(path)] == tuple(needed)
