# SPDX-License-Identifier: Apache-2.0
"""The frame of a kube-controller-manager controller run beside the fake API server (gc.py's
garbage collector, nsctl.py's namespace controller): a thread woken through a condition, told
of every change the store commits (observe, under the store's lock), and acting through the
API, each of its writes reported to on_write as the write log records a request of its own
user (USER: the controller's service account; user_agent: kube-controller-manager's
User-Agent ending in it)."""

import threading

# kube-controller-manager's User-Agent, less the service account it ends in; its first segment
# is the field manager the API server records for the controllers' writes
KCM_USER_AGENT = "kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/9f2a8c5/"


class Worker:
    NAME = "fakekube-worker"   # the thread's name
    USER = ""                  # the service account its requests authenticate as

    def __init__(self, api):
        self.api = api
        self.store = api.store
        self.registry = api.registry
        self.cond = threading.Condition(threading.Lock())
        self.stopped = False
        self.thread = None
        # on_write(user, user agent, verb, resource, subresource, namespace, name, object):
        # told of each successful write (the server's write log, GET /fake/writes)
        self.on_write = None
        self.store.observers.append(self.observe)

    @property
    def user_agent(self):
        return KCM_USER_AGENT + self.USER

    def observe(self, ev):
        """Called by the store for each committed change, under its lock."""
        raise NotImplementedError

    def _run(self):
        raise NotImplementedError

    def start(self):
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name=self.NAME, daemon=True)
            self.thread.start()

    def stop(self):
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def _res(self, storage):
        return self.registry.storage_of(storage)

    def _wrote(self, verb, storage, ns, name, answer, subresource=None):
        """Report a write through the API (answer: the handler's (code, object), or the
        object)."""
        if self.on_write is not None:
            body = answer[1] if isinstance(answer, tuple) else answer
            self.on_write(self.USER, self.user_agent, verb, self._res(storage).plural,
                          subresource, ns, name, body if isinstance(body, dict) else None)
