# SPDX-License-Identifier: Apache-2.0
"""The object store: one global resourceVersion counter (as etcd's revision), the objects by
storage key, a bounded history of change events, and the registered watchers.

All reads and writes happen under Store.lock (an RLock the API layer also holds across a
read-modify-write).  Every write gets the next resourceVersion and is appended to the history
and pushed to every watcher of the same storage key; watchers filter and convert on their own
thread.  Like kube-apiserver's watch cache, each storage key (resource) keeps its own bounded
window of recent changes (--history events); a watch from a resourceVersion older than its
resource's window, or older than a compaction, gets 410 Expired.  A resource kube-apiserver
serves without a watch cache (Events) is read from etcd, which keeps every revision until
its compaction: its history is not bounded by --history but cut at kube-apiserver's periodic
etcd compaction (--etcd-compaction-interval, to the revision of the previous tick).
"""

import collections
import copy
import threading
import time


class Event:
    __slots__ = ("rv", "storage", "type", "obj", "prev")

    def __init__(self, rv, storage, etype, obj, prev):
        self.rv = rv
        self.storage = storage
        self.type = etype
        self.obj = obj
        self.prev = prev


class Watcher:
    """One open watch: a queue of events the store pushes and a watch thread pops.

    close(mode) ends it: 'clean' ends the stream with the terminating chunk, 'abort' drops the
    connection without one (as a network failure or server crash would)."""

    MAX_QUEUE = 20000

    def __init__(self, storage, namespace, after_rv=0):
        self.storage = storage
        self.namespace = namespace
        self.after_rv = after_rv  # events at or before it are not this watch's
        self.queue = collections.deque()
        self.cond = threading.Condition(threading.Lock())
        self.closed = None

    def push(self, ev):
        with self.cond:
            if self.closed or ev.rv <= self.after_rv:
                return
            if len(self.queue) >= self.MAX_QUEUE:
                self.closed = "clean"
            else:
                self.queue.append(ev)
            self.cond.notify_all()

    def close(self, mode="clean"):
        with self.cond:
            if not self.closed:
                self.closed = mode
            self.cond.notify_all()

    def pop(self, timeout):
        """Return (event or None, closed mode or None) after waiting up to timeout seconds."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self.cond:
            while not self.queue and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            if self.queue:
                return self.queue.popleft(), None
            return None, self.closed

    def empty(self):
        with self.cond:
            return not self.queue


def etcd_order(key):
    """The sort key of an object's (namespace, name) as etcd orders its keys: by the bytes of
    "namespace/name" ("a-b/x" before "a/x"), or of the name for a cluster-scoped object. A
    continue token names such a key (goparse.encode_continue)."""
    ns, name = key
    return (ns + "/" + name if ns else name).encode()


class Store:
    def __init__(self, history_size=1000, uncached=(), compaction_interval=300.0,
                 clock=time.monotonic):
        self.lock = threading.RLock()
        self.rv = 0
        self.objects = {}   # storage -> {(namespace, name): obj}
        self.history = {}   # storage -> deque of Event, oldest first
        self.history_size = max(1, int(history_size))
        # Every change of storage S with rv > max(dropped[S], compacted) is in history[S].
        self.dropped = {}
        self.compacted = 0
        self.watchers = set()
        # f(event) for every committed change, under the lock (the garbage collector's graph)
        self.observers = []
        # storages without a watch cache: their history is etcd's, cut only by compaction
        # (kube-apiserver's compactor: every interval, to the revision seen the tick before)
        self.uncached = frozenset(uncached)
        # (0: none, as kube-apiserver starts no compactor for an interval of 0; a negative one
        # is not refused: its compactor's clock.After(interval) fires at once, every time, so
        # it ticks back to back: here a tick at every read or write of the store)
        self.compaction_interval = float(compaction_interval)
        self._clock = clock
        self._compact_mark = 0      # the revision of the previous tick's compact_rev_key put
        self.etcd_compacted = 0     # the revision etcd was last compacted to
        self._next_compaction = (clock() + self.compaction_interval
                                 if self.compaction_interval > 0 else None)

    # ------------------------------------------------------------ reads

    def get(self, storage, namespace, name):
        with self.lock:
            return self.objects.get(storage, {}).get((namespace or "", name))

    def items(self, storage, namespace=None):
        """Objects of a storage key in etcd's key order (etcd_order)."""
        with self.lock:
            d = self.objects.get(storage, {})
            keys = sorted((k for k in d if namespace is None or k[0] == namespace),
                          key=etcd_order)
            return [d[k] for k in keys]

    def items_at(self, storage, namespace, rv):
        """The objects of a storage key as they were at resourceVersion rv, sorted as items():
        etcd reads a continued list at its first page's revision.  The changes after rv are
        undone from the history, which must reach back to rv (window_start() <= rv)."""
        with self.lock:
            d = dict(self.objects.get(storage, {}))
            for ev in reversed(self.history.get(storage, ())):
                if ev.rv <= rv:
                    break
                meta = ev.obj["metadata"]
                key = (meta.get("namespace", ""), meta["name"])
                if ev.prev is None:
                    d.pop(key, None)
                else:
                    d[key] = ev.prev
            keys = sorted((k for k in d if namespace is None or k[0] == namespace),
                          key=etcd_order)
            return [d[k] for k in keys]

    def current_rv(self):
        with self.lock:
            self._etcd_compaction()
            return self.rv

    # ------------------------------------------------------------ writes

    def _commit(self, storage, etype, obj, prev):
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        ev = Event(self.rv, storage, etype, copy.deepcopy(obj),
                   copy.deepcopy(prev) if prev is not None else None)
        h = self.history.setdefault(storage, collections.deque())
        h.append(ev)
        while len(h) > self.history_size and storage not in self.uncached:
            self.dropped[storage] = h.popleft().rv
        for w in list(self.watchers):
            if w.storage == storage and (w.namespace is None or
                                         w.namespace == obj["metadata"].get("namespace", "")):
                w.push(ev)
        for f in self.observers:
            f(ev)
        return obj

    def put(self, storage, obj, prev=None):
        """Store obj (created if prev is None, else modified); assigns its resourceVersion.
        Its labels and annotations are kept sorted by key, as the API server's encoding of a
        Go map writes them, whichever write (a client's or the fake's own) set them."""
        with self.lock:
            self._etcd_compaction()     # the ticks due come before this write's revision
            meta = obj["metadata"]
            for k in ("labels", "annotations"):
                if isinstance(meta.get(k), dict):
                    meta[k] = dict(sorted(meta[k].items()))
            key = (meta.get("namespace", ""), meta["name"])
            self.objects.setdefault(storage, {})[key] = obj
            return self._commit(storage, "ADDED" if prev is None else "MODIFIED", obj, prev)

    def remove(self, storage, obj):
        """Delete obj; the DELETED event carries its last state with the deletion's RV."""
        with self.lock:
            self._etcd_compaction()
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            prev = self.objects.get(storage, {}).pop(key, None)
            final = copy.deepcopy(prev if prev is not None else obj)
            return self._commit(storage, "DELETED", final, prev)

    # ------------------------------------------------------------ watch support

    def _etcd_compaction(self):
        """kube-apiserver's etcd compactor (etcd3/compact.go), run for every tick due by now,
        each at its own place in the revision order: a tick every interval from the start,
        none skipped or merged however late the fake notices them. Called with the lock
        held, before any read of self.rv or the history and before any write."""
        if self.compaction_interval < 0:
            self.compaction_tick()
            return
        if self._next_compaction is None:
            return
        now = self._clock()
        while now >= self._next_compaction:
            self.compaction_tick()
            self._next_compaction += self.compaction_interval

    def compaction_tick(self):
        """One tick of the compactor: its transaction puts compact_rev_key (a revision of its
        own, so the resourceVersion moves on with no object written), then etcd is compacted
        to the revision the previous tick's put got (none at the first tick: "we don't
        compact on bootstrap"). The storages without a watch cache lose their changes before
        it (a watch or list from before it is 410, as etcd's ErrCompacted)."""
        with self.lock:
            self.rv += 1
            mark = self._compact_mark
            self._compact_mark = self.rv
            if not mark:
                return
            self.etcd_compacted = mark
            for storage in self.uncached:
                h = self.history.get(storage)
                while h and h[0].rv < mark:
                    h.popleft()
                if mark > self.dropped.get(storage, 0):
                    self.dropped[storage] = mark

    def compact(self):
        """Forget all history: a watch resuming from any older resourceVersion gets 410."""
        with self.lock:
            self.history.clear()
            self.dropped.clear()
            self.compacted = self.rv

    def register(self, storage, namespace, since_rv):
        """Register a watcher.  since_rv None: start now (the caller sends synthetic ADDED events
        from the snapshot returned).  since_rv N: replay history after N.
        Returns (watcher, snapshot_or_backlog, error) where error is (requested, oldest) if the
        history no longer reaches back to N.  since_rv "now": the changes after the present
        resourceVersion, without a snapshot."""
        with self.lock:
            self._etcd_compaction()
            if since_rv == "now":
                since_rv = self.rv
            if since_rv is None:
                w = Watcher(storage, namespace)
                snap = [copy.deepcopy(o) for o in self.items(storage, namespace)]
                self.watchers.add(w)
                return w, (snap, self.rv), None
            oldest = self.window_start(storage)
            h = self.history.get(storage)
            if storage not in self.uncached and self.dropped.get(storage) and h:
                # the watch cache (getAllEventsSinceLocked): once an event has left its
                # buffer, the first one kept is the oldest it delivers, so a watch from
                # before it, less one, is 410 "too old resource version: N (first - 1)"
                # (the resourceVersions between the last dropped and the first kept are
                # other kinds' changes: 410 too)
                oldest = max(oldest, h[0].rv - 1)
            if storage in self.uncached and oldest == self.etcd_compacted > self.compacted:
                # etcd3's watcher starts at since_rv + 1, which etcd still has when it is
                # the compaction's revision (a range at since_rv would be ErrCompacted)
                oldest -= 1
            if since_rv < oldest:
                return None, None, (since_rv, oldest)
            # a version not reached yet (kube-apiserver's watch cache opens the watch and
            # delivers what comes after it; it waits only with sendInitialEvents)
            w = Watcher(storage, namespace, after_rv=since_rv)
            for ev in self.history.get(storage, ()):
                if ev.rv > since_rv and (
                        namespace is None or ev.obj["metadata"].get("namespace", "") == namespace):
                    w.queue.append(ev)
            self.watchers.add(w)
            return w, None, None

    def window_start(self, storage):
        """Oldest resourceVersion a watch of storage can resume from."""
        with self.lock:
            self._etcd_compaction()
            return max(self.dropped.get(storage, 0), self.compacted)

    def unregister(self, w):
        with self.lock:
            self.watchers.discard(w)
        w.close("clean")

    def close_watchers(self, mode="abort", storage=None):
        with self.lock:
            ws = [w for w in self.watchers if storage is None or w.storage == storage]
        for w in ws:
            w.close(mode)
        return len(ws)

    def bookmark_rv(self, w):
        """The resourceVersion a bookmark may carry now, or None when events are still queued."""
        with self.lock:
            self._etcd_compaction()
            if not w.empty() or self.rv <= w.after_rv:  # never behind the watch's own
                return None
            return self.rv
