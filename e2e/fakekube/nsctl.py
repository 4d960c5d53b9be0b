# SPDX-License-Identifier: Apache-2.0
"""Namespace deletion: kube-apiserver's part and kube-controller-manager's namespace
controller.

The API server's part (pkg/registry/core/namespace/storage) is in api.py: a DELETE of a
namespace marks it (deletionTimestamp, phase Terminating) and answers it; a DELETE while it
terminates answers it as it is while spec.finalizers holds anything; an update that leaves it
with no finalizer of either kind deletes it (ShouldDeleteNamespaceDuringUpdate), and only the
finalize subresource changes spec.finalizers. The NamespaceLifecycle admission plugin refuses
to create anything in a terminating namespace (403, cause NamespaceTerminating; pods/binding
too) and to delete default, kube-system or kube-public; updates and deletes go on.

The controller's part (pkg/controller/namespace) is NamespaceController: a thread that sees
each namespace marked for deletion, waits the controller's grace period (5 s: HA API servers
and etcd members see the deletion first) and then, through the API as the controller does,
each step its own write:
- deletes every object of every namespaced kind in it, one deletecollection a kind
  (propagationPolicy Background: objects being deleted already lose their GC finalizers,
  but a pod whose graceful deletion is pending is left as it is; a pod bound to a node is
  only marked, and stays until its kubelet deletes it with period 0);
- sets the namespace's five deletion conditions (status), all False while nothing is left,
  NamespaceContentRemaining / NamespaceFinalizersRemaining True while objects remain (what,
  and which finalizers hold them; a status write that fails is logged and the pass goes
  on), and looks again after half the estimate plus one second, the estimate the larger of
  the pods' longest terminationGracePeriodSeconds (while that long has not passed since the
  namespace's deletion) and 15 s where finalizers hold objects (8 s), or 5 s after any update
  of the namespace (its own status writes too) if that is sooner;
- objects that nothing holds any more (a bound pod past that period, its kubelet gone) set
  NamespaceDeletionContentFailure True ("Failed to delete all resource types, 1 remaining:
  unexpected items still remain in namespace: ns for gvr: /v1, Resource=pods"), and the
  pass is retried as the controller's rate limiter retries a failure (5 ms, doubling per
  failure in a row, at most 60 s; the count is reset when the namespace is done with);
- once nothing is left, removes "kubernetes" from spec.finalizers (the finalize
  subresource, again on a conflict), which deletes the namespace when no other finalizer
  holds it.
"""

import copy
import time

from fakekube import api as A
from fakekube.worker import Worker

FINALIZER = "kubernetes"
# the controller's service account (its requests' User-Agent ends in it: Worker.user_agent)
USER = "system:serviceaccount:kube-system:namespace-controller"
OK = [  # (type, reason, message) of the conditions with status False (status_condition_utils.go)
    ("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered",
     "All resources successfully discovered"),
    ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions",
     "All legacy kube types successfully parsed"),
    ("NamespaceDeletionContentFailure", "ContentDeleted",
     "All content successfully deleted, may be waiting on finalization"),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentHasNoFinalizers",
     "All content-preserving finalizers finished"),
]


FINALIZER_ESTIMATE = 15   # seconds the controller allows objects held by finalizers


class ContentLeft(Exception):
    """Objects that no finalizer holds remain after their deletion (the pass is retried as
    a failure)."""


class NamespaceController(Worker):
    NAME = "fakekube-namespaces"
    USER = USER

    def __init__(self, api, delay=5.0):
        self.delay = delay        # namespaceDeletionGracePeriod
        self.queue = {}           # namespace name -> time.monotonic() it is due
        self.failures = {}        # namespace name -> failed passes in a row (rate limiter)
        super().__init__(api)

    def observe(self, ev):
        """Called by the store for each committed change (under its lock): a namespace marked
        for deletion is due shortly."""
        if ev.storage != "core/namespaces" or ev.type == "DELETED" or \
                not ev.obj["metadata"].get("deletionTimestamp"):
            return
        self._enqueue(ev.obj["metadata"]["name"], self.delay)

    def _enqueue(self, name, wait):
        """The delaying queue's AddAfter: due in wait seconds, unless due sooner already (every
        update of a namespace being deleted, the controller's own status writes too, makes it
        due 5 s later)."""
        with self.cond:
            due = time.monotonic() + wait
            self.queue[name] = min(self.queue.get(name, due), due)
            self.cond.notify()

    def _run(self):
        while True:
            with self.cond:
                while not self.stopped:
                    now = time.monotonic()
                    due = [n for n, at in self.queue.items() if at <= now]
                    if due:
                        break
                    self.cond.wait(min(self.queue.values()) - now if self.queue else None)
                if self.stopped:
                    return
                for n in due:
                    del self.queue[n]
            for name in sorted(due):
                try:
                    wait = self._sync(name)
                    if wait is None:
                        self.failures.pop(name, None)     # the queue's Forget
                except Exception as e:   # noqa: BLE001 - the controller logs and retries
                    if not isinstance(e, ContentLeft):
                        print("fakekube: namespace controller: %s: %r" % (name, e), flush=True)
                    # AddRateLimited: 5 ms doubling per failure in a row, at most 60 s
                    n = self.failures[name] = self.failures.get(name, 0) + 1
                    wait = min(0.005 * 2 ** min(n - 1, 20), 60.0)
                if wait is not None:
                    self._enqueue(name, wait)

    # ------------------------------------------------------------ the controller's steps

    def _storages(self):
        return sorted({r.storage for r in self.registry.resources
                       if r.namespaced and not r.create_only})

    def _sync(self, name):
        """One pass over a namespace being deleted (namespacedResourcesDeleter.Delete): None
        when done with it (gone, not being deleted, or finalized by this controller), else
        the seconds until the next pass (content remaining: half its estimate plus one);
        ContentLeft when objects that nothing holds remain."""
        ns = self.store.get("core/namespaces", "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp") or \
                FINALIZER not in ((ns.get("spec") or {}).get("finalizers") or []):
            return None
        since = time.time() - A.parse_rfc3339(ns["metadata"]["deletionTimestamp"]).timestamp()
        estimate, errors, remaining, held = 0, [], {}, {}
        for st in self._storages():
            res = self._res(st)
            # estimateGracefulTermination: pods' longest terminationGracePeriodSeconds (not
            # of ended ones), until that long after the namespace's deletion
            grace = self._pods_grace(name) if st == "core/pods" else 0
            grace = grace if since < grace else 0
            left = self._delete_all(res, st, name)
            if not left:
                continue
            # resource.group ("configmaps." for the core group)
            remaining["%s.%s" % (res.plural, res.group)] = len(left)
            fins = [f for obj in left for f in obj["metadata"].get("finalizers") or []]
            for f in fins:
                held[f] = held.get(f, 0) + 1
            if grace:
                estimate = max(estimate, grace)
            elif fins:
                estimate = max(estimate, FINALIZER_ESTIMATE)
            else:   # nothing holds them: they should have gone
                errors.append("unexpected items still remain in namespace: %s for gvr: %s/%s, "
                              "Resource=%s" % (name, res.group, res.version, res.plural))
        if not self._set_conditions(name, remaining, held, errors):
            return None
        if errors:
            raise ContentLeft(", ".join(errors))
        if estimate:
            return estimate // 2 + 1
        self._finalize(name)
        return None

    def _pods_grace(self, name):
        return max([(p.get("spec") or {}).get("terminationGracePeriodSeconds") or 0
                    for p in self.store.items("core/pods", name)
                    if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")],
                   default=0)

    def _delete_all(self, res, st, name):
        """Delete what the namespace holds of one kind, as the controller does: one
        deletecollection (Background) whatever it holds, which deletes objects being deleted
        already too (taking their GC finalizers away); the objects left."""
        answer = self.api.delete_collection(res, name, {"propagationPolicy": "Background"}, {})
        self._wrote("deletecollection", st, name, "", answer[1])
        return list(self.store.items(st, name))

    def _set_conditions(self, name, remaining, held, errors):
        """The five conditions, written (PUT .../status) when they change; False when the
        namespace went."""
        conds = []
        for ctype, reason, message in OK:
            status = "False"
            if ctype == "NamespaceDeletionContentFailure" and errors:
                status, reason = "True", "ContentDeletionFailed"
                message = "Failed to delete all resource types, %d remaining: %s" % (
                    len(errors), ", ".join(sorted(errors)))
            elif ctype == "NamespaceContentRemaining" and remaining:
                status, reason = "True", "SomeResourcesRemain"
                message = "Some resources are remaining: " + ", ".join(
                    "%s has %d resource instances" % (k, v) for k, v in sorted(remaining.items()))
            elif ctype == "NamespaceFinalizersRemaining" and held:
                status, reason = "True", "SomeFinalizersRemain"
                message = "Some content in the namespace has finalizers remaining: " + ", ".join(
                    "%s in %d resource instances" % (k, v) for k, v in sorted(held.items()))
            conds.append({"type": ctype, "status": status, "reason": reason,
                          "message": message})
        old = self.store.get("core/namespaces", "", name)
        if old is None:
            return False
        was = {c.get("type"): c for c in (old.get("status") or {}).get("conditions") or []}
        if all((was.get(c["type"]) or {}).get(k) == c[k] for c in conds
               for k in ("status", "reason", "message")):
            return True
        now = A.now_rfc3339()
        for c in conds:
            prev = was.get(c["type"])
            c["lastTransitionTime"] = prev["lastTransitionTime"] \
                if prev and prev.get("status") == c["status"] else now
        new = copy.deepcopy(old)
        kept = [c for c in (old.get("status") or {}).get("conditions") or []
                if c.get("type") not in {t for t, _, _ in OK}]
        new.setdefault("status", {})["conditions"] = kept + conds
        try:
            return self._update(name, new, "status") is not None
        except A.StatusError as e:   # logged, and the pass goes on (deleteAllContent)
            print("fakekube: namespace controller: couldn't update status condition for "
                  "namespace %r: %s" % (name, e), flush=True)
            return True

    def _finalize(self, name):
        """PUT .../finalize with "kubernetes" out of spec.finalizers, again on the namespace
        as it is now after a conflict (retryOnConflictError): the API server deletes the
        namespace when no finalizer of either kind is left."""
        uid = None
        while True:
            old = self.store.get("core/namespaces", "", name)
            if old is None:
                return
            if uid is not None and old["metadata"].get("uid") != uid:
                raise RuntimeError("namespace uid has changed across retries")
            uid = old["metadata"].get("uid")
            new = copy.deepcopy(old)
            spec = new.setdefault("spec", {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
            try:
                self._update(name, new, "finalize")
                return
            except A.StatusError as e:
                if e.code != 409:
                    raise

    def _update(self, name, obj, subresource):
        """A PUT of the namespace's subresource through the API, as the controller's client
        sends it (its resourceVersion a precondition: a 409 is tried again on the next
        pass); the answer's object, None when it is gone."""
        api, res = self.api, self._res("core/namespaces")
        obj = copy.deepcopy(obj)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        obj["metadata"].pop("managedFields", None)
        body = dict({"kind": "Namespace", "apiVersion": "v1"}, **obj)
        api.begin_write("update", {}, self.user_agent, "application/json")
        try:
            answer = api.update(res, "", name, body, subresource)
        except A.StatusError as e:
            if e.code == 404:
                return None
            raise
        finally:
            api.take_warnings()
        self._wrote("update", "core/namespaces", "", name, answer[1], subresource)
        return answer[1]
