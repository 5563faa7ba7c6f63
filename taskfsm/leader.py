"""Leader election with a ``coordination.k8s.io/v1`` Lease, on the client's ``LeaderElection``.

Only the leader runs reconcile workers; followers keep warm caches and take over when the Lease
expires (15 s lease, 10 s renew deadline, 2 s retry, as controller-runtime). What this wraps:

* the client's ``LeaseLock`` talks through the process-global default client; here it gets the
  controller's own ``ApiClient`` behind :class:`_LeaseApi`, which adds a request timeout (a dead
  connection must not stall renewals past the renew deadline, F5) and turns transport errors into
  ``ApiException`` (the client's election loop only catches those: a refused connection used to
  kill the election thread silently while the replica went on leading);
* it never releases the Lease; :meth:`LeaderElector.release` clears the holder on graceful
  shutdown, so a successor takes over at once instead of after the lease duration. From then on
  the lock refuses to write, so the client's renew loop (which cannot be stopped) cannot take
  the released Lease back before the process exits;
* losing the Lease calls ``on_stopped`` (the controller then exits, like controller-runtime).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from taskfsm.kube.errors import Conflict, KubeError
from taskfsm.kube.rest import LEASES, Rest

log = logging.getLogger(__name__)

LEASE_REQUEST_TIMEOUT = (2.0, 4.0)
"""(connect, read) seconds for Lease requests: well inside the 10 s renew deadline."""


class _LeaseApi:
    """The three ``CoordinationV1Api`` calls ``LeaseLock`` makes, with a timeout, transport errors
    as ``ApiException(status=0)``, and writes refused once ``stopping`` is set."""

    def __init__(self, api_client: client.ApiClient, stopping: threading.Event) -> None:
        self._api = client.CoordinationV1Api(api_client)
        self._stopping = stopping

    def _call(self, method: str, *, write: bool, **kwargs: Any) -> Any:
        if write and self._stopping.is_set():
            raise ApiException(status=0, reason="shutting down: not writing the Lease")
        try:
            return getattr(self._api, method)(_request_timeout=LEASE_REQUEST_TIMEOUT, **kwargs)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiException(status=0, reason=f"{type(exc).__name__}: {exc}") from None

    def read_namespaced_lease(self, name: str, namespace: str) -> Any:
        return self._call("read_namespaced_lease", write=False, name=name, namespace=namespace)

    def create_namespaced_lease(self, namespace: str, body: Any) -> Any:
        return self._call("create_namespaced_lease", write=True, namespace=namespace, body=body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: Any) -> Any:
        return self._call("replace_namespaced_lease", write=True, name=name, namespace=namespace, body=body)


class LeaderElector:
    """Campaign for the Lease ``namespace/name`` as ``identity`` in a background thread."""

    def __init__(
        self,
        api_client: client.ApiClient,
        rest: Rest,
        *,
        namespace: str,
        name: str,
        identity: str,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
        lease_duration: int = 15,
        renew_deadline: int = 10,
        retry_period: int = 2,
    ) -> None:
        self.rest = rest
        self.namespace, self.name, self.identity = namespace, name, identity
        self.leading = threading.Event()
        self._stopping = threading.Event()
        self._on_started, self._on_stopped = on_started, on_stopped
        lock = LeaseLock(name, namespace, identity)
        lock.api_instance = _LeaseApi(api_client, self._stopping)
        config = electionconfig.Config(
            lock,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )
        self._election = leaderelection.LeaderElection(config)
        self._thread = threading.Thread(target=self._election.run, name="leader-election", daemon=True)

    def start(self) -> LeaderElector:
        self._thread.start()
        return self

    def _started(self) -> None:
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        self.leading.set()
        self._on_started()
        # Returning would not stop leading; block until shutdown so the callback thread lives on.
        self._stopping.wait()

    def _stopped(self) -> None:
        was_leading = self.leading.is_set()
        self.leading.clear()
        if was_leading and not self._stopping.is_set():
            log.error("lost the Lease", extra={"lease": f"{self.namespace}/{self.name}"})
            self._on_stopped()

    def release(self) -> None:
        """Give the Lease up (graceful shutdown) so a successor need not wait for it to expire."""
        self._stopping.set()
        if not self.leading.is_set():
            return
        self.leading.clear()
        # A renewal still in flight may update the Lease between our read and our write (409):
        # read again and retry, a few times at most.
        for attempt in range(3):
            try:
                lease = self.rest.get(LEASES, self.namespace, self.name)
                if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return
                self.rest.patch(
                    LEASES,
                    self.namespace,
                    self.name,
                    {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": {"holderIdentity": None}},
                )
                return
            except Conflict:
                if attempt == 2:
                    log.warning("could not release the Lease: it kept changing")
            except KubeError as exc:
                log.warning("could not release the Lease", extra={"error": str(exc)})
                return
