"""Media: the ``inputs`` and ``outputs`` of Tasks and Workflows (docs/behaviour.md §1.9).

The Task controller never interprets media; it copies a Task's lists verbatim into the helper
payload (§1.11). The models therefore type what the spec names and keep everything else: unknown
members survive, and the per-stream ``audio``/``video``/``subtitle``/``data`` descriptions are
opaque objects (their inner types changed over nagare's history, e.g. video ``sar`` and frame
rates went from numbers to strings), so no version's data is rejected or pruned.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import ConfigDict, Field, model_validator

from taskfsm.api.base import K8sModel
from taskfsm.api.scalars import GoDuration, Int64, OpaqueObject, StringMap


class MediaType(StrEnum):
    """What a Media carries."""

    MEDIA = "media"
    METADATA = "metadata"


class MediaDirection(StrEnum):
    """Who moves the data."""

    PUSH = "push"
    PULL = "pull"


class MediaHumanReadable(K8sModel):
    """Names for people."""

    name: str | None = None
    """A short human-readable name."""


class MediaPortBinding(K8sModel):
    """A port of the Function this Media is bound to."""

    id: str
    """Port identifier."""


class MediaChecksum(K8sModel):
    """A checksum of the media."""

    alg: str
    """Checksum algorithm, e.g. ``sha256``."""
    sum: str
    """Checksum value."""


class MediaContainer(K8sModel):
    """The container format."""

    name: str
    """Container format name, e.g. ``mp4``."""


class MediaCodec(K8sModel):
    """A stream's codec."""

    name: str
    """Codec name, e.g. ``h264``."""
    profile: str | None = None
    """Codec profile."""
    level: str | None = None
    """Codec level."""


class MediaStreamProperty(K8sModel):
    """A free-form property of a stream."""

    name: str
    """Property name."""
    value: str
    """Property value."""


STREAM_KINDS = ("audio", "video", "subtitle", "data")
"""The stream description members; a stream has exactly one of them."""


class MediaStream(K8sModel):
    """One stream of a media: common members plus exactly one of audio, video, subtitle, data."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": [kind]} for kind in STREAM_KINDS]}
    )

    id: str
    """Stream identifier."""
    codec: MediaCodec | None = None
    """The stream's codec."""
    bit_rate: Int64 | None = Field(default=None, alias="bitRate")
    """Bit rate in bit/s."""
    duration: GoDuration | None = None
    """Duration as a Go duration string, e.g. ``3m0s``."""
    properties: list[MediaStreamProperty] | None = None
    """Free-form properties."""
    audio: OpaqueObject | None = None
    """Audio stream description (bitDepth, channels, samplingRate, ...)."""
    video: OpaqueObject | None = None
    """Video stream description (resolution {width, hight, sar}, frameRate, color, ...)."""
    subtitle: OpaqueObject | None = None
    """Subtitle stream description (language, ...)."""
    data: OpaqueObject | None = None
    """Data stream description."""

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Self:
        present = [kind for kind in STREAM_KINDS if getattr(self, kind) is not None]
        if len(present) != 1:
            raise ValueError(
                f"exactly one of {', '.join(STREAM_KINDS)} must be set"
                f" (got {', '.join(present) or 'none'})"
            )
        return self


class MediaMetadata(K8sModel):
    """Technical metadata of a media (always written, ``{}`` when nothing is known)."""

    mime_type: str | None = Field(default=None, alias="mimeType")
    """MIME type, e.g. ``video/mp4``."""
    codec_type: str | None = Field(default=None, alias="codecType")
    """Codec type."""
    duration: GoDuration | None = None
    """Duration as a Go duration string."""
    bit_rate: Int64 | None = Field(default=None, alias="bitRate")
    """Overall bit rate in bit/s."""
    size: Int64 | None = None
    """Size in bytes."""
    checksums: list[MediaChecksum] | None = None
    """Checksums of the media."""
    container: MediaContainer | None = None
    """Container format."""
    streams: list[MediaStream] | None = None
    """Streams of the media."""


class Media(K8sModel):
    """One input or output of a Task or Workflow (§1.9).

    ``id`` and ``type`` are required; ``portBindings`` and ``metadata`` are always written
    (``[]`` and ``{}`` when empty), as nagare's Go types do.
    """

    model_config = ConfigDict(
        json_schema_extra={"required": ["id", "type", "portBindings", "metadata"]}
    )

    id: str
    """Media identifier."""
    human_readable: MediaHumanReadable | None = Field(default=None, alias="humanReadable")
    """Names for people."""
    type: MediaType
    """``media`` or ``metadata``."""
    direction: MediaDirection | None = None
    """``push`` or ``pull``."""
    port_bindings: list[MediaPortBinding] = Field(default_factory=list, alias="portBindings")
    """Function ports this media is bound to."""
    url: str | None = None
    """Where the media is."""
    labels: StringMap | None = None
    """Free-form labels."""
    metadata: MediaMetadata = Field(default_factory=MediaMetadata)
    """Technical metadata."""
