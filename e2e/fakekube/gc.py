# SPDX-License-Identifier: Apache-2.0
"""Cascading deletion: kube-apiserver's deletion finalizers and kube-controller-manager's
garbage collector.

The API server's part (registry/generic/registry/store.go) is deletion_finalizers(): a DELETE
whose propagation policy (or the deprecated orphanDependents, or the object's own GC
finalizer, or its kind's DefaultGarbageCollectionPolicy) asks for it gets the finalizer
"orphan" or "foregroundDeletion", whether or not the object has dependents, and is only marked
as being deleted.

The controller's part (pkg/controller/garbagecollector) is GarbageCollector: a thread that
watches every change the store commits, keeps the owner -> dependents graph by uid, and acts
through the API as the controller does, each step its own write (its own resourceVersion and
watch event):
- an object deleted: each dependent whose owners are all gone is deleted (with the policy its
  own GC finalizer names, else Background), one that has another owner left loses the
  ownerReference instead (attemptToDeleteItem);
- "orphan": the owner's ownerReference is removed from each dependent, then the finalizer;
- "foregroundDeletion": each dependent is deleted (Foreground when it has dependents of its
  own), and once no dependent with blockOwnerDeletion is left the finalizer is removed, which
  deletes the owner (an update event only when other finalizers remain).
An owner is found as the controller finds it: by the ownerReference's group and kind, in the
dependent's namespace, and it exists only with the same uid. An ownerReference whose kind is
not served, or a namespaced owner of a cluster-scoped dependent, cannot be resolved: the
dependent is never collected (the controller retries it for ever).

- an object that names an owner the collector has not seen (its "virtual" node in the
  controller's graph) is looked at once: with no owner left (absent, or another uid) it is
  deleted, as when its owner goes; with an owner left, the ownerReferences to absent owners
  are removed (attemptToDeleteItem on the virtual node, then the dependent).
"""

import collections
import json
import time

from fakekube.worker import Worker

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
# the controller's service account (its requests' User-Agent ends in it: Worker.user_agent)
USER = "system:serviceaccount:kube-system:generic-garbage-collector"


def default_policy(res):
    """The registry strategy's DefaultGarbageCollectionPolicy: Events' is Unsupported (no GC
    finalizer is ever set), apps/v1's DeleteDependents, other kinds have none (both mean
    Background)."""
    if res.plural == "events":
        return "Unsupported"
    if res.group == "apps":
        return "DeleteDependents"
    return ""


def deletion_finalizers(res, meta, opts):
    """deletionFinalizersForGarbageCollection: (changed, finalizers) for a DELETE with options
    opts of an object with metadata meta. The options win over the object's own GC finalizer,
    which wins over the kind's default; both GC finalizers are removed, then the one wanted is
    appended."""
    old = list(meta.get("finalizers") or [])
    if default_policy(res) == "Unsupported":
        return False, old
    orphan_opt = opts.get("orphanDependents")
    policy = opts.get("propagationPolicy")
    if orphan_opt is not None:
        orphan, foreground = bool(orphan_opt), False
    elif policy in ("Orphan", "Background", "Foreground"):
        orphan, foreground = policy == "Orphan", policy == "Foreground"
    else:
        own = [f for f in old if f in (ORPHAN, FOREGROUND)]
        orphan = own[:1] == [ORPHAN] or (not own and default_policy(res) == "OrphanDependents")
        foreground = own[:1] == [FOREGROUND]
    new = [f for f in old if f not in (ORPHAN, FOREGROUND)]
    if orphan:
        new.append(ORPHAN)
    if foreground:
        new.append(FOREGROUND)
    if set(new) == set(old):
        return False, old
    return True, new


def _refs(obj):
    refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, dict) and r.get("uid")]


def _key(storage, obj):
    meta = obj["metadata"]
    return storage, meta.get("namespace", ""), meta["name"]


class GarbageCollector(Worker):
    NAME = "fakekube-gc"
    USER = USER

    def __init__(self, api, delay=0.05):
        self.delay = delay        # the controller's informer latency, roughly
        self.nodes = {}           # uid -> (storage, namespace, name)
        self.dependents = collections.defaultdict(set)   # owner uid -> {key}
        self.queue = collections.OrderedDict()           # (action, key) -> None
        super().__init__(api)

    # ------------------------------------------------------------ the graph (store lock held)

    def observe(self, ev):
        """Called by the store for each committed change, under its lock: update the graph
        and queue the work the change makes (graph_builder.go processGraphChanges)."""
        obj = ev.obj
        key = _key(ev.storage, obj)
        meta = obj["metadata"]
        uid = meta.get("uid")
        old_owners = {r["uid"] for r in _refs(ev.prev)}
        new_owners = set() if ev.type == "DELETED" else {r["uid"] for r in _refs(obj)}
        for o in old_owners - new_owners:
            self.dependents[o].discard(key)
            if not self.dependents[o]:
                del self.dependents[o]
        for o in new_owners:
            self.dependents[o].add(key)
        work = []
        # an owner newly named that is not in the graph: a virtual node, looked up live
        # (graph_builder.go addDependentToOwners); _attempt classifies it
        if ev.type != "DELETED" and any(o not in self.nodes for o in new_owners - old_owners):
            work.append(("attempt", key))
        if ev.type == "DELETED":
            self.nodes.pop(uid, None)
            work += [("attempt", d) for d in sorted(self.dependents.get(uid, ()))]
        elif uid:
            self.nodes[uid] = key
            fins = meta.get("finalizers") or []
            if meta.get("deletionTimestamp") and ORPHAN in fins:
                work.append(("orphan", key))
            if meta.get("deletionTimestamp") and FOREGROUND in fins:
                work.append(("foreground", key))
        # an owner waiting for its dependents looks again when one goes or lets go of it
        blocking_before = {r["uid"]: bool(r.get("blockOwnerDeletion")) for r in _refs(ev.prev)}
        blocking_now = {r["uid"]: bool(r.get("blockOwnerDeletion")) for r in _refs(obj)}
        for o, blocked in blocking_before.items():
            if ev.type == "DELETED" or blocking_now.get(o) != blocked:
                if o in self.nodes:
                    work.append(("foreground", self.nodes[o]))
        if work:
            with self.cond:
                for w in work:
                    self.queue[w] = None
                self.cond.notify()

    # ------------------------------------------------------------ the worker

    def _run(self):
        while True:
            with self.cond:
                while not self.queue and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
            time.sleep(self.delay)
            while True:
                with self.cond:
                    if not self.queue or self.stopped:
                        break
                    (action, key), _ = self.queue.popitem(last=False)
                try:
                    getattr(self, "_" + action)(key)
                except Exception as e:   # noqa: BLE001 - the controller logs and goes on
                    code = getattr(e, "code", None)   # an api.StatusError's
                    if code == 409:
                        with self.cond:   # a conflict: the controller retries
                            self.queue[(action, key)] = None
                    elif code != 404:
                        print("fakekube: garbage collector: %s %s: %r" % (action, key, e),
                              flush=True)

    # ------------------------------------------------------------ the controller's steps

    def _get(self, key):
        return self.store.get(*key)

    def _owner_state(self, ref, dep_key):
        """classifyReferences for one ownerReference: "solid", "dangling" (absent, or another
        uid), "waiting" (its owner is deleting its dependents first), or None (unresolvable:
        a kind not served, or a namespaced owner of a cluster-scoped dependent)."""
        group, _, _ = (ref.get("apiVersion") or "").rpartition("/")
        res = next((r for r in self.registry.resources if r.group == group and
                    r.kind == ref.get("kind") and r.from_storage is None and
                    not r.create_only), None)
        if res is None or (res.namespaced and not dep_key[1]):
            return None
        owner = self.store.get(res.storage, dep_key[1] if res.namespaced else "",
                               ref.get("name", ""))
        if owner is None or owner["metadata"].get("uid") != ref["uid"]:
            return "dangling"
        m = owner["metadata"]
        if m.get("deletionTimestamp") and FOREGROUND in (m.get("finalizers") or []):
            return "waiting"
        return "solid"

    def _delete(self, key, obj, policy):
        meta = obj["metadata"]
        answer = self.api.delete(self._res(key[0]), key[1], key[2],
                                 {"propagationPolicy": policy,
                                  "preconditions": {"uid": meta["uid"],
                                                    "resourceVersion": meta["resourceVersion"]}},
                                 {})
        self._wrote("delete", *key, answer)

    def _patch(self, key, patch, ptype):
        api = self.api
        ctype = {"merge": "application/merge-patch+json",
                 "strategic": "application/strategic-merge-patch+json"}[ptype]
        api.begin_write("patch", {}, self.user_agent, ctype)
        try:
            answer = api.patch(self._res(key[0]), key[1], key[2], json.dumps(patch).encode(),
                               ctype)
        finally:
            api.take_warnings()
        self._wrote("patch", *key, answer)

    def _attempt(self, key):
        """attemptToDeleteItem for a dependent."""
        with self.store.lock:
            obj = self._get(key)
            if obj is None:
                return
            meta = obj["metadata"]
            fins = meta.get("finalizers") or []
            if meta.get("deletionTimestamp"):
                if FOREGROUND in fins:
                    self._foreground(key)
                return
            refs = _refs(obj)
            if not refs:
                return
            states = [self._owner_state(r, key) for r in refs]
            if None in states:
                return
            solid = "solid" in states
            gone = [r["uid"] for r, s in zip(refs, states) if s != "solid"]
            has_deps = bool(self.dependents.get(meta.get("uid")))
        if solid:
            if gone:
                self._drop_owners(key, meta["uid"], gone)
            return
        if "waiting" in states and has_deps:
            policy = "Foreground"
        elif ORPHAN in fins:
            policy = "Orphan"
        elif FOREGROUND in fins:
            policy = "Foreground"
        else:
            policy = "Background"
        self._delete(key, obj, policy)

    def _dependents_of(self, uid):
        with self.store.lock:
            return self._dependents_locked(uid)

    def _dependents_locked(self, uid):
        out = []
        for k in sorted(self.dependents.get(uid, ())):
            d = self._get(k)
            if d is not None:
                refs = [r for r in _refs(d) if r["uid"] == uid]
                if refs:
                    out.append((k, d, refs[0]))
        return out

    def _drop_owners(self, key, uid, owners):
        """The dependent (uid: the precondition) loses its ownerReferences to owners, one
        strategic merge patch."""
        self._patch(key, {"metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": u} for u in owners],
            "uid": uid}}, "strategic")

    def _deleting_with(self, key, finalizer):
        """The object at key if it is being deleted and holds finalizer, else None."""
        obj = self._get(key)
        if obj is None or not obj["metadata"].get("deletionTimestamp") or \
                finalizer not in (obj["metadata"].get("finalizers") or []):
            return None
        return obj

    def _remove_finalizer(self, key, obj, finalizer):
        fins = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
        self._patch(key, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                       "finalizers": fins or None}}, "merge")

    def _orphan(self, key):
        """attemptToOrphan: each dependent loses the owner's ownerReference (a strategic merge
        patch each), then the owner its "orphan" finalizer."""
        obj = self._deleting_with(key, ORPHAN)
        if obj is None:
            return
        uid = obj["metadata"]["uid"]
        for k, d, _ in self._dependents_of(uid):
            self._drop_owners(k, d["metadata"]["uid"], [uid])
        obj = self._get(key)
        if obj is not None and obj["metadata"]["uid"] == uid:
            self._remove_finalizer(key, obj, ORPHAN)

    def _foreground(self, key):
        """processDeletingDependentsItem: the dependents not being deleted yet are deleted;
        with no blocking dependent left, the finalizer goes."""
        obj = self._deleting_with(key, FOREGROUND)
        if obj is None:
            return
        uid = obj["metadata"]["uid"]
        for k, d, _ in self._dependents_of(uid):
            if not d["metadata"].get("deletionTimestamp"):
                self._attempt(k)
        with self.store.lock:
            if any(r.get("blockOwnerDeletion") for _, _, r in self._dependents_of(uid)):
                return
            obj = self._get(key)
            if obj is None or obj["metadata"]["uid"] != uid:
                return
        self._remove_finalizer(key, obj, FOREGROUND)
