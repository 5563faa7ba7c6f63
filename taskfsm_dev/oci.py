"""OCI image archives written from a directory, without a daemon or a registry.

The controller's image (``tests/support/oci_image.py``, ``make image``) and the real node's two
local images (:mod:`taskfsm_dev.node`: the pod sandbox and the tests' workload) are packed the
same way: one gzip-compressed layer holding the directory, an image configuration, and an OCI
image layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) whose manifest is named by its
tag (``org.opencontainers.image.ref.name``) and by its full name (``io.containerd.image.name``),
plus the ``manifest.json`` of ``docker save`` pointing at the same blobs, all in one uncompressed
tar. ``podman load``, ``docker load``, ``skopeo copy`` and ``ctr images import`` read it.

File owners and modes are kept as they are on disk, modification times are clamped to
``epoch``, and entries are written in a stable order, so the same directory and epoch give the
same digests. The standard library's ``tarfile`` does the packing; no image library on PyPI
writes an OCI layout from a plain directory without a container engine behind it.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
EMPTIED = ("dev", "proc", "sys")
"""Directories packed empty: the runtime mounts them."""


class OciError(RuntimeError):
    """The archive cannot be written (the message says why)."""


@dataclass(frozen=True)
class Blob:
    """A content-addressed file of the layout."""

    digest: str
    """``sha256:<hex>``."""
    size: int
    path: Path

    def descriptor(self, media_type: str, **extra: Any) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": self.digest, "size": self.size, **extra}


@dataclass(frozen=True)
class Archive:
    """What :func:`write_archive` made."""

    path: Path
    reference: str
    """``<name>:<tag>``, the name docker, podman and containerd give the loaded image."""
    tag: str
    manifest_digest: str
    layer_diff_id: str
    """sha256 of the uncompressed layer (the image configuration's ``rootfs.diff_ids``)."""


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``target``."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target, self.sha, self.size = target, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha.update(view)
        self.size += len(view)
        self.target.write(view)
        return len(view)


def architecture() -> str:
    """The OCI architecture of this machine (an image is built for the host only)."""
    known = {"x86_64": "amd64", "aarch64": "arm64"}
    machine = platform.machine()
    if machine not in known:
        raise OciError(f"no OCI architecture known for {machine}")
    return known[machine]


def entries(rootfs: Path) -> Iterator[Path]:
    """Every path of ``rootfs`` to pack, parents before children, in a stable order."""
    for top, dirs, files in os.walk(rootfs):
        here = Path(top)
        relative = here.relative_to(rootfs)
        if relative.parts and relative.parts[0] in EMPTIED:
            dirs.clear()
            continue
        dirs.sort()
        for name in sorted([*dirs, *files]):
            yield here / name


def write_layer(rootfs: Path, out: IO[bytes], epoch: int) -> tuple[str, Blob]:
    """Pack ``rootfs`` as one gzip-compressed layer into ``out`` (a file at offset 0); returns
    the uncompressed digest (the diff ID) and the compressed blob's digest and size."""
    compressed = _Hashing(out)
    with gzip.GzipFile(fileobj=compressed, mode="wb", compresslevel=6, mtime=0) as zipped:
        uncompressed = _Hashing(zipped)  # type: ignore[arg-type]  # GzipFile is a binary stream
        with tarfile.open(fileobj=uncompressed, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for path in entries(rootfs):
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(rootfs)))
                if info is None:  # a socket: nothing an image can hold
                    continue
                info.uname = info.gname = ""
                info.mtime = min(int(info.mtime), epoch)
                if info.isreg():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    diff_id = f"sha256:{uncompressed.sha.hexdigest()}"
    return diff_id, Blob(f"sha256:{compressed.sha.hexdigest()}", compressed.size, Path(out.name))


def _json_blob(directory: Path, document: dict[str, Any]) -> Blob:
    data = json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"
    digest = hashlib.sha256(data).hexdigest()
    path = directory / digest
    path.write_bytes(data)
    return Blob(f"sha256:{digest}", len(data), path)


@contextlib.contextmanager
def _workdir(parent: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=".oci-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_archive(
    archive: Path,
    rootfs: Path,
    *,
    name: str,
    tag: str,
    config: dict[str, Any],
    created: str,
    epoch: int,
    history: Iterable[str] = (),
    annotations: dict[str, str] | None = None,
) -> Archive:
    """Pack ``rootfs`` into the image archive ``archive`` (replaced atomically).

    ``config`` is the image configuration's ``config`` (``User``, ``Entrypoint``, ``Cmd``,
    ``Env``, ``Labels``); ``history`` the ``created_by`` lines of its one layer;
    ``annotations`` those of the manifest.
    """
    reference = f"{name}:{tag}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with _workdir(archive.parent) as work:
        blobs = work / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        with (work / "layer").open("w+b") as layer_file:
            diff_id, layer = write_layer(rootfs, layer_file, epoch)
        layer = Blob(layer.digest, layer.size, blobs / layer.digest.removeprefix("sha256:"))
        (work / "layer").rename(layer.path)
        image_config = _json_blob(
            blobs,
            {
                "created": created,
                "architecture": architecture(),
                "os": "linux",
                "config": config,
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                "history": [{"created": created, "created_by": line} for line in history],
            },
        )
        manifest = _json_blob(
            blobs,
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": image_config.descriptor(MEDIA_CONFIG),
                "layers": [layer.descriptor(MEDIA_LAYER)],
                **({"annotations": annotations} if annotations else {}),
            },
        )
        index = {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                manifest.descriptor(
                    MEDIA_MANIFEST,
                    annotations={
                        "org.opencontainers.image.ref.name": tag,
                        "io.containerd.image.name": reference,
                    },
                )
            ],
        }
        docker_manifest = [
            {
                "Config": f"blobs/sha256/{image_config.path.name}",
                "RepoTags": [reference],
                "Layers": [f"blobs/sha256/{layer.path.name}"],
            }
        ]
        files = {
            "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
            "index.json": json.dumps(index, indent=2).encode(),
            "manifest.json": json.dumps(docker_manifest, indent=2).encode(),
        }
        partial = work / archive.name
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            for file_name, data in files.items():
                info = tarfile.TarInfo(file_name)
                info.size, info.mtime, info.mode = len(data), epoch, 0o644
                tar.addfile(info, io.BytesIO(data))
            for directory in ("blobs", "blobs/sha256"):
                info = tarfile.TarInfo(directory)
                info.type, info.mtime, info.mode = tarfile.DIRTYPE, epoch, 0o755
                tar.addfile(info)
            for blob in sorted(blobs.iterdir()):
                info = tarfile.TarInfo(f"blobs/sha256/{blob.name}")
                info.size, info.mtime, info.mode = blob.stat().st_size, epoch, 0o644
                with blob.open("rb") as f:
                    tar.addfile(info, f)
        partial.replace(archive)
    return Archive(archive, reference, tag, manifest.digest, diff_id)
