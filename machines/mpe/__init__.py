"""The MediaProcessingEntity lifecycle: its client, its Ready condition, its deletion.

The same modules as `machines/task/` and `machines/workflow/`: `observation`, `chart`, `model`,
`guards`, `conditions`, `driver`. Drawn into `diagrams/mpe-lifecycle.*` and
`docs/mpe-lifecycle.md` by `python -m machines.diagrams.render`.
"""
