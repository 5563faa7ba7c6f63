"""The CLI's namespace follows kubectl's rules: -n, else the kubeconfig context's namespace (the
current context or --context; $KUBECONFIG may join several files), else `default`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from taskfsm.kube.user_access import user_namespace


def kubeconfig(path: Path, contexts: dict[str, str | None], current: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {
                        "name": name,
                        "context": {
                            "cluster": "c",
                            "user": "u",
                            **({"namespace": ns} if ns else {}),
                        },
                    }
                    for name, ns in contexts.items()
                ],
                "current-context": current,
            }
        )
    )
    return path


def test_current_context_namespace(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "a", {"dev": "media", "prod": None}, "dev")
    assert user_namespace(str(path)) == "media"
    assert user_namespace(str(path), "prod") == "default"
    assert user_namespace(str(path), "dev") == "media"


def test_kubeconfig_variable_with_several_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kubeconfig(tmp_path / "a", {"one": "first-ns"}, "two")
    second = kubeconfig(tmp_path / "b", {"two": "second-ns"}, "one")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert user_namespace() == "second-ns"  # the first file's current-context wins, as kubectl's
    assert user_namespace(None, "one") == "first-ns"


def test_no_kubeconfig_outside_a_pod_is_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_namespace() == "default"
