# SPDX-License-Identifier: Apache-2.0
"""A list+watch cache of one resource (client-go's informer, small): list, then watch from the
list's resourceVersion, resume after a dropped watch from the last seen version, list again on
410 Gone or an ERROR event.  Keeps {name: object}; calls on_change() after every change.
"""

import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from fakekube.kubeclient import ApiError, WatchBroken  # noqa: E402


class Informer:
    def __init__(self, client, resource, namespace=None, label_selector=None, on_change=None,
                 watch_timeout=60, name="informer"):
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.items = {}
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._watch = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.errors = 0

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        w = self._watch
        if w is not None:
            w.close()
        self._thread.join(5)

    def snapshot(self):
        with self.lock:
            return dict(self.items)

    def wait_synced(self, timeout=10.0):
        if not self.synced.wait(timeout):
            raise TimeoutError("%s %s: not synced in %.0fs" % (self.resource, self.label_selector,
                                                               timeout))

    def _key(self, obj):
        m = obj.get("metadata") or {}
        return (m.get("namespace") or "") + "/" + m.get("name", "")

    def _notify(self):
        if self.on_change:
            try:
                self.on_change()
            except Exception as e:  # a callback bug must not kill the cache
                sys.stderr.write("informer %s: on_change failed: %r\n" % (self.resource, e))

    def _list(self):
        items, rv = self.client.list_all(self.resource, self.namespace,
                                         label_selector=self.label_selector)
        with self.lock:
            self.items = {self._key(o): o for o in items}
        self.synced.set()
        self._notify()
        return rv

    def _run(self):
        rv = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list()
                self._watch = self.client.watch(self.resource, self.namespace, resource_version=rv,
                                                label_selector=self.label_selector,
                                                timeout_seconds=self.watch_timeout,
                                                allow_bookmarks=True)
                for ev in self._watch:
                    if self._stop.is_set():
                        break
                    typ, obj = ev.get("type"), ev.get("object") or {}
                    if typ == "ERROR":
                        if obj.get("code") == 410:
                            rv = None       # too old: list again
                            break
                        continue
                    if typ == "BOOKMARK":
                        continue
                    with self.lock:
                        if typ == "DELETED":
                            self.items.pop(self._key(obj), None)
                        else:
                            self.items[self._key(obj)] = obj
                    self._notify()
                if rv is not None:          # clean end (timeoutSeconds): resume
                    rv = self._watch.last_rv or rv
            except WatchBroken:
                rv = self._watch.last_rv if self._watch is not None else rv
                self.errors += 1
                self._stop.wait(0.1)
            except ApiError as e:
                self.errors += 1
                if e.code == 410:
                    rv = None
                self._stop.wait(0.2)
            except (ConnectionError, OSError, ValueError):
                self.errors += 1
                self._stop.wait(0.3)
            finally:
                w, self._watch = self._watch, None
                if w is not None:
                    w.close()
