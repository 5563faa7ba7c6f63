"""The Task lifecycle as a declarative statechart, with its pure runtime contract.

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

`docs/lifecycle.md` explains the contract and carries the generated transition table.
"""
