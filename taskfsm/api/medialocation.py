"""MediaLocation and ClusterMediaLocation: where media is read and written.

A location's spec is exactly one backend -- ``http``, ``s3``, ``opencast``, ``rtmp``, ``rtsp`` or
``rist`` -- each with its own credentials, given as ``secretRef``\\ s (ConfigMapOrSecretReference).
The Task controller copies the spec of every location a Workflow lists into the helper payload,
with each ``secretRef`` replaced by the Secret's data (``resolve_secret_refs``; docs/behaviour.md
§1.8, §1.11, D15).

The Secret keys each auth method uses are :data:`CREDENTIAL_KEYS` (by ``secretRef`` path); only
those are copied (docs/api.md "Credentials in the helper data", docs/behaviour.md D15).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator
from pydantic.config import JsonDict

from taskfsm.api import duration
from taskfsm.api.base import InlineUnion, K8sModel
from taskfsm.api.constants import (
    KIND_CLUSTER_MEDIA_LOCATION,
    KIND_MEDIA_LOCATION,
    PLURAL_CLUSTER_MEDIA_LOCATIONS,
    PLURAL_MEDIA_LOCATIONS,
)
from taskfsm.api.meta import ConfigMapOrSecretReference
from taskfsm.api.resource import ApiObject
from taskfsm.api.scalars import GoDuration

HTTP_URL_PATTERN = r"^(http|https)://.*$"
RTMP_URL_PATTERN = r"^(rtmp|rtmpe|rtmps|rtmpt|rtmpte|rtmpts)://.*$"
RTSP_URL_PATTERN = r"^(rtsp|rtsps|rtspu)://.*$"
RIST_URL_PATTERN = r"^rist://.*$"
RIST_MAX_BUFFER_SIZE = "30s"
_LIST_MAP_BY_NAME: JsonDict = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["name"],
}

_USER_PASSWORD = ("username", "password")
CREDENTIAL_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "http.auth.basic.secretRef": _USER_PASSWORD,
        "http.auth.digest.secretRef": _USER_PASSWORD,
        "http.auth.token.secretRef": ("token",),
        "s3.auth.aws.secretRef": ("accessKeyID", "secretAccessKey"),
        "opencast.auth.basic.secretRef": _USER_PASSWORD,
        "rtmp.auth.basic.secretRef": _USER_PASSWORD,
        "rtmp.auth.streamingKey.secretRef": ("streamingKey",),
        "rtsp.auth.basic.secretRef": _USER_PASSWORD,
        "rist.encryption.secretRef": ("secret",),
    }
)
"""The Secret keys a Job reads for the ``secretRef`` at each path of a MediaLocation spec (the
paths :meth:`MediaLocationSpec.secret_refs` yields). Only these keys reach the helper data; every
``secretRef`` path of the spec has an entry (a unit test checks it)."""


def credential_keys(path: str) -> tuple[str, ...]:
    """The Secret keys the auth method at ``path`` uses, e.g. ``("token",)`` for
    ``http.auth.token.secretRef``. Raises ``KeyError`` for a path with no auth method."""
    return CREDENTIAL_KEYS[path]


class SecretAuth(K8sModel):
    """Credentials in a Secret."""

    secret_ref: ConfigMapOrSecretReference = Field(alias="secretRef")
    """The Secret (and optionally the one ``key``) holding the credentials."""


class NameValue(K8sModel):
    """An HTTP header or query argument."""

    name: str
    """Header or argument name."""
    value: str | None = None
    """Header or argument value."""


# --- http ----------------------------------------------------------------------------------------


class TokenAuth(SecretAuth):
    """Token authentication: the Secret's ``token`` is sent in a header."""

    header_name: str = Field(default="Authorization", alias="headerName")
    """The header carrying the token."""
    header_value_prefix: str = Field(default="Bearer ", alias="headerValuePrefix")
    """Written before the token in the header value."""


class HTTPAuth(InlineUnion):
    """Exactly one of ``basic``, ``digest`` or ``token``."""

    basic: SecretAuth | None = None
    """HTTP basic authentication (``username``, ``password``)."""
    digest: SecretAuth | None = None
    """HTTP digest authentication (``username``, ``password``)."""
    token: TokenAuth | None = None
    """Token authentication (``token``)."""


class HTTPMediaLocation(K8sModel):
    """Media over HTTP(S)."""

    base_url: str = Field(alias="baseURL", pattern=HTTP_URL_PATTERN)
    """Base URL, ``http://`` or ``https://``."""
    headers: list[NameValue] | None = Field(default=None, json_schema_extra=_LIST_MAP_BY_NAME)
    """Headers sent with every request."""
    query_args: list[NameValue] | None = Field(
        default=None, alias="queryArgs", json_schema_extra=_LIST_MAP_BY_NAME
    )
    """Query arguments added to every request."""
    auth: HTTPAuth | None = None
    """Authentication."""


# --- s3 ------------------------------------------------------------------------------------------


class S3Auth(InlineUnion):
    """S3 credentials: ``aws``."""

    aws: SecretAuth
    """AWS credentials (``accessKeyID``, ``secretAccessKey``)."""


class S3MediaLocation(K8sModel):
    """Media in an S3 bucket."""

    bucket: str
    """Bucket name."""
    region: str
    """Bucket region."""
    auth: S3Auth
    """Authentication."""
    endpoint_url: str | None = Field(default=None, alias="endpointURL")
    """Endpoint of an S3-compatible service (e.g. MinIO)."""
    use_path_style: bool = Field(default=False, alias="usePathStyle")
    """Address the bucket in the path rather than the host name."""


# --- opencast ------------------------------------------------------------------------------------


class OpencastAuth(InlineUnion):
    """Opencast credentials: ``basic``."""

    basic: SecretAuth | None = None
    """HTTP basic authentication (``username``, ``password``)."""


class OpencastEndpointOverwrites(K8sModel):
    """Endpoints used instead of those the service registry announces."""

    external_api: str | None = Field(default=None, alias="externalAPI", pattern=HTTP_URL_PATTERN)
    """URL of the External API."""


class OpencastMediaLocation(K8sModel):
    """Media in an Opencast installation."""

    service_registry_url: str = Field(alias="serviceRegistryURL", pattern=HTTP_URL_PATTERN)
    """URL of the Opencast service registry."""
    endpoint_overwrites: OpencastEndpointOverwrites | None = Field(
        default=None, alias="endpointOverwrites"
    )
    """Endpoints to use instead of the announced ones."""
    headers: list[NameValue] | None = Field(default=None, json_schema_extra=_LIST_MAP_BY_NAME)
    """Headers sent with every request."""
    query_args: list[NameValue] | None = Field(
        default=None, alias="queryArgs", json_schema_extra=_LIST_MAP_BY_NAME
    )
    """Query arguments added to every request."""
    auth: OpencastAuth
    """Authentication."""


# --- rtmp ----------------------------------------------------------------------------------------


class RTMPAuth(InlineUnion):
    """At least one of ``basic`` and ``streamingKey``."""

    AT_MOST_ONE: ClassVar[bool] = False

    basic: SecretAuth | None = None
    """Basic authentication (``username``, ``password``)."""
    streaming_key: SecretAuth | None = Field(default=None, alias="streamingKey")
    """Streaming key (``streamingKey``)."""


class RTMPMediaLocation(K8sModel):
    """Media streamed over RTMP."""

    base_url: str = Field(alias="baseURL", pattern=RTMP_URL_PATTERN)
    """Base URL: rtmp, rtmpe, rtmps, rtmpt, rtmpte or rtmpts."""
    app: str | None = None
    """RTMP application."""
    query_args: list[NameValue] | None = Field(
        default=None, alias="queryArgs", json_schema_extra=_LIST_MAP_BY_NAME
    )
    """Query arguments."""
    auth: RTMPAuth | None = None
    """Authentication."""


# --- rtsp ----------------------------------------------------------------------------------------


class RTSPTransportProtocol(StrEnum):
    """RTSP transport."""

    AUTO = "auto"
    UDP = "udp"
    TCP = "tcp"
    UDP_MULTICAST = "udp_multicast"
    HTTP = "http"
    HTTPS = "https"


class RTSPAuth(InlineUnion):
    """RTSP credentials: ``basic``."""

    basic: SecretAuth | None = None
    """Basic authentication (``username``, ``password``)."""


class RTSPMediaLocation(K8sModel):
    """Media streamed over RTSP."""

    base_url: str = Field(alias="baseURL", pattern=RTSP_URL_PATTERN)
    """Base URL: rtsp, rtsps or rtspu."""
    transport_protocol: RTSPTransportProtocol = Field(
        default=RTSPTransportProtocol.AUTO, alias="transportProtocol"
    )
    """Transport protocol."""
    query_args: list[NameValue] | None = Field(
        default=None, alias="queryArgs", json_schema_extra=_LIST_MAP_BY_NAME
    )
    """Query arguments."""
    auth: RTSPAuth | None = None
    """Authentication."""


# --- rist ----------------------------------------------------------------------------------------


class RISTProfile(StrEnum):
    """RIST profile."""

    SIMPLE = "simple"
    MAIN = "main"
    ADVANCED = "advanced"


class RISTEncryptionType(StrEnum):
    """RIST encryption."""

    AES_128 = "aes-128"
    AES_256 = "aes-256"


class RISTEncryption(K8sModel):
    """RIST encryption; the Secret's ``secret`` is the pre-shared key."""

    type: RISTEncryptionType
    """``aes-128`` or ``aes-256``."""
    secret_ref: ConfigMapOrSecretReference = Field(alias="secretRef")
    """The Secret holding the key."""


_BUFFER_SIZE_RULE: JsonDict = {
    "x-kubernetes-validations": [
        {
            "rule": "duration(self) >= duration('0s')"
            f" && duration(self) <= duration('{RIST_MAX_BUFFER_SIZE}')",
            "message": f"must be between 0s and {RIST_MAX_BUFFER_SIZE}",
        }
    ]
}


class RISTMediaLocation(K8sModel):
    """Media streamed over RIST."""

    base_url: str = Field(alias="baseURL", pattern=RIST_URL_PATTERN)
    """Base URL, ``rist://``."""
    profile: RISTProfile = RISTProfile.MAIN
    """RIST profile."""
    buffer_size: GoDuration | None = Field(
        default=None, alias="bufferSize", json_schema_extra=_BUFFER_SIZE_RULE
    )
    """Buffer size as a duration, 0s to 30s (nagare's webhook rule, §5)."""
    encryption: RISTEncryption | None = None
    """Encryption."""

    @field_validator("buffer_size")
    @classmethod
    def _buffer_size_in_range(cls, value: str | None) -> str | None:
        if value is not None:
            nanoseconds = duration.parse_go_duration(value)
            if not 0 <= nanoseconds <= duration.parse_go_duration(RIST_MAX_BUFFER_SIZE):
                raise ValueError(f"must be between 0s and {RIST_MAX_BUFFER_SIZE} (got {value})")
        return value


# --- the location --------------------------------------------------------------------------------


class MediaLocationSpec(InlineUnion):
    """Exactly one backend: ``http``, ``s3``, ``opencast``, ``rtmp``, ``rtsp`` or ``rist``."""

    http: HTTPMediaLocation | None = None
    """HTTP(S) server."""
    s3: S3MediaLocation | None = None
    """S3 bucket."""
    opencast: OpencastMediaLocation | None = None
    """Opencast installation."""
    rtmp: RTMPMediaLocation | None = None
    """RTMP stream."""
    rtsp: RTSPMediaLocation | None = None
    """RTSP stream."""
    rist: RISTMediaLocation | None = None
    """RIST stream."""

    def secret_refs(self) -> Iterator[tuple[str, ConfigMapOrSecretReference]]:
        """Every ``secretRef`` in this spec as ``(JSON path, reference)``, e.g.
        ``("s3.auth.aws.secretRef", ref)``, in field order."""
        yield from _secret_refs(self, "")

    def resolve_secret_refs(
        self, resolve: Callable[[str, ConfigMapOrSecretReference], Mapping[str, bytes]]
    ) -> MediaLocationSpec:
        """A copy with each ``secretRef`` replaced by ``ref.with_data(resolve(path, ref))``.

        ``resolve`` fetches the Secret and keeps only the keys the auth method at ``path`` uses
        (:func:`credential_keys`, narrowed to ``ref.key`` when set; D15); whatever it raises
        propagates. The copy serialises each reference as ``{"data": {...}}`` (§1.11).
        """
        copy = self.model_copy(deep=True)
        for path, ref in list(copy.secret_refs()):
            owner_path, _, attribute = path.rpartition(".")
            owner = _walk(copy, owner_path)
            setattr(owner, _field_name(owner, attribute), ref.with_data(resolve(path, ref)))
        return copy


def _field_name(model: BaseModel, alias: str) -> str:
    for name, info in type(model).model_fields.items():
        if (info.alias or name) == alias:
            return name
    raise KeyError(alias)


def _walk(model: Any, path: str) -> Any:
    for alias in path.split("."):
        model = getattr(model, _field_name(model, alias))
    return model


def _secret_refs(model: BaseModel, prefix: str) -> Iterator[tuple[str, ConfigMapOrSecretReference]]:
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        path = f"{prefix}{info.alias or name}"
        if isinstance(value, ConfigMapOrSecretReference):
            yield path, value
        elif isinstance(value, BaseModel):
            yield from _secret_refs(value, path + ".")


class MediaLocation(ApiObject):
    """``engine.nagare.media/v1alpha1`` MediaLocation (namespaced, no status)."""

    KIND: ClassVar[str] = KIND_MEDIA_LOCATION
    PLURAL: ClassVar[str] = PLURAL_MEDIA_LOCATIONS

    kind: Literal["MediaLocation"] = "MediaLocation"
    spec: MediaLocationSpec
    """The backend."""


class ClusterMediaLocation(ApiObject):
    """``engine.nagare.media/v1alpha1`` ClusterMediaLocation (cluster-scoped, no status)."""

    KIND: ClassVar[str] = KIND_CLUSTER_MEDIA_LOCATION
    PLURAL: ClassVar[str] = PLURAL_CLUSTER_MEDIA_LOCATIONS
    NAMESPACED: ClassVar[bool] = False

    kind: Literal["ClusterMediaLocation"] = "ClusterMediaLocation"
    spec: MediaLocationSpec
    """The backend."""
