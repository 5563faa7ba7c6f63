"""A release from a tag: ``make release TAG=vX.Y.Z`` writes into ``dist/``

- the wheel and the source distribution (``uv build``),
- the controller image as an OCI archive and its CycloneDX SBOM (Debian packages and Python
  distributions), from the one recipe (the Dockerfile, built offline by :mod:`tests.support.image`),
- the Helm chart package with ``version`` and ``appVersion`` set from the tag,
- ``SHA256SUMS`` over all of them (``sha256sum -c SHA256SUMS`` checks them).

The tag must be ``v`` + the project's version (pyproject.toml; bump it in a commit, then tag that
commit) and name the checked-out commit of a clean tree, so what is released is what was tested.
Pushing (the image to a registry, the chart to an OCI registry, the wheel to PyPI) is the one step
not run here: docs/install.md "Releasing" gives its commands. The image is built for the machine's
architecture only: the offline build runs Debian's packages' scripts natively, without emulation.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from taskfsm.tools.deploygen import project_version
from tests.support import kubetools, oci_image

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "chart"
TAG = re.compile(r"^v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$")


class ReleaseError(RuntimeError):
    """The release cannot be made (message: why, and what to do)."""


@dataclass(frozen=True)
class Release:
    version: str
    files: tuple[Path, ...]
    """Every released file but the checksums, sorted."""
    checksums: Path
    image: oci_image.ImageArchive


def version_of(tag: str) -> str:
    """The version a tag releases; it must be the project's version."""
    match = TAG.match(tag)
    if match is None:
        raise ReleaseError(f"tag {tag!r} is not v<major>.<minor>.<patch>[-<pre-release>]")
    version = match.group(1)
    if version != project_version():
        raise ReleaseError(
            f"tag {tag} releases {version}, but pyproject.toml says {project_version()}: "
            "bump the version in a commit, then tag that commit"
        )
    return version


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()


def check_checkout(tag: str) -> None:
    """The tag names the checked-out commit and nothing is changed or untracked."""
    try:
        tagged = _git("rev-parse", f"{tag}^{{commit}}")
    except subprocess.CalledProcessError:
        raise ReleaseError(f"no tag {tag} in this repository") from None
    if tagged != _git("rev-parse", "HEAD"):
        raise ReleaseError(f"tag {tag} is {tagged[:12]}, not the checked-out commit")
    if _git("status", "--porcelain"):
        raise ReleaseError("the tree has changes: release from a clean checkout of the tag")


def build(tag: str, output: Path, *, check_git: bool = True) -> Release:
    version = version_of(tag)
    if check_git:
        check_checkout(tag)
    output.mkdir(parents=True, exist_ok=True)
    for old in output.iterdir():
        if old.is_file():
            old.unlink()
    uv = shutil.which("uv")
    if uv is None:
        raise ReleaseError("uv is missing: make setup installs it")
    subprocess.run([uv, "build", "--out-dir", str(output), str(REPO)], check=True)
    image = oci_image.write(output)
    subprocess.run(
        [
            str(kubetools.helm()),
            "package",
            str(CHART),
            "--version",
            version,
            "--app-version",
            version,
            "--destination",
            str(output),
        ],
        check=True,
    )
    # uv build leaves a .gitignore in its output directory: hidden files are not released.
    files = tuple(sorted(p for p in output.iterdir() if p.is_file() and p.name[0] != "."))
    names = {p.name for p in files}
    expected = {
        f"taskfsm-{version}-py3-none-any.whl",
        f"taskfsm-{version}.tar.gz",
        image.archive.name,
        image.sbom.name,
        f"taskfsm-{version}.tgz",
    }
    if names != expected:
        raise ReleaseError(f"the release holds {sorted(names)}, expected {sorted(expected)}")
    checksums = output / "SHA256SUMS"
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in files]
    checksums.write_text("".join(lines), encoding="utf-8")
    return Release(version, files, checksums, image)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make release TAG=vX.Y.Z", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--tag", required=True, help="the tag to release (v + pyproject's version)")
    parser.add_argument("--output", type=Path, default=REPO / "dist")
    args = parser.parse_args(argv)
    try:
        release = build(args.tag, args.output)
    except ReleaseError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 1
    print(f"release {release.version}:")
    for path in (*release.files, release.checksums):
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
