"""List-then-watch caches of one resource: the controller's own watch loop (docs/behaviour.md
F4-F6).

The loop (one daemon thread per :class:`Informer`):

1. **list** the resource (a fresh read), replace the cache and diff against the previous contents:
   ``DELETED`` for objects that vanished, ``ADDED`` for new ones, ``MODIFIED`` only for objects
   whose resourceVersion changed (a relist after an outage therefore replays nothing that is
   already known, and synthesises the deletes the watch missed, F4/F6);
2. **watch** from the list's resourceVersion with bookmarks on, remembering the resourceVersion of
   every event and bookmark, so a watch that ends (server timeout, broken connection) resumes
   where it stopped without a relist;
3. a server-side ``timeoutSeconds`` (jittered down to 80 % of ``watch_timeout``) and a client read
   timeout ``read_margin`` seconds longer: a dead TCP connection that never sends another byte is
   noticed within ``watch_timeout + read_margin`` seconds (F5; the client has no read timeout by
   default);
4. ``410 Gone`` (an expired resourceVersion, as an HTTP status or an in-stream ``ERROR`` event) →
   relist at once, exactly once; no retry with the same version, no backoff (F6);
5. any other failure → jittered exponential backoff (0.5 s doubling to ``max_backoff``) before the
   next attempt, so an unreachable API server is not hammered; ``healthy`` is False from the
   failure until a watch is open again (readiness, ``taskfsm_watch_healthy``).

Why not the client library's ``kubernetes.informer.SharedInformer``: it raises on list functions
that return plain dicts (this controller moves JSON as dicts), and it has no backoff between
failed attempts, no read timeout on the watch, no paged lists and no bookmarks, which is what
F4-F6 of docs/behaviour.md §7 need. The line splitting of the client's watch module is reused.

Cached objects are plain dicts passed through the informer's transform
(:mod:`taskfsm.kube.transforms`: no ``managedFields``, shared strings, for Jobs no ``spec``);
callers must not mutate them. Objects ``pack_when`` calls cold (finished Tasks and Jobs) are
kept packed (:mod:`taskfsm.kube.packing`) and read as a fresh dict each time.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from taskfsm.kube import jitter, strsets, wire
from taskfsm.kube.errors import Gone, KubeError, Unavailable
from taskfsm.kube.packing import Packer, PackWhen
from taskfsm.kube.rest import Resource, Rest, WatchStream
from taskfsm.kube.strsets import StrSet
from taskfsm.kube.transforms import default_transform

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"

EventHandler = Callable[[str, dict[str, Any]], None]
"""Called on the informer thread with (``ADDED``/``MODIFIED``/``DELETED``, object dict)."""

FIRST_BACKOFF = 0.5
"""Seconds before the first retry of a failing list or watch (doubles per failure)."""

LIST_PAGE_SIZE = 500
"""Objects per list request (client-go's reflector default)."""

Stored = dict[str, Any] | bytes
"""A cached object as the store keeps it: the dict, or packed (:mod:`taskfsm.kube.packing`)."""


class Informer:
    """A cache of ``res`` objects in ``namespace`` (all namespaces when None) kept by a watch.

    Args:
        rest: the cluster's :class:`~taskfsm.kube.rest.Rest`.
        res: the resource to watch.
        namespace: one namespace, or None for all (or a cluster-scoped resource).
        label_selector: server-side filter, e.g. ``engine.nagare.media/task-name``.
        field_selector: server-side field filter, e.g. ``metadata.name=kc`` (a watch of one
            object never lists the namespace's others).
        watch_timeout: server-side watch duration in seconds (jittered down to 80 %).
        read_margin: extra seconds the client waits for bytes before declaring the stream dead.
        max_backoff: cap in seconds on the wait before retrying a failing list or watch
            (the actual wait is jittered to 0.5-1.5 times the capped value).
        name: label for logs and metrics (default ``plural/namespace``).
        transform: what the cache keeps of each listed or watched object (a new dict; the
            default drops managedFields and shares strings, :mod:`taskfsm.kube.transforms`).
            Handlers receive the transformed object.
        page_size: objects per list request (:meth:`_list_all`).
        pack_when: which cached objects to keep packed (None: none).

    Counters for operators and tests: ``relists`` (lists after the first), ``watches`` (watch
    requests opened), ``failures`` (lists or watches that failed), ``last_failure`` (monotonic
    time of the last failure) and ``last_error``.
    """

    def __init__(
        self,
        rest: Rest,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout: float = 240.0,
        read_margin: float = 30.0,
        max_backoff: float = 30.0,
        name: str = "",
        transform: Callable[[dict[str, Any]], dict[str, Any]] = default_transform,
        page_size: int = LIST_PAGE_SIZE,
        pack_when: PackWhen | None = None,
    ) -> None:
        self.rest = rest
        self.transform = transform
        self.page_size = page_size
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout = watch_timeout
        self.read_margin = read_margin
        self.max_backoff = max_backoff
        self.name = name or f"{res.plural}/{namespace or '*'}"
        self._handlers: list[EventHandler] = []
        self._health_handlers: list[Callable[[bool], None]] = []
        self.pack_when = pack_when
        self._packer = Packer()
        self._store: dict[str, Stored] = {}
        self._index_functions: dict[str, Callable[[dict[str, Any]], str | None]] = {}
        self._indices: dict[str, dict[str, StrSet]] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._lifecycle = threading.Lock()
        """Orders start and stop: a stop either sees no thread or a started one."""
        self._response: WatchStream | None = None
        self._consecutive_failures = 0
        self._retry_after: float | None = None
        self._resume_from: tuple[str | None] | None = None
        self._aborting = False
        self.resource_version: str | None = None
        """Where the next watch resumes; None forces a list first."""
        self.has_synced = False
        self.healthy = False
        self.last_error: str = ""
        self.last_status: int = 0
        """HTTP status of the last failure (0: no answer, or none yet)."""
        self.relists = 0
        self.watches = 0
        self.failures = 0
        self.last_failure: float | None = None

    # -- public ----------------------------------------------------------------------------------

    def add_handler(self, handler: EventHandler) -> None:
        """Register ``handler``; register before :meth:`start` to see the initial list."""
        self._handlers.append(handler)

    def add_health_handler(self, handler: Callable[[bool], None]) -> None:
        """Call ``handler(healthy)`` on the informer thread whenever ``healthy`` changes: False
        when a list or watch fails, True when a watch is open again after a failure (callers
        re-queue the work that failed during the outage)."""
        self._health_handlers.append(handler)

    def start(self) -> Informer:
        """Start the loop (once; an informer stopped before it started never starts)."""
        with self._lifecycle:
            if self._thread is None and not self._stopped.is_set():
                thread = threading.Thread(
                    target=self._run, name=f"informer-{self.name}", daemon=True
                )
                thread.start()
                self._thread = thread  # only a started thread: stop() may join it at once
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop: close the open watch at once and wait (bounded) for the thread. Safe
        from any thread, also while another one is starting the informer."""
        with self._lifecycle:
            self._stopped.set()
            thread = self._thread
        self._abort_stream()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def reconnect(self, resume_from: str | None = None) -> None:
        """Close the open watch and open a new one at once: from ``resume_from`` when given, else
        from the last resourceVersion seen. Not a failure (no backoff, ``healthy`` stays).

        Failure tests use it to make the next watch start from a compacted resourceVersion (F6).
        """
        self._resume_from = (resume_from,)
        self._aborting = True
        self._abort_stream()

    def wait_synced(self, timeout: float) -> bool:
        """Block until the first list has filled the cache; False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self._synced.is_set() and not self._stopped.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._synced.wait(min(left, 0.1))
        return self.has_synced

    def get(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The cached object, or None. Callers must not mutate it."""
        with self._lock:
            stored = self._store.get(f"{namespace}/{name}" if namespace else name)
        return None if stored is None else self._loaded(stored)

    def cached_keys(self) -> builtins.list[str]:
        """The cache keys (``namespace/name``, or ``name``), without reading the objects."""
        with self._lock:
            return builtins.list(self._store)

    def list(
        self, namespace: str | None = None, labels: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Cached objects, optionally restricted to a namespace and to exact label matches."""
        out = []
        for obj in self.each():
            meta = obj.get("metadata") or {}
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            if labels:
                have = meta.get("labels") or {}
                if any(have.get(k) != v for k, v in labels.items()):
                    continue
            out.append(obj)
        return out

    def index(self, name: str, function: Callable[[dict[str, Any]], str | None]) -> None:
        """Keep an index ``name`` of the cache by ``function(obj)`` (None: not indexed), like
        client-go's indexers, so :meth:`by_index` finds objects without scanning the cache.
        Idempotent per name; the index covers what is cached already."""
        with self._lock:
            if name in self._index_functions:
                return
            self._index_functions[name] = function
            self._indices[name] = self._build_indices(self._store, {name: function})[name]

    def count(self, name: str, value: str) -> int:
        """How many cached objects have ``value`` in index ``name`` (no list is built)."""
        with self._lock:
            return len(strsets.members(self._indices.get(name, {}).get(value)))

    def counts(self, name: str) -> dict[str, int]:
        """How many cached objects each value of index ``name`` has (no object is read)."""
        with self._lock:
            return {
                value: len(strsets.members(entry))
                for value, entry in self._indices.get(name, {}).items()
            }

    def by_index(self, name: str, value: str) -> builtins.list[dict[str, Any]]:
        """Cached objects whose index ``name`` has ``value`` (see :meth:`index`)."""
        return builtins.list(self.iter_by_index(name, value))

    def each(self) -> Iterator[dict[str, Any]]:
        """Every cached object, each read (unpacked) only when the iteration reaches it: one at
        a time is alive, however many the cache holds (the store as it was when called)."""
        with self._lock:
            stored = builtins.list(self._store.values())
        for one in stored:
            yield self._loaded(one)

    def iter_by_index(self, name: str, value: str) -> Iterator[dict[str, Any]]:
        """:meth:`by_index`'s objects, each read (unpacked) only when the iteration reaches it:
        however many there are, one at a time is alive (the store as it was when called)."""
        with self._lock:
            keys = strsets.members(self._indices.get(name, {}).get(value))
            stored = [self._store[k] for k in keys if k in self._store]
        for each in stored:
            yield self._loaded(each)

    def keys_by_index(self, name: str, value: str) -> builtins.list[str]:
        """The keys of :meth:`by_index`'s objects, without reading the objects."""
        with self._lock:
            return builtins.list(strsets.members(self._indices.get(name, {}).get(value)))

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def _index_locked(self, key: str, stored: Stored | None, new: dict[str, Any] | None) -> None:
        """Move ``key`` in every index from the value of what was stored to ``new``'s (hold
        ``_lock``)."""
        if not self._index_functions:
            return
        old = None if stored is None else self._loaded(stored)
        for name, function in self._index_functions.items():
            index = self._indices[name]
            before = function(old) if old is not None else None
            after = function(new) if new is not None else None
            if before == after:
                continue
            if before is not None:
                strsets.discard(index, before, key)
            if after is not None:
                strsets.add(index, after, key)

    # -- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if self.resource_version is None:
                    self._relist()
                self._watch()
            except Gone as exc:
                # The resourceVersion is too old (compacted, or older than the API server's watch
                # cache): list again at once. Not a failure: the relist is the recovery.
                log.info(
                    "watch expired; relisting",
                    extra={"informer": self.name, "error": str(exc)[:200]},
                )
                self.resource_version = None
            except Exception as exc:
                if self._stopped.is_set():
                    break
                if self._aborting:
                    self._aborting = False
                    continue  # reconnect() closed the stream on purpose
                self._failed(exc)
                self._stopped.wait(self._backoff())

    def _relist(self) -> None:
        fresh, resource_version = self._list_all()
        indices = self._build_indices(fresh, self._index_functions)
        with self._lock:
            old, self._store = self._store, fresh
            self._indices.update(indices)
        for key, stored in old.items():
            if key not in fresh:
                self._dispatch(DELETED, self._loaded(stored))
        for key, stored in fresh.items():
            obj = self._loaded(stored)
            before = old.get(key)
            if before is None:
                self._dispatch(ADDED, obj)
            elif _rv(self._loaded(before)) != _rv(obj):
                self._dispatch(MODIFIED, obj)
        self.resource_version = resource_version
        if self.has_synced:
            self.relists += 1
        self.has_synced = True
        self._synced.set()
        self._mark_healthy()

    def _list_all(self) -> tuple[dict[str, Stored], str | None]:
        """Every object, transformed, by key; and the list's resourceVersion.

        Paged (:data:`LIST_PAGE_SIZE` objects per request, like client-go's reflector): only one
        page of untransformed objects is alive at a time, so a large first list neither peaks nor
        leaves the heap fragmented at several times the cache's size. All pages belong to the
        snapshot of the first; if it expires mid-way (``410`` on a continue token, the API server
        compacted it), the list starts over unpaged.
        """
        fresh: dict[str, Stored] = {}
        token: str | None = None
        limit: int | None = self.page_size
        while True:
            try:
                body = self.rest.list(
                    self.res,
                    self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    limit=limit,
                    continue_token=token,
                )
            except Gone:
                if token is None:
                    raise
                log.info(
                    "list snapshot expired between pages; listing again unpaged",
                    extra={"informer": self.name},
                )
                fresh, token, limit = {}, None, None
                continue
            for item in body.get("items") or []:
                if not isinstance(item, dict):
                    continue  # not an object: only a hostile API server sends that
                # Lists omit apiVersion/kind on items; handlers and models want them.
                item.setdefault("apiVersion", self.res.api_version)
                item.setdefault("kind", self.res.kind)
                item = self._transform(item)
                fresh[_key(item)] = self._stored(item)
            meta = body.get("metadata") or {}
            del body  # this page's raw objects go before the next page arrives
            token = meta.get("continue") or None
            if not token or limit is None:
                return fresh, meta.get("resourceVersion") or None

    def _watch(self) -> None:
        timeout = max(1, int(self.watch_timeout * jitter.uniform(0.8, 1.0)))
        resume_from = self.resource_version
        override = self._resume_from
        if override is not None:
            resume_from = override[0] or resume_from
        try:
            response = self.rest.watch(
                self.res,
                self.namespace,
                timeout_seconds=timeout,
                read_timeout=timeout + self.read_margin,
                resourceVersion=resume_from,
                allowWatchBookmarks="true",
                labelSelector=self.label_selector,
                fieldSelector=self.field_selector,
            )
        except Gone:
            self._resume_from = None  # used up: the relist replaces it
            raise
        if override is not None:
            self._resume_from = None  # used up (kept across failed attempts until here)
        self.watches += 1
        self._response = response
        self._mark_healthy()
        opened, events = time.monotonic(), 0
        try:
            if self._stopped.is_set():
                return
            for line in _lines(response, self.rest.max_response_bytes):
                if self._stopped.is_set():
                    return
                if line:
                    self._handle(wire.loads(line))
                    events += 1
            if not events and time.monotonic() - opened < min(1.0, timeout / 2):
                # Something between us and the API server ends streams at once: back off
                # instead of reconnecting in a tight loop.
                raise Unavailable("watch stream ended immediately")
            # A clean end: the server-side timeout (or reconnect()). Resume from the last
            # resourceVersion.
            self._consecutive_failures = 0
            self._aborting = False
        finally:
            self._response = None
            response.close()
            response.release_conn()

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == ERROR:
            code = obj.get("code")
            message = obj.get("message") or obj.get("reason") or "watch error"
            if code == 410:
                raise Gone(message)
            raise Unavailable(f"watch error {code}: {message}", status=code or 0)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == BOOKMARK:
            self._consecutive_failures = 0
        elif kind in (ADDED, MODIFIED):
            obj = self._transform(obj)
            key = _key(obj)
            stored = self._stored(obj)
            with self._lock:
                self._index_locked(key, self._store.get(key), obj)
                self._store[key] = stored
            self._dispatch(kind, obj)
        elif kind == DELETED:
            obj = self._transform(obj)
            key = _key(obj)
            with self._lock:
                self._index_locked(key, self._store.pop(key, None), None)
            self._dispatch(DELETED, obj)
        if rv:
            self.resource_version = rv
        self._consecutive_failures = 0

    # -- helpers ---------------------------------------------------------------------------------

    def _stored(self, obj: dict[str, Any]) -> Stored:
        """What the store keeps of ``obj``: packed when ``pack_when`` says it is cold."""
        try:
            cold = self.pack_when is not None and self.pack_when(obj)
        except Exception:  # a predicate must never stop the watch over one odd object
            cold = False
        packed = self._packer.pack(obj) if cold else None
        return obj if packed is None else packed

    def _loaded(self, stored: Stored) -> dict[str, Any]:
        return stored if isinstance(stored, dict) else self._packer.unpack(stored)

    def _build_indices(
        self,
        store: dict[str, Stored],
        functions: dict[str, Callable[[dict[str, Any]], str | None]],
    ) -> dict[str, dict[str, StrSet]]:
        """Every index of ``functions`` over ``store``, each object read once."""
        indices: dict[str, dict[str, StrSet]] = {name: {} for name in functions}
        if not functions:
            return indices
        for key, stored in store.items():
            obj = self._loaded(stored)
            for name, function in functions.items():
                value = function(obj)
                if value is not None:
                    strsets.add(indices[name], value, key)
        return indices

    def _transform(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The transform's result; an object it fails on is kept as its identity, marked
        unusable, so one object never stops the watch (docs/security.md)."""
        try:
            return self.transform(obj)
        except Exception as exc:
            log.warning(
                "informer could not transform an object; keeping its identity only",
                extra={"informer": self.name, "object": _key(obj), "error": type(exc).__name__},
            )
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            return {
                "apiVersion": self.res.api_version,
                "kind": self.res.kind,
                "metadata": {
                    k: v
                    for k, v in (meta or {}).items()
                    if k in ("name", "namespace", "uid", "resourceVersion") and isinstance(v, str)
                },
                wire.UNUSABLE: f"it could not be read ({type(exc).__name__})",
            }

    def _dispatch(self, kind: str, obj: dict[str, Any]) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:  # one bad handler must not stop the watch
                log.exception("informer handler failed", extra={"informer": self.name})

    def _failed(self, exc: Exception) -> None:
        was_healthy, self.healthy = self.healthy, False
        self.failures += 1
        self._consecutive_failures += 1
        self.last_failure = time.monotonic()
        self._retry_after = exc.retry_after if isinstance(exc, KubeError) else None
        detail = str(exc) if isinstance(exc, KubeError) else f"{type(exc).__name__}: {exc}"
        self.last_error = detail[:300]
        self.last_status = exc.status if isinstance(exc, KubeError) else 0
        log.warning(
            "watch failed; retrying with backoff",
            extra={"informer": self.name, "error": self.last_error},
        )
        # Also the first failure of a watch that never synced: whoever waits for it to sync
        # (a MediaProcessingEntity being set up) learns at once instead of by polling.
        if was_healthy or (self.failures == 1 and not self.has_synced):
            self._notify_health(False)

    def _backoff(self) -> float:
        """The wait before the next attempt: jittered exponential, and never shorter than the
        API server's ``Retry-After`` of the last failure."""
        # The exponent is capped: after ~1,000 failures (hours of outage) 2.0**n overflows, and
        # an exception here would end the watch loop for good.
        n = min(max(1, self._consecutive_failures), 64)
        wait = min(self.max_backoff, FIRST_BACKOFF * 2.0 ** (n - 1)) * jitter.uniform(0.5, 1.5)
        return max(wait, self._retry_after or 0.0)

    def _mark_healthy(self) -> None:
        recovered = (self.failures > 0 or self.relists == 0) and not self.healthy
        self.healthy = True
        self.last_error = ""
        self.last_status = 0
        if recovered:  # also the first sync: see _failed
            self._notify_health(True)

    def _notify_health(self, healthy: bool) -> None:
        for handler in self._health_handlers:
            try:
                handler(healthy)
            except Exception:  # one bad handler must not stop the watch
                log.exception("informer health handler failed", extra={"informer": self.name})

    def _abort_stream(self) -> None:
        """Unblock a read in progress on the watch stream (from another thread)."""
        response = self._response
        if response is None:
            return
        try:
            response.shutdown()
        except Exception:
            log.debug("could not shut the watch stream down", extra={"informer": self.name})


def _lines(response: WatchStream, limit: int | None) -> Iterator[bytes]:
    """The lines of a watch stream; a line longer than ``limit`` bytes (a remote cluster's API
    server is its owner's: it could stream one line for ever) ends the watch with an error
    instead of filling the memory (docs/security.md, "No object stops the controller")."""
    buffer = bytearray()
    for chunk in response.stream(amt=None, decode_content=False):
        buffer.extend(chunk)
        start = 0
        while (end := buffer.find(b"\n", start)) != -1:
            yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
        if limit is not None and len(buffer) > limit:
            raise Unavailable(f"a watch event larger than {limit // (1024 * 1024)} MiB")
    if buffer:
        yield bytes(buffer)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    ns, name = meta.get("namespace"), meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
