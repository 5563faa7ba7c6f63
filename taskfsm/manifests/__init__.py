"""What a Task runs as, built from plain Kubernetes JSON with no I/O: the Job and its helper-data
Secret (`jobs`), the helper payload they carry (`helper_payload`, over the wire model
`taskfsm.api.helperdata`) and the Task's merged configuration (`task_config`). The Job template's
patches are applied with `taskfsm.strategic_merge`.
"""
