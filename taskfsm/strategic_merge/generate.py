"""Generate ``patch_meta.json``: strategic-merge metadata for every type under JobTemplateSpec.

Why: a strategic merge patch needs, for every field, whether it is a struct, a map, a list or a
scalar, and for lists their merge key and patch strategy (docs/behaviour.md D4). Kubernetes
publishes exactly that in its OpenAPI document (``x-kubernetes-patch-merge-key``,
``x-kubernetes-patch-strategy``), so the file is derived from the document shipped in the
``k8s.io/kubernetes`` Go module the control plane is built from, never typed by hand.

Usage (from the repository root)::

    .venv/bin/python -m taskfsm.strategic_merge.generate          # rewrite patch_meta.json
    .venv/bin/python -m taskfsm.strategic_merge.generate --check  # exit 1 if it is stale
    .venv/bin/python -m taskfsm.strategic_merge.generate --swagger PATH/swagger.json

(``patch_meta.json`` is ``taskfsm/strategic_merge/patch_meta.json``.)

Without ``--swagger`` the document is located with
``cd tools/controlplane && GOTOOLCHAIN=local go mod download -json k8s.io/kubernetes``.

Output shape (one type per line, keys sorted, so diffs stay readable)::

    {"root": "io.k8s.api.batch.v1.JobTemplateSpec", "source": "k8s.io/kubernetes@v1.35.4 ...",
     "types": {"<type>": {"<field>": <shape>, ...}, ...}}

where a shape is one of ``{"kind": "object", "type": T}``, ``{"kind": "map", "values": shape}``,
``{"kind": "list", "items": shape, "mergeKey": K?, "strategy": S?}``,
``{"kind": "scalar", "type": "string|integer|number|boolean|int-or-string|quantity"}`` or
``{"kind": "any"}`` (free-form object).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from taskfsm.strategic_merge.schema import Shape

ROOT_TYPE = "io.k8s.api.batch.v1.JobTemplateSpec"
META_PATH = Path(__file__).with_name("patch_meta.json")
CONTROLPLANE_DIR = Path(__file__).resolve().parents[2] / "tools" / "controlplane"
REGENERATE_COMMAND = ".venv/bin/python -m taskfsm.strategic_merge.generate"
# resource.Quantity is declared as a string in the document, but its Go JSON decoder also takes
# numbers (`cpu: 1`), and users write both; the patch validator must accept both.
QUANTITY_TYPE = "io.k8s.apimachinery.pkg.api.resource.Quantity"


class SwaggerNotFoundError(RuntimeError):
    """The Kubernetes OpenAPI document could not be located; the message says how to fix it."""


def find_swagger(*, offline: bool = False) -> tuple[Path, str]:
    """Locate ``api/openapi-spec/swagger.json`` of the k8s.io/kubernetes Go module.

    Returns ``(path, "k8s.io/kubernetes@<version>")``. With ``offline`` the Go module proxy is not
    contacted (``GOPROXY=off``): the module must already be in the Go module cache.

    Raises:
        SwaggerNotFoundError: ``go`` is missing, the module is not downloadable/cached, or the
            file is absent; the message names the command that fixes it.
    """
    how = (
        f"The Go module k8s.io/kubernetes must be in the Go module cache: run "
        f"`cd {CONTROLPLANE_DIR} && GOTOOLCHAIN=local go mod download -json k8s.io/kubernetes` "
        f"(or `make setup`), or pass --swagger PATH to `{REGENERATE_COMMAND}`."
    )
    go = shutil.which("go")
    if go is None:
        raise SwaggerNotFoundError(f"'go' is not on PATH. {how}")
    if not (CONTROLPLANE_DIR / "go.mod").is_file():
        raise SwaggerNotFoundError(f"{CONTROLPLANE_DIR}/go.mod not found. {how}")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
    if offline:
        env["GOPROXY"] = "off"
    proc = subprocess.run(
        [go, "mod", "download", "-json", "k8s.io/kubernetes"],
        cwd=CONTROLPLANE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        detail = info.get("Error") or proc.stderr.strip() or f"exit code {proc.returncode}"
        raise SwaggerNotFoundError(f"go mod download k8s.io/kubernetes failed: {detail}. {how}")
    path = Path(info["Dir"]) / "api" / "openapi-spec" / "swagger.json"
    if not path.is_file():
        raise SwaggerNotFoundError(f"{path} does not exist. {how}")
    return path, f"k8s.io/kubernetes@{info['Version']}"


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def _scalar(json_type: str | None, fmt: str | None) -> Shape:
    if fmt == "int-or-string":
        return {"kind": "scalar", "type": "int-or-string"}
    if json_type in ("string", "integer", "number", "boolean"):
        return {"kind": "scalar", "type": json_type}
    raise ValueError(f"unsupported OpenAPI scalar type {json_type!r}")


def _shape(schema: dict[str, Any], definitions: dict[str, Any], pending: list[str]) -> Shape:
    """The shape of one property schema; referenced struct types are queued in ``pending``."""
    if "allOf" in schema and len(schema["allOf"]) == 1:
        schema = {**schema, **schema["allOf"][0]}
    name = _ref_name(schema)
    if name is not None:
        target = definitions[name]
        if target.get("properties"):
            pending.append(name)
            return {"kind": "object", "type": name}
        if name == QUANTITY_TYPE:
            return {"kind": "scalar", "type": "quantity"}
        if target.get("type") == "object":
            return {"kind": "any"}
        return _scalar(target.get("type"), target.get("format"))
    json_type = schema.get("type")
    if json_type == "array":
        shape: Shape = {
            "kind": "list",
            "items": _shape(schema["items"], definitions, pending),
        }
        if "x-kubernetes-patch-merge-key" in schema:
            shape["mergeKey"] = schema["x-kubernetes-patch-merge-key"]
        if "x-kubernetes-patch-strategy" in schema:
            shape["strategy"] = schema["x-kubernetes-patch-strategy"]
        return shape
    if json_type == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            return {"kind": "map", "values": _shape(values, definitions, pending)}
        return {"kind": "any"}
    return _scalar(json_type, schema.get("format"))


def build_meta(swagger: dict[str, Any], source: str, root: str = ROOT_TYPE) -> dict[str, Any]:
    """Walk the definitions from ``root`` by ``$ref`` and describe every reachable struct type.

    Raises:
        KeyError: ``root`` or a referenced definition is missing from the document.
    """
    definitions = swagger["definitions"]
    types: dict[str, dict[str, Shape]] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        if name in types:
            continue
        props = definitions[name].get("properties", {})
        types[name] = {
            field: _shape(schema, definitions, pending) for field, schema in props.items()
        }
    return {"root": root, "source": source, "types": types}


def render(meta: dict[str, Any]) -> str:
    """Serialise deterministically: one line per type, keys sorted, trailing newline."""

    def dump(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    header = (
        f'{{"generatedBy":{dump(REGENERATE_COMMAND)},\n'
        f'"root":{dump(meta["root"])},\n"source":{dump(meta["source"])},\n"types":{{\n'
    )
    body = ",\n".join(f"{dump(name)}:{dump(meta['types'][name])}" for name in sorted(meta["types"]))
    return header + body + "\n}}\n"


def generate(swagger_path: Path | None = None, *, offline: bool = False) -> str:
    """Locate (unless given) and read the OpenAPI document; return the rendered file content."""
    if swagger_path is None:
        swagger_path, source = find_swagger(offline=offline)
    else:
        # Name the module version when the path is inside the Go module cache, so both ways of
        # generating produce identical files.
        versions = [
            d.name for d in swagger_path.resolve().parents if d.name.startswith("kubernetes@")
        ]
        source = f"k8s.io/{versions[0]}" if versions else "k8s.io/kubernetes"
    with swagger_path.open(encoding="utf-8") as fh:
        swagger = json.load(fh)
    return render(build_meta(swagger, f"{source} api/openapi-spec/swagger.json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m taskfsm.strategic_merge.generate", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--swagger", type=Path, help="path to swagger.json (default: from the Go module cache)"
    )
    parser.add_argument("--output", type=Path, default=META_PATH, help=f"default: {META_PATH}")
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if the output is stale"
    )
    args = parser.parse_args(argv)
    try:
        content = generate(args.swagger)
    except SwaggerNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != content:
            print(f"{args.output} is stale; run `make generate`", file=sys.stderr)
            return 1
        return 0
    if current != content:
        args.output.write_text(content, encoding="utf-8")
    print(f"wrote {args.output} ({len(json.loads(content)['types'])} types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
