"""The Workflow lifecycle for the renderers: its `Chart` and where its outputs go.

Where this sits in the flow: `machines.diagram` draws any chart described by a
`diagram.Chart`; `machines.render` writes each chart's `Outputs`. This module describes the
Workflow lifecycle for both, so `python -m machines.render` writes
`diagrams/workflow-lifecycle.{mmd,dot,svg,png}` and the generated blocks of
`docs/workflow-lifecycle.md`, and `python -m machines.render --check` (and the freshness test,
`tests/machines/test_workflow_diagrams.py`) reports them when stale.
"""

from __future__ import annotations

from typing import Final

from machines import diagram, render
from machines.workflow import PHASE_STATES, WorkflowLifecycle
from machines.workflow_model import EFFECT_NAMES, GUARD_NAMES, WorkflowLifecycleModel
from machines.workflow_observation import field_docs

CHART: Final = diagram.Chart(
    machine=WorkflowLifecycle,
    phase_states=PHASE_STATES,
    title="Workflow lifecycle (machines/workflow.py)",
    model=WorkflowLifecycleModel,
    guard_names=GUARD_NAMES,
    effect_names=EFFECT_NAMES,
    field_docs=field_docs,
)
"""The Workflow lifecycle as the renderers see it."""

DIAGRAM_STEM: Final = "diagrams/workflow-lifecycle"
DOCS_PATH: Final = "docs/workflow-lifecycle.md"

OUTPUTS: Final = render.Outputs(
    chart=CHART,
    diagram_stem=DIAGRAM_STEM,
    docs_path=DOCS_PATH,
    blocks=render._doc_blocks(CHART),
)
"""Where the Workflow lifecycle is written (`machines.render.charts()["workflow"]`)."""
