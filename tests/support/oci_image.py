"""The controller image as a file a user can load: an OCI image archive of the tested root
filesystem, and a CycloneDX SBOM of its Python packages beside it (``make image``).

The root filesystem is the one ``tests/support/image.py`` builds offline from the Dockerfile's
steps and ``tests/e2e/test_image.py`` runs; this module only packs it, without a daemon or a
registry, as :mod:`taskfsm_dev.oci` packs any directory (one layer, the whole filesystem with
``/dev``, ``/proc`` and ``/sys`` empty, modification times clamped to the commit's time,
``SOURCE_DATE_EPOCH`` overriding it, so the same filesystem and commit give the same digests),
with the image configuration from the Dockerfile: ``USER``, ``ENTRYPOINT``, ``CMD``, plus
``PATH``, ``LANG`` and the ``org.opencontainers.image.*`` labels. ``podman load``, ``docker
load``, ``skopeo copy oci-archive:...``, ``skopeo copy docker-archive:...`` and ``ctr images
import`` read it.

The SBOM lists every distribution installed in the image's environment (``/opt/taskfsm``, read
from its ``*.dist-info`` metadata, so it is what the image holds, not what a lock file says) as
a CycloneDX 1.6 JSON document made with cyclonedx-python-lib, the image as its subject.

    python -m tests.support.oci_image [--output dist]

writes ``dist/taskfsm-<version>.oci.tar`` and ``dist/taskfsm-<version>.cdx.json`` and prints
their paths. docs/install.md says how a release publishes them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from taskfsm_dev import oci
from tests.support import image

REPO_ROOT = image.REPO_ROOT
IMAGE_NAME = "ghcr.io/nagare-media/taskfsm"
"""The name the manifests give the image (deploy/manager.yaml runs it); taskfsm's version is the
tag."""
SOURCE_URL = "https://github.com/nagare-media/taskfsm"
ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8")
"""The environment the entry point gets (tests/support/image.py starts it with the same)."""
VENV_SITE_PACKAGES = "opt/taskfsm/lib/python3.11/site-packages"


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


def image_config(spec: image.Dockerfile, version: str, created: str) -> dict[str, Any]:
    """The image configuration's run settings: the Dockerfile's, with the labels."""
    return {
        "User": spec.user,
        "Entrypoint": list(spec.entrypoint),
        "Cmd": list(spec.cmd),
        "Env": list(ENV),
        "Labels": labels(version, created),
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


def debian_packages(rootfs: Path) -> list[tuple[str, str, str]]:
    """(name, version, architecture) of every Debian package installed in ``rootfs``, from dpkg's
    own database (``/var/lib/dpkg/status``), sorted by name."""
    status = rootfs / "var/lib/dpkg/status"
    if not status.is_file():
        raise image.ImageError(f"{status} is missing: not a Debian root filesystem")
    found = []
    for stanza in status.read_text(encoding="utf-8").split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            found.append((fields["Package"], fields["Version"], fields.get("Architecture", "all")))
    return sorted(found)


def sbom(rootfs: Path, version: str, created: str) -> str:
    """CycloneDX 1.6 JSON: the image as the subject, every distribution of its environment as a
    library component (name, version, pypi purl, licence as its metadata states it), and every
    Debian package of its base as an application component (name, version, deb purl with its
    architecture and release)."""
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
    release = image.dockerfile().release
    for name, deb_version, arch in debian_packages(rootfs):
        purl = PackageURL(
            type="deb",
            namespace="debian",
            name=name,
            version=deb_version,
            qualifiers={"arch": arch, "distro": f"debian-{release}"},
        )
        component = Component(
            type=ComponentType.APPLICATION,
            name=name,
            version=deb_version,
            purl=purl,
            bom_ref=purl.to_string(),
        )
        components.append(component)
        bom.components.add(component)
    bom.register_dependency(subject, components)
    outputter = make_outputter(bom, OutputFormat.JSON, SchemaVersion.V1_6)
    return outputter.output_as_string(indent=2) + "\n"


def write(output: Path, rootfs: Path | None = None) -> ImageArchive:
    """Build (or find) the root filesystem, pack it into ``output/taskfsm-<version>.oci.tar``
    and write its SBOM beside it (each replaced atomically)."""
    from taskfsm.tools.deploygen import project_version

    rootfs = rootfs or image.build()
    spec = image.dockerfile()
    version = project_version()
    epoch = source_date_epoch()
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    output.mkdir(parents=True, exist_ok=True)
    sbom_path = output / f"taskfsm-{version}.cdx.json"
    start = time.monotonic()
    packed = oci.write_archive(
        output / f"taskfsm-{version}.oci.tar",
        rootfs,
        name=IMAGE_NAME,
        tag=version,
        config=image_config(spec, version, created),
        created=created,
        epoch=epoch,
        history=[
            f"tests/support/image.py: Debian {spec.release} with python3.11 "
            "(mmdebstrap), scripts/image-install.sh deps and project"
        ],
        annotations={
            "org.opencontainers.image.created": created,
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.source": SOURCE_URL,
        },
    )
    print(f"image: packed in {time.monotonic() - start:.0f} s", file=sys.stderr)
    partial_sbom = sbom_path.with_name(f".{sbom_path.name}.partial")
    partial_sbom.write_text(sbom(rootfs, version, created), encoding="utf-8")
    partial_sbom.replace(sbom_path)
    return ImageArchive(
        packed.path, sbom_path, packed.reference, version, packed.manifest_digest,
        packed.layer_diff_id,
    )  # fmt: skip


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
