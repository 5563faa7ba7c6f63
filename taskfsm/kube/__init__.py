"""The only package that talks to the Kubernetes API (kopf's rule: only clients touch the API).

* ``errors``   -- ``ApiException`` and transport failures turned into our own exception types.
* ``client``   -- ``ApiClient`` construction (kubeconfig file or dict, in-cluster).
* ``rest``     -- dict-in, dict-out CRUD and patch calls on any resource, with request metrics.
* ``informer`` -- list-then-watch caches: our own watch loop (resume, bookmarks, 410 relist).
"""
