"""The controller image, built offline as a root filesystem, and the entry point run from it.

No registry image can be pulled here (no docker daemon either), so the image test builds the
filesystem the Dockerfile builds from parts that are available: Debian's own packages for the
base (``mmdebstrap``, the Debian release and Python the ``FROM`` image is built on) and, inside
it, the Dockerfile's own steps (``scripts/image-install.sh deps`` and ``project``) on the files
the Dockerfile's build context holds (the ``!`` lines of ``.dockerignore``). It then starts the
Dockerfile's ``ENTRYPOINT`` from that filesystem, as its ``USER``, with the root filesystem
mounted read-only and a tmpfs on ``/tmp`` (the Deployment's ``emptyDir``), in a private mount
namespace on the host network (``unshare --mount`` + ``chroot``; podman is not needed).

Three layers are cached under ``$TASKFSM_IMAGE_CACHE`` (default ``/var/cache/taskfsm-image``),
each a directory published atomically and keyed by the hash of what it was built from:
``base-*`` (the Debian packages), ``deps-*`` (+ the locked dependencies: pyproject.toml,
uv.lock, the install script) and ``image-*`` (+ the project's files). Concurrent builds wait for
each other (``flock``). ``python -m tests.support.image`` builds (or finds) the image and prints
its directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
INSTALL_SCRIPT = "scripts/image-install.sh"
CACHE_ROOT = Path(os.environ.get("TASKFSM_IMAGE_CACHE", "/var/cache/taskfsm-image"))
MIRROR = "http://deb.debian.org/debian"
KEEP = 3
"""How many ``deps-*`` and ``image-*`` directories stay in the cache (the newest)."""

PYTHON_IMAGE_PACKAGES = ("python3.11", "ca-certificates", "netbase", "tzdata")
"""What the Dockerfile installs on debian:<release>-slim (its ``apt-get install`` line, checked by
:func:`dockerfile`): the interpreter, CA certificates, /etc/services and time zones."""


class ImageError(RuntimeError):
    """The root filesystem could not be built (message: the failing command's output)."""


@dataclass(frozen=True)
class Dockerfile:
    """What the test takes from the Dockerfile, so the two cannot drift apart."""

    release: str
    """Debian release of the ``FROM debian:<release>-slim`` image."""
    uv_version: str
    """Tag of the ``ghcr.io/astral-sh/uv`` image the Dockerfile mounts uv from."""
    user: str
    """``USER`` (uid:gid)."""
    entrypoint: tuple[str, ...]
    """``ENTRYPOINT`` (exec form)."""
    cmd: tuple[str, ...]
    """``CMD`` (exec form): the entry point's default arguments."""
    steps: tuple[str, ...]
    """The ``image-install.sh`` steps its RUNs take, in order."""


def dockerfile(path: Path = DOCKERFILE) -> Dockerfile:
    text = path.read_text(encoding="utf-8")
    base = re.search(r"^FROM debian:(\w+)-slim\s*$", text, re.M)
    apt = re.search(r"--no-install-recommends \\\n\s*([^\\]+?)\s*\\", text)
    uv = re.search(r"^FROM ghcr\.io/astral-sh/uv:(\S+) AS uv\s*$", text, re.M)
    user = re.search(r"^USER (\S+)\s*$", text, re.M)
    entry = re.search(r"^ENTRYPOINT (\[.*\])\s*$", text, re.M)
    cmd = re.search(r"^CMD (\[.*\])\s*$", text, re.M)
    if not (base and apt and uv and user and entry and cmd):
        raise ImageError(
            f"{path}: expected FROM debian:<release>-slim, its apt-get install, FROM uv, USER,"
            " ENTRYPOINT, CMD"
        )
    if tuple(apt.group(1).split()) != PYTHON_IMAGE_PACKAGES:
        raise ImageError(
            f"{path}: installs {apt.group(1).split()}, the offline build {PYTHON_IMAGE_PACKAGES}"
        )
    steps = tuple(re.findall(rf"{re.escape(INSTALL_SCRIPT)} (\w+) /src", text))
    return Dockerfile(
        release=base.group(1),
        uv_version=uv.group(1),
        user=user.group(1),
        entrypoint=tuple(json.loads(entry.group(1))),
        cmd=tuple(json.loads(cmd.group(1))),
        steps=steps,
    )


def context_files(root: Path = REPO_ROOT) -> list[Path]:
    """The build context: the ``!`` (allow) lines of ``.dockerignore`` (which ignores the rest),
    without Python caches, as paths relative to ``root``."""
    allowed = [
        line[1:].strip().rstrip("/")
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.startswith("!")
    ]
    files: list[Path] = []
    for entry in allowed:
        path = root / entry
        if path.is_dir():
            files += [
                p.relative_to(root)
                for p in sorted(path.rglob("*"))
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            ]
        elif path.is_file():
            files.append(Path(entry))
        else:
            raise ImageError(f".dockerignore allows {entry}, which does not exist")
    return files


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _run(cmd: Sequence[str], what: str) -> None:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise ImageError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    print(f"image: {what}: ok", file=sys.stderr)


def _uv_binary(version: str) -> Path:
    """The host's uv executable (through a pyenv shim if need be), checked to be the version the
    Dockerfile mounts."""
    candidates = [shutil.which("uv") or ""]
    if shutil.which("pyenv"):
        found = subprocess.run(["pyenv", "which", "uv"], capture_output=True, text=True)
        candidates.append(found.stdout.strip())
    for candidate in filter(None, candidates):
        path = Path(candidate).resolve()
        if path.is_file() and path.read_bytes()[:4] == b"\x7fELF":
            out = subprocess.run([str(path), "--version"], capture_output=True, text=True)
            if out.stdout.split()[1:2] != [version]:
                raise ImageError(
                    f"{path} is {out.stdout.strip()}; the Dockerfile uses uv {version}"
                )
            return path
    raise ImageError(f"no uv executable found (tried {candidates}); run scripts/setup.sh")


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with (CACHE_ROOT / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _publish(tmp: Path, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def _prune(prefix: str, current: Path) -> None:
    dirs = sorted(CACHE_ROOT.glob(f"{prefix}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [d for d in dirs if d != current and ".partial" not in d.name][KEEP - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def _base(spec: Dockerfile) -> Path:
    """debian:<release> minbase with the python image's packages, from Debian's mirrors."""
    sources = [
        f"deb {MIRROR} {spec.release} main",
        f"deb {MIRROR} {spec.release}-updates main",
        f"deb {MIRROR}-security {spec.release}-security main",
    ]
    cmd = [
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(PYTHON_IMAGE_PACKAGES)}",
        # like debian:*-slim: no manuals, documentation (but copyrights) or translations
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        spec.release,
    ]
    out = CACHE_ROOT / f"base-{_digest(*cmd, *sources)}"
    if out.is_dir():
        return out
    if not shutil.which("mmdebstrap"):
        raise ImageError("mmdebstrap is missing (`scripts/setup.sh test` installs it)")
    tmp = out.with_name(out.name + f".partial.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.monotonic()
    # mmdebstrap reads sources.list lines from stdin when stdin is not a terminal: _run gives it
    # /dev/null.
    _run([*cmd, str(tmp), *sources], "mmdebstrap")
    _publish(tmp, out)
    print(f"image: base built in {time.monotonic() - start:.0f} s: {out}", file=sys.stderr)
    return out


_CHROOT_STEP = r"""
set -eu
root=$1 src=$2 uv=$3 cache=$4 ca=$5 step=$6
mkdir -p "$root/src" "$root/root/.cache/uv"
touch "$root/usr/local/bin/uv" "$root/tmp/build-ca.crt"
mount --bind "$src" "$root/src"
mount -o remount,bind,ro "$root/src"
mount --bind "$uv" "$root/usr/local/bin/uv"
mount --bind "$cache" "$root/root/.cache/uv"
mount --bind "$ca" "$root/tmp/build-ca.crt"
mount -t proc proc "$root/proc"
chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  SSL_CERT_FILE=/tmp/build-ca.crt sh /src/scripts/image-install.sh "$step" /src
"""
"""One Dockerfile RUN: the step in the root filesystem, with what BuildKit would mount (the
sources read-only at /src, uv, the uv cache) and the host's CA bundle for downloads."""


def _ca_bundle() -> Path:
    """The CA certificates uv trusts while it downloads: the host's (``$SSL_CERT_FILE``, else
    Debian's bundle), so a build behind a TLS-inspecting egress proxy works. Mounted during the
    build only, never part of the image."""
    path = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    if not path.is_file():
        raise ImageError(f"no CA bundle at {path} (set SSL_CERT_FILE)")
    return path


def _layer(parent: Path, name: str, files: Sequence[Path], spec: Dockerfile, step: str) -> Path:
    """``parent`` + ``image-install.sh <step>`` run on a copy of ``files`` mounted at /src."""
    digests = [f"{f}\0{hashlib.sha256((REPO_ROOT / f).read_bytes()).hexdigest()}" for f in files]
    out = CACHE_ROOT / f"{name}-{_digest(parent.name, spec.uv_version, step, *digests)}"
    if out.is_dir():
        return out
    uv = _uv_binary(spec.uv_version)
    cache = subprocess.run([str(uv), "cache", "dir"], capture_output=True, text=True, check=True)
    cache_dir = Path(cache.stdout.strip())
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".partial.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.monotonic()
    _run(["cp", "-a", str(parent), str(tmp)], f"copy {parent.name}")
    with tempfile.TemporaryDirectory(prefix="taskfsm-image-src-") as src:
        for f in files:
            (Path(src) / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / f, Path(src) / f)
        mounts = [str(tmp), src, str(uv), str(cache_dir), str(_ca_bundle())]
        cmd = ["unshare", "--mount", "--", "sh", "-c", _CHROOT_STEP, "sh", *mounts, step]
        _run(cmd, f"image-install.sh {step}")
    # The mount points, like BuildKit's, leave nothing behind.
    (tmp / "usr/local/bin/uv").unlink()
    (tmp / "tmp/build-ca.crt").unlink()
    for d in ("src", "root/.cache/uv", "root/.cache"):
        with contextlib.suppress(OSError):
            (tmp / d).rmdir()
    _publish(tmp, out)
    _prune(name, out)
    print(f"image: {name} layer built in {time.monotonic() - start:.0f} s: {out}", file=sys.stderr)
    return out


def build() -> Path:
    """Build (or find in the cache) the image's root filesystem; return its directory."""
    spec = dockerfile()
    if spec.steps != ("deps", "project"):
        raise ImageError(
            f"the Dockerfile runs image-install.sh {spec.steps}, expected deps, project"
        )
    files = context_files()
    deps_files = [Path(INSTALL_SCRIPT), Path("pyproject.toml"), Path("uv.lock")]
    missing = [f for f in deps_files if f not in files]
    if missing:
        raise ImageError(f".dockerignore does not allow {missing}")
    with _locked():
        base = _base(spec)
        deps = _layer(base, "deps", deps_files, spec, "deps")
        return _layer(deps, "image", files, spec, "project")


_RUN = r"""
set -eu
root=$1 user=$2 home=$3
shift 3
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o mode=1777,size=64m tmpfs "$root/tmp"
mount -t proc proc "$root/proc"
while [ "$1" != -- ]; do
  mount --bind "${1%%=*}" "$root${1#*=}"
  mount -o remount,bind,ro "$root${1#*=}"
  shift
done
shift
uid=${user%%:*} gid=${user#*:}
# setpriv restores the parent-death signal the test process set, which a uid change clears.
exec chroot "$root" setpriv --reuid="$uid" --regid="$gid" --clear-groups --pdeathsig=keep \
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" \
  LANG=C.UTF-8 "$@"
"""


def run_command(rootfs: Path, args: Sequence[str], *, mounts: Mapping[Path, str] = {}) -> list[str]:
    """The command that runs the Dockerfile's ENTRYPOINT with ``args`` from ``rootfs`` as its
    USER: root filesystem read-only, tmpfs on /tmp, ``mounts`` (host directory → path in the
    image, read-only), host network. The process keeps the PID of the command (every step
    execs the next), so signals reach the controller itself."""
    spec = dockerfile()
    uid = spec.user.split(":")[0]
    home = next(
        line.split(":")[5]
        for line in (rootfs / "etc/passwd").read_text().splitlines()
        if line.split(":")[2] == uid
    )
    binds = [f"{host}={target}" for host, target in mounts.items()]
    command = ["unshare", "--mount", "--", "sh", "-c", _RUN, "sh", str(rootfs), spec.user, home]
    return [*command, *binds, "--", *spec.entrypoint, *args]


if __name__ == "__main__":
    t0 = time.monotonic()
    print(build())
    print(f"image: ready in {time.monotonic() - t0:.1f} s", file=sys.stderr)
