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


def test_schema_comes_from_the_same_comments_and_defaults():
    """values.schema.json has every described key with its default's type, its description and
    its default; `# @schema` lines add keywords without showing in the description; grouping
    maps refuse unknown keys, described maps are free-form."""
    text = (
        "# -- Pods.\n"
        '# @schema {"minimum": 0}\n'
        "replicas: 2\n"
        "image:\n"
        "  # -- Repository.\n"
        "  repository: r\n"
        "  # -- Pull it?\n"
        "  pull: true\n"
        "# -- A map.\n"
        "resources:\n"
        "  limits: {memory: 1Gi}\n"
        "# -- Arguments.\n"
        "args: []\n"
    )
    assert deploygen.values_descriptions(text)["replicas"] == "Pods."
    schema = deploygen.values_schema(text)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["replicas"] == {
        "type": "integer",
        "description": "Pods.",
        "default": 2,
        "minimum": 0,
    }
    image = schema["properties"]["image"]
    assert image["additionalProperties"] is False
    assert image["properties"]["repository"]["type"] == "string"
    assert image["properties"]["pull"]["type"] == "boolean"
    assert schema["properties"]["resources"] == {
        "type": "object",
        "description": "A map.",
        "default": {"limits": {"memory": "1Gi"}},
    }
    assert schema["properties"]["args"]["type"] == "array"
    assert set(schema["properties"]) == {"global", "replicas", "image", "resources", "args"}


def test_a_schema_line_must_be_json():
    """A `# @schema` line that is not JSON fails the generation, naming the line."""
    with pytest.raises(ValueError, match=r"values.yaml:2: @schema is not JSON"):
        deploygen.values_schema("# -- Pods.\n# @schema {minimum: 0}\nreplicas: 2\n")
