"""The Task and Workflow lifecycles as declarative statecharts, with their pure runtime contracts.

Nothing in this package imports Kubernetes, `taskfsm` or does I/O (an import contract checks it).

- `engine`: the pass engine both charts run on: one reused machine per thread, set to the
  persisted phase, fed an observation, returning a `PassOutcome`.
- `catalog`: a chart as plain data (states, transitions), for the diagrams and the tests.
- `conditions`: the `Condition` type and the mark rule shared by both charts.
- `task/`: the Task lifecycle, in data-flow order: `observation` (what a pass read of the
  cluster), `job_status` (a Job's conditions read by type), `chart` (the statechart, its phase
  map and `events_for`), `model` (the protocol of guards and effects the runtime provides),
  `guards` (the guards, once, over the observation), `conditions` (`status.conditions` from
  where a pass ended), `driver` (the Task verdicts and `run_pass`).
- `workflow/`: the Workflow lifecycle, the same modules.
- `diagrams/`: `charts` (the two charts described for the renderers), `graph` (Mermaid, DOT
  and Markdown tables), `render` (`python -m machines.diagrams.render` writes `diagrams/` and the
  generated blocks of `docs/lifecycle.md` and `docs/workflow-lifecycle.md`).
"""
