"""The MediaProcessingEntity clusters: where Jobs run, and the clients and watches that reach them.

Shared by the Task controller (it reads and writes Jobs there) and the MediaProcessingEntity
controller (it sets the clients up and reports whether they work); neither imports the other.

- `cluster`: an MPE's cluster as the controllers use it (`MpeCluster`), its key, the namespaces
  its children may belong to (`trusts`), and why one cannot be used (`MpeError`, its reasons);
- `target`: where an MPE's spec and kubeconfig say its Jobs run (the tenants' rules);
- `watches`: the Job watches (shared by MPEs reaching the same Jobs), their event predicate, and
  the kubeconfig Secret watches;
- `registry`: `MpeRegistry`, the clients by MPE: set up, rebuilt, kept while Tasks use them,
  retired locations, and how long each has been unreachable;
- `waiters`: Tasks waiting for an MPE's client to be set up.
"""
