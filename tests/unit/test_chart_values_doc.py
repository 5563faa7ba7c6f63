"""The chart's values table is generated from the `# --` comments of values.yaml."""

from __future__ import annotations

import pytest

from taskfsm.tools import deploygen


def test_described_keys_and_maps():
    """A `# --` block describes the next key; the keys under a described map are its value;
    undescribed maps are only paths."""
    text = (
        "# header, not a description\n"
        "\n"
        "# -- Pods.\n"
        "# Two lines.\n"
        "replicas: 2\n"
        "image:\n"
        "  # -- Repository.\n"
        "  repository: r\n"
        "# -- A map.\n"
        "resources:\n"
        "  limits:\n"
        "    memory: 1Gi\n"
    )
    assert deploygen.values_descriptions(text) == {
        "replicas": "Pods. Two lines.",
        "image.repository": "Repository.",
        "resources": "A map.",
    }


def test_an_undescribed_value_is_an_error():
    """A value without a description fails the generation, naming the key and line."""
    with pytest.raises(ValueError, match=r"values.yaml:3: image.tag has no `# --` description"):
        deploygen.values_descriptions("image:\n  # a plain comment\n  tag: x\n")


def test_table_lists_defaults():
    """The README table shows each described key with its default as JSON."""
    readme = f"intro\n{deploygen.VALUES_BEGIN}\nold\n{deploygen.VALUES_END}\nend\n"
    out = deploygen.chart_readme(readme, "# -- Pods.\nreplicas: 2\n# -- Tags.\ntags: [a]\n")
    assert out == (
        f"intro\n{deploygen.VALUES_BEGIN}\n| key | default | description |\n|---|---|---|\n"
        f'| `replicas` | `2` | Pods. |\n| `tags` | `["a"]` | Tags. |\n{deploygen.VALUES_END}\nend\n'
    )
