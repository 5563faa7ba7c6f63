"""The Task and Workflow lifecycles as declarative statecharts, with their pure runtime contracts.

Nothing in this package imports Kubernetes or does I/O. In data-flow order:

- `observation`: `TaskObservation`, what one reconcile pass read of the cluster.
- `job_status`: a Job's conditions, read by type, as a `JobState` (Kubernetes ≥ 1.31, F8).
- `task`: `TaskLifecycle`, the statechart (states, events, named guards and actions), the
  phase ↔ state mapping and `events_for`, the events a pass sends.
- `model`: `TaskLifecycleModel`, the protocol of guards and effects the reconciler provides;
  `guards.ObservationGuards` implements the guards once.
- `driver`: `run_pass(observation, model, now=...) -> PassOutcome`, called once per pass.
- `conditions`: `status.conditions` from the pass's end state (§3.3, §1.10).
- `catalog`, `diagram`, `render`: the chart as data, drawn (`python -m machines.render`).

The Workflow lifecycle mirrors this layout in the `workflow*` modules (`workflow`,
`workflow_observation`, `workflow_guards`, `workflow_model`, `workflow_driver`,
`workflow_conditions`, `workflow_render`).

`docs/lifecycle.md` and `docs/workflow-lifecycle.md` explain the contracts and carry the
generated transition tables.
"""
