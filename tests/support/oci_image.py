"""The controller image as a file a user can load: an OCI image archive of the tested root
filesystem, and a CycloneDX SBOM of its Python packages beside it (``make image``).

The root filesystem is the one ``tests/support/image.py`` builds offline from the Dockerfile's
steps and ``tests/e2e/test_image.py`` runs; this module only packs it, without a daemon or a
registry:

* one gzip-compressed layer holding the whole filesystem (``/dev``, ``/proc`` and ``/sys`` empty:
  a container runtime mounts them), file owners and modes as built, modification times clamped
  to the commit's time (``SOURCE_DATE_EPOCH`` overrides it), so the same filesystem and commit
  give the same layer digest;
* the image configuration from the Dockerfile: ``USER``, ``ENTRYPOINT``, ``CMD``, plus ``PATH``,
  ``LANG`` and the ``org.opencontainers.image.*`` labels;
* an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) whose manifest is named
  by its tag (``org.opencontainers.image.ref.name``) and by its full name
  (``io.containerd.image.name``), plus the ``manifest.json`` of ``docker save`` pointing at the
  same blobs, all in one uncompressed tar: ``podman load``, ``docker load``, ``skopeo copy
  oci-archive:...`` and ``skopeo copy docker-archive:...`` read it.

The SBOM lists every distribution installed in the image's environment (``/opt/taskfsm``, read
from its ``*.dist-info`` metadata, so it is what the image holds, not what a lock file says) as
a CycloneDX 1.6 JSON document made with cyclonedx-python-lib, the image as its subject.

    python -m tests.support.oci_image [--output dist]

writes ``dist/taskfsm-<version>.oci.tar`` and ``dist/taskfsm-<version>.cdx.json`` and prints
their paths. docs/install.md says how a release publishes them.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import importlib.metadata
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from tests.support import image

REPO_ROOT = image.REPO_ROOT
IMAGE_NAME = "ghcr.io/nagare-media/taskfsm"
"""The name the manifests give the image (deploy/manager.yaml runs it); taskfsm's version is the
tag."""
SOURCE_URL = "https://github.com/nagare-media/taskfsm"
ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8")
"""The environment the entry point gets (tests/support/image.py starts it with the same)."""
VENV_SITE_PACKAGES = "opt/taskfsm/lib/python3.11/site-packages"
EMPTIED = ("dev", "proc", "sys")
"""Directories packed empty: the runtime mounts them."""
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_CHUNK = 1 << 20


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
class ImageArchive:
    """What :func:`write` made."""

    archive: Path
    sbom: Path
    reference: str
    """``<name>:<tag>``, the name docker and podman give the loaded image."""
    tag: str
    """The archive's ``org.opencontainers.image.ref.name``: ``oci-archive:<archive>:<tag>``."""
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


def source_date_epoch() -> int:
    """``$SOURCE_DATE_EPOCH``, else the time of the checked-out commit (``git log -1``)."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    proc = subprocess.run(
        ["git", "log", "-1", "--format=%ct"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise image.ImageError(
            f"no commit time (git log: {proc.stderr.strip()}); set SOURCE_DATE_EPOCH"
        )
    return int(proc.stdout.strip())


def _entries(rootfs: Path) -> Iterator[Path]:
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
            for path in _entries(rootfs):
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


def _architecture() -> str:
    machine = platform.machine()
    known = {"x86_64": "amd64", "aarch64": "arm64"}
    if machine not in known:
        raise image.ImageError(f"no OCI architecture known for {machine}")
    return known[machine]


def image_config(spec: image.Dockerfile, diff_id: str, created: str, version: str) -> dict:
    """The OCI image configuration: the Dockerfile's run settings and the one layer."""
    return {
        "created": created,
        "architecture": _architecture(),
        "os": "linux",
        "config": {
            "User": spec.user,
            "Entrypoint": list(spec.entrypoint),
            "Cmd": list(spec.cmd),
            "Env": list(ENV),
            "Labels": labels(version, created),
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [
            {
                "created": created,
                "created_by": (
                    f"tests/support/image.py: Debian {spec.release} with python3.11 "
                    "(mmdebstrap), scripts/image-install.sh deps and project"
                ),
            }
        ],
    }


def labels(version: str, created: str) -> dict[str, str]:
    return {
        "org.opencontainers.image.title": "taskfsm",
        "org.opencontainers.image.description": (
            "taskfsm, the Kubernetes controller for the Tasks of the nagare media engine"
        ),
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.source": SOURCE_URL,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }


def sbom(rootfs: Path, version: str, created: str) -> str:
    """CycloneDX 1.6 JSON: the image as the subject, every distribution of its environment as a
    library component (name, version, pypi purl, licence as its metadata states it)."""
    from cyclonedx.contrib.license.factories import LicenseFactory
    from cyclonedx.contrib.this.builders import this_tool
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output import make_outputter
    from cyclonedx.schema import OutputFormat, SchemaVersion
    from packageurl import PackageURL

    site = rootfs / VENV_SITE_PACKAGES
    if not site.is_dir():
        raise image.ImageError(f"{site} is missing: not an image root filesystem")
    bom = Bom()
    bom.metadata.timestamp = datetime.fromisoformat(created)
    bom.metadata.tools.tools.add(this_tool())
    bom.metadata.component = subject = Component(
        type=ComponentType.CONTAINER,
        name=IMAGE_NAME,
        version=version,
        bom_ref=f"{IMAGE_NAME}:{version}",
        purl=PackageURL(type="oci", name="taskfsm", version=None,
                        qualifiers={"repository_url": IMAGE_NAME, "tag": version}),
    )  # fmt: skip
    licenses = LicenseFactory()
    components = []
    for dist in sorted(
        importlib.metadata.distributions(path=[str(site)]), key=lambda d: d.metadata["Name"]
    ):
        name, dist_version = dist.metadata["Name"], dist.version
        purl = PackageURL(type="pypi", name=name.lower().replace("_", "-"), version=dist_version)
        stated = dist.metadata.get("License-Expression") or dist.metadata.get("License") or ""
        found = [licenses.make_from_string(stated)] if stated and "\n" not in stated else []
        component = Component(
            type=ComponentType.LIBRARY,
            name=name,
            version=dist_version,
            purl=purl,
            bom_ref=purl.to_string(),
            licenses=found,
        )
        components.append(component)
        bom.components.add(component)
    bom.register_dependency(subject, components)
    outputter = make_outputter(bom, OutputFormat.JSON, SchemaVersion.V1_6)
    return outputter.output_as_string(indent=2) + "\n"


@contextlib.contextmanager
def _workdir(parent: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=".oci-", dir=parent))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write(output: Path, rootfs: Path | None = None) -> ImageArchive:
    """Build (or find) the root filesystem, pack it into ``output/taskfsm-<version>.oci.tar``
    and write its SBOM beside it (each replaced atomically)."""
    from taskfsm.tools.deploygen import project_version

    rootfs = rootfs or image.build()
    spec = image.dockerfile()
    version = project_version()
    epoch = source_date_epoch()
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reference = f"{IMAGE_NAME}:{version}"
    output.mkdir(parents=True, exist_ok=True)
    archive = output / f"taskfsm-{version}.oci.tar"
    sbom_path = output / f"taskfsm-{version}.cdx.json"
    with _workdir(output) as work:
        blobs = work / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        start = time.monotonic()
        with (work / "layer").open("w+b") as layer_file:
            diff_id, layer = write_layer(rootfs, layer_file, epoch)
        layer = Blob(layer.digest, layer.size, blobs / layer.digest.removeprefix("sha256:"))
        (work / "layer").rename(layer.path)
        print(f"image: layer packed in {time.monotonic() - start:.0f} s", file=sys.stderr)
        config = _json_blob(blobs, image_config(spec, diff_id, created, version))
        manifest = _json_blob(
            blobs,
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": config.descriptor(MEDIA_CONFIG),
                "layers": [layer.descriptor(MEDIA_LAYER)],
                "annotations": {
                    "org.opencontainers.image.created": created,
                    "org.opencontainers.image.version": version,
                    "org.opencontainers.image.source": SOURCE_URL,
                },
            },
        )
        index = {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                manifest.descriptor(
                    MEDIA_MANIFEST,
                    annotations={
                        "org.opencontainers.image.ref.name": version,
                        "io.containerd.image.name": reference,
                    },
                )
            ],
        }
        docker_manifest = [
            {
                "Config": f"blobs/sha256/{config.path.name}",
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
            for name, data in files.items():
                info = tarfile.TarInfo(name)
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
        partial_sbom = work / sbom_path.name
        partial_sbom.write_text(sbom(rootfs, version, created), encoding="utf-8")
        partial_sbom.replace(sbom_path)
    return ImageArchive(archive, sbom_path, reference, version, manifest.digest, diff_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.oci_image",
        description="Write the controller image as an OCI archive, with its CycloneDX SBOM.",
    )
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "dist", help="directory")
    args = parser.parse_args(argv)
    start = time.monotonic()
    result = write(args.output)
    print(result.archive)
    print(result.sbom)
    size = result.archive.stat().st_size / 2**20
    print(
        f"image: {result.reference} ({size:.0f} MiB, manifest {result.manifest_digest}) "
        f"in {time.monotonic() - start:.0f} s; load it with `podman load -i {result.archive}` "
        f"or `docker load -i {result.archive}`",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
