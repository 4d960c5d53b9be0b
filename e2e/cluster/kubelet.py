#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The local cluster's "kubelet": the Deployment, ReplicaSet and kubelet controllers in one, talking
to the API server only through the Kubernetes API (fakekube.kubeclient, any kubeconfig).

It watches the Deployments of one namespace that carry the label
e2e.gpuscaler.io/fakeserve: "true" (or all of them with --all) and keeps, for each, one
ReplicaSet and spec.replicas Pods.  A new Pod gets the template's labels (+ pod-template-hash),
annotations and containers, an ownerReference to the ReplicaSet, the finalizer
e2e.gpuscaler.io/fake-kubelet, a fresh loopback address 127.A.B.C as status.podIP, phase Running
and Ready=False; one fakeserve process is started on that address and the template's container
port (the same port for every pod, as in a real cluster).  A readiness probe (GET /health every
0.1 s) flips the Pod Ready, with lastTransitionTime, once the fakeserve cold start is over.

Scale-in deletes pods through the API, not-ready ones first, then newest first (the ReplicaSet
controller's order).  The finalizer makes that graceful: the Pod keeps a deletionTimestamp and
Ready=False while its process gets SIGTERM and drains (SIGKILL after
terminationGracePeriodSeconds, or the shorter period a DELETE gave); the finalizer is removed,
and the Pod deleted with period 0 (as a kubelet ends a bound pod's graceful deletion), only
after the process exited (the SIGTERM comes e2e.gpuscaler.io/pre-stop after Ready=False, as a
preStop sleep would).  A Pod deleted by anyone else goes the same way and is replaced.  A
process that dies on its own is restarted (restartCount + 1, with back-off).  Deployment and
ReplicaSet status (replicas, readyReplicas, updatedReplicas, availableReplicas,
unavailableReplicas, observedGeneration, conditions) follow.

fakeserve settings come from template annotations (deployment annotations as fallback):
  e2e.gpuscaler.io/gpus        default: the container's nvidia.com/gpu (or amd.com/gpu) limit, 1
  e2e.gpuscaler.io/slots       4       concurrent requests per GPU
  e2e.gpuscaler.io/service-ms  500     mean service time
  e2e.gpuscaler.io/service-sigma 0.25  lognormal shape
  e2e.gpuscaler.io/profile     gpuscaler.io/metrics-profile if vllm/triton/tgi/sglang/nim/tei, else vllm
  e2e.gpuscaler.io/cold-start  2s      seconds or a duration (500ms, 1m)
  e2e.gpuscaler.io/model       the Deployment's name
  e2e.gpuscaler.io/metrics-fault none  (hang, garbage, slow)
  e2e.gpuscaler.io/max-queue   100000
  e2e.gpuscaler.io/seed        derived from the pod name
  e2e.gpuscaler.io/token-cost-ms 0    ms of slot time per weighted token (fakeserve)
  e2e.gpuscaler.io/prompt-token-cost 0.25  a prompt token's cost in generated tokens
  e2e.gpuscaler.io/prompt-mix  ""      P:G@UNIX_TS,... tokens per request by wall clock
  e2e.gpuscaler.io/pre-stop    0.3s    wait between Ready=False and SIGTERM (a preStop sleep,
                                       so Service fronts drop the pod before it drains)
The port is the first container's port named http, else metrics, else its first port, else 8000.

GPU budget (the scheduler's part).  Nodes are the kubelet's own node (--node-name, by default
fake-node-1, with no limit) plus every Node object labelled e2e.gpuscaler.io/fake-node: "true",
whose status.allocatable nvidia.com/gpu and amd.com/gpu are its GPUs (a resource it does not
list it has none of; a Node object named like the kubelet's own node replaces it, which is what
--gpu-budget N creates).  A pod goes to the first node, by name, that matches its
spec.nodeSelector and has the GPUs its containers' limits ask for free (GPUs of pods bound there
whose process has not exited yet).  When none has, the pod stays Pending, unbound, with
PodScheduled=False, reason Unschedulable and the kube-scheduler's message, e.g. "0/2 nodes are
available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector.
preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1
Preemption is not helpful for scheduling." (FitError.Error() of pkg/scheduler/framework: the
reasons counted per node, sorted as strings, then the preemption verdicts); no address, no
process.  When GPUs free up (a pod's process exited, a Node's allocatable raised, a Node added)
pending pods are bound through pods/binding (with the pod's UID, as the scheduler binds),
oldest first, and start: the API server sets PodScheduled=True with that time as
lastTransitionTime in the binding's update, and the kubelet's status writes keep it, so creation
-> PodScheduled is the scheduling delay and PodScheduled -> Ready the load time.  Scale-in removes pending pods first (the ReplicaSet
controller's order: unassigned, then not ready, then newest).

Every process is tracked by PID (state-dir/kubelet-pids.json) and killed on exit.  Lifecycle
events go to --events as JSON lines (pod-created, pod-unschedulable, pod-scheduled, pod-ready,
pod-terminating, pod-deleted, process-exit, process-restart) with wall-clock "ts" and the pod's
ip/pid.
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import re
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.dirname(HERE)
if E2E not in sys.path:
    sys.path.insert(0, E2E)

from fakekube.kubeclient import ApiError, Client  # noqa: E402
from cluster import procs  # noqa: E402
from cluster.informer import Informer  # noqa: E402

FAKESERVE = os.path.join(E2E, "fakeserve", "server.py")
LABEL = "e2e.gpuscaler.io/fakeserve"
FINALIZER = "e2e.gpuscaler.io/fake-kubelet"
NODE_LABEL = "e2e.gpuscaler.io/fake-node"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
ANN = "e2e.gpuscaler.io/"
HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_duration(v, default=0.0):
    """'90s', '1m30s', '500ms', '2' (seconds) -> float seconds."""
    if v is None or v == "":
        return default
    s = str(v).strip()
    try:
        return float(s)
    except ValueError:
        pass
    total, pos = 0.0, 0
    for m in re.finditer(r"(\d+(?:\.\d+)?)(ms|h|m|s)", s):
        if m.start() != pos:
            raise ValueError("bad duration %r" % v)
        total += float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError("bad duration %r" % v)
    return total


def _meta(o):
    return o.get("metadata") or {}


def _owner_uid(o):
    for r in _meta(o).get("ownerReferences") or []:
        if r.get("controller"):
            return r.get("uid")
    return None


def template_hash(template):
    h = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(HASH_ALPHABET[b % len(HASH_ALPHABET)] for b in h[:10])


def container_port(spec):
    cs = (spec or {}).get("containers") or []
    if not cs:
        return 8000
    ports = cs[0].get("ports") or []
    for want in ("http", "metrics"):
        for p in ports:
            if p.get("name") == want and p.get("containerPort"):
                return int(p["containerPort"])
    for p in ports:
        if p.get("containerPort"):
            return int(p["containerPort"])
    return 8000


def gpu_limit(spec):
    for c in (spec or {}).get("containers") or []:
        lim = ((c.get("resources") or {}).get("limits") or {})
        for k in ("nvidia.com/gpu", "amd.com/gpu"):
            if k in lim:
                try:
                    return max(1, int(str(lim[k])))
                except ValueError:
                    pass
    return 1


def gpu_request(spec):
    """{resource: count} of the GPUs a pod spec's containers ask for (their limits)."""
    want = {}
    for c in (spec or {}).get("containers") or []:
        lim = ((c.get("resources") or {}).get("limits") or {})
        for k in GPU_RESOURCES:
            try:
                n = int(str(lim.get(k, 0)))
            except ValueError:
                n = 0
            if n > 0:
                want[k] = want.get(k, 0) + n
    return want


def fit_error(n_nodes, reasons, verdicts):
    """The kube-scheduler's FitError.Error() with DefaultPreemption's PostFilter message: per
    reason the count of nodes, "%v %v", sorted as strings, joined with ", "."""
    def hist(d):
        return ", ".join(sorted("%d %s" % (c, r) for r, c in d.items()))
    return ("0/%d nodes are available: %s. preemption: 0/%d nodes are available: %s."
            % (n_nodes, hist(reasons), n_nodes, hist(verdicts)))


def put_gpu_node(client, name, gpus, labels=None, resource="nvidia.com/gpu"):
    """Create or update the Node `name` (labelled NODE_LABEL=true and with `labels`) so that its
    status.capacity and status.allocatable say `gpus` of `resource`: how a test gives the
    kubelet a GPU budget, raises it (as a cluster autoscaler's new node would) or lowers it."""
    alloc = {resource: str(int(gpus)), "cpu": "64", "memory": "512Gi", "pods": "110"}
    status = {"capacity": dict(alloc), "allocatable": dict(alloc),
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                              "message": "fake kubelet is posting ready status",
                              "lastHeartbeatTime": now_rfc3339(),
                              "lastTransitionTime": now_rfc3339()}]}
    node_labels = dict(labels or {}, **{NODE_LABEL: "true", "kubernetes.io/hostname": name})
    try:
        client.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": node_labels},
                                "status": status})
    except ApiError as e:
        if e.code != 409:
            raise
        client.patch("nodes", name, {"metadata": {"labels": node_labels}})
    client.patch("nodes", name, {"status": status}, subresource="status")


def fakeserve_settings(dep, pod_name):
    """fakeserve's flags for a pod of Deployment dep (see the module doc)."""
    tmpl = (dep.get("spec") or {}).get("template") or {}
    ann = dict(_meta(dep).get("annotations") or {})
    ann.update(_meta(tmpl).get("annotations") or {})
    spec = tmpl.get("spec") or {}

    def get(k, default):
        v = ann.get(ANN + k)
        return default if v in (None, "") else v

    prof = get("profile", None)
    if prof is None:
        gp = ann.get("gpuscaler.io/metrics-profile")
        prof = gp if gp in ("vllm", "triton", "tgi", "sglang", "nim", "tei") else "vllm"
    seed = int(hashlib.sha256(pod_name.encode()).hexdigest()[:8], 16)
    return {
        "gpus": int(get("gpus", gpu_limit(spec))),
        "slots": int(get("slots", 4)),
        "service_ms": float(get("service-ms", 500)),
        "service_sigma": float(get("service-sigma", 0.25)),
        "profile": prof,
        "cold_start": parse_duration(get("cold-start", "2s")),
        "model": get("model", _meta(dep).get("name", "fake-model")),
        "metrics_fault": get("metrics-fault", "none"),
        "max_queue": int(get("max-queue", 100000)),
        "seed": int(get("seed", seed)),
        "port": container_port(spec),
        "grace": float(spec.get("terminationGracePeriodSeconds", 30)),
        "pre_stop": parse_duration(get("pre-stop", "0.3s")),
        "token_cost_ms": float(get("token-cost-ms", 0)),
        "prompt_token_cost": float(get("prompt-token-cost", 0.25)),
        "prompt_mix": get("prompt-mix", ""),
    }


class PodRuntime:
    """What the kubelet knows of one pod it runs."""

    def __init__(self, name, dep_name, dep_uid, ip, port, settings, seq):
        self.name = name
        self.deployment = dep_name
        self.dep_uid = dep_uid
        self.ip = ip
        self.port = port
        self.settings = settings
        self.seq = seq
        self.proc = None
        self.started = None          # monotonic start of the current process
        self.created_wall = time.time()
        self.ready = False
        self.ready_wall = None
        self.terminating = False
        self.term_started = None
        self.killed = False
        self.restarts = 0
        self.next_restart = 0.0
        self.next_probe = 0.0
        self.seen = False
        self.uid = None
        self.container = "server"
        self.image = "fakeserve"
        self.api_delete = True
        self.signalled = False
        self.node = None             # bound node; None while Pending (unschedulable)
        self.gpus_req = {}           # GPUs by resource it holds once bound
        self.selector = {}           # spec.nodeSelector
        self.unsched_msg = None      # the PodScheduled=False message written
        self.unsched_ts = None
        self.sched_ts = None         # PodScheduled=True as the binding set it (API server time)

    @property
    def pending(self):
        return self.node is None


class Kubelet:
    def __init__(self, kubeconfig, namespace="default", state_dir=".", ip_prefix="127.77",
                 all_deployments=False, control_token="", python=sys.executable,
                 node_name="fake-node-1", events_path=None, probe_period=0.1, gpu_budget=None):
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.state_dir = os.path.abspath(state_dir)
        self.pod_log_dir = os.path.join(self.state_dir, "pods")
        os.makedirs(self.pod_log_dir, exist_ok=True)
        parts = ip_prefix.split(".")
        if len(parts) != 2 or parts[0] != "127" or not 0 <= int(parts[1]) <= 255:
            raise ValueError("ip_prefix must look like 127.N")
        self.ip_prefix = ip_prefix
        self.all = all_deployments
        self.control_token = control_token
        self.python = python
        self.node_name = node_name
        self.gpu_budget = gpu_budget     # --gpu-budget: make our own node a budgeted Node
        self.events_path = events_path or os.path.join(self.state_dir, "kubelet-events.jsonl")
        self.pidfile = os.path.join(self.state_dir, "kubelet-pids.json")
        self.probe_period = probe_period
        self.runtimes = {}           # pod name -> PodRuntime
        self.rs_of = {}              # deployment uid -> (rs name, rs uid)
        self.released = {}           # name -> monotonic time of our last finalizer release
        self.last_status = {}        # (kind, name) -> status written
        self.ip_next = 1
        self.seq = 0
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.thread = None
        self.lock = threading.Lock()
        self.events_lock = threading.Lock()
        self.client = None
        self.errors = []

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self.client = Client.from_kubeconfig(self.kubeconfig, timeout=10)
        sel = None if self.all else LABEL + "=true"
        self.deps = Informer(self.client, "deployments", self.namespace, sel, self.wake.set,
                             name="kubelet-deployments").start()
        self.pods = Informer(self.client, "pods", self.namespace, None, self.wake.set,
                             name="kubelet-pods").start()
        self.rss = Informer(self.client, "replicasets", self.namespace, None, self.wake.set,
                            name="kubelet-replicasets").start()
        if self.gpu_budget is not None:
            put_gpu_node(self.client, self.node_name, self.gpu_budget)
        self.nodes = Informer(self.client, "nodes", None, NODE_LABEL + "=true", self.wake.set,
                              name="kubelet-nodes").start()
        for inf in (self.deps, self.pods, self.rss, self.nodes):
            inf.wait_synced(20)
        self.thread = threading.Thread(target=self._loop, name="kubelet-loop", daemon=True)
        self.thread.start()
        self._write_pids()
        return self

    def stop(self, grace=3.0):
        """Stop reconciling, SIGTERM every pod process (SIGKILL after grace), stop watches."""
        self.stopping.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(15)
        with self.lock:
            rts = list(self.runtimes.values())
        for rt in rts:
            if rt.proc is not None and rt.proc.poll() is None:
                try:
                    rt.proc.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for rt in rts:
            if rt.proc is not None:
                procs.stop(rt.proc, max(0.1, deadline - time.monotonic()))
        for inf in ("deps", "pods", "rss", "nodes"):
            if hasattr(self, inf):
                getattr(self, inf).stop()
        if self.client is not None:
            self.client.close()
        self._write_pids()

    def pids(self):
        with self.lock:
            return {n: rt.proc.pid for n, rt in self.runtimes.items()
                    if rt.proc is not None and rt.proc.poll() is None}

    def _write_pids(self):
        procs.write_pidfile(self.pidfile, {"kubelet": os.getpid(), "pods": self.pids()})

    def event(self, kind, rt=None, **kw):
        rec = {"ts": round(time.time(), 3), "event": kind}
        if rt is not None:
            rec.update({"deployment": rt.deployment, "pod": rt.name, "ip": rt.ip,
                        "port": rt.port, "pid": rt.proc.pid if rt.proc else None})
        rec.update(kw)
        with self.events_lock:
            with open(self.events_path, "a") as f:
                f.write(json.dumps(rec) + "\n")

    # ------------------------------------------------------------ loop

    def _loop(self):
        while not self.stopping.is_set():
            self.wake.wait(self.probe_period)
            self.wake.clear()
            if self.stopping.is_set():
                break
            try:
                self.reconcile()
            except (ApiError, ConnectionError, OSError) as e:
                self.errors.append(repr(e))
                del self.errors[:-50]
                sys.stderr.write("kubelet: reconcile: %r\n" % (e,))
                self.stopping.wait(0.2)

    def reconcile(self):
        deps = {(_meta(d).get("uid")): d for d in self.deps.snapshot().values()}
        pods = {_meta(p).get("name"): p for p in self.pods.snapshot().values()}
        rss = list(self.rss.snapshot().values())
        changed = False
        # pods we run: API view first (deleted by someone, vanished)
        for name, rt in list(self.runtimes.items()):
            p = pods.get(name)
            if p is not None:
                rt.seen = True
                dg = _meta(p).get("deletionGracePeriodSeconds")
                if _meta(p).get("deletionTimestamp") and dg is not None and \
                        dg < rt.settings["grace"]:
                    # a shorter period (kubectl delete --grace-period): killed that much sooner
                    rt.settings["grace"] = float(dg)
                if _meta(p).get("deletionTimestamp") and not rt.terminating:
                    self.begin_terminate(rt, "deleted through the API")
            elif (rt.seen or time.time() - rt.created_wall > 10) and not rt.terminating:
                # gone from the API without us (force delete): kill the process
                self.begin_terminate(rt, "pod object vanished", api=False)
            if rt.dep_uid not in deps and not rt.terminating:
                self.begin_terminate(rt, "deployment deleted")
        # pods we do not run with our finalizer (a previous kubelet's), or bound to one of our
        # nodes and left in their graceful deletion (a release whose DELETE failed): let
        # them go
        now = time.monotonic()
        ours = {n for n, _, _ in self.node_table()}
        for name, p in pods.items():
            m = _meta(p)
            left = m.get("deletionTimestamp") and m.get("deletionGracePeriodSeconds") and \
                (p.get("spec") or {}).get("nodeName") in ours
            if name not in self.runtimes and (FINALIZER in (m.get("finalizers") or []) or left) \
                    and now - self.released.get(name, -10.0) > 2.0:
                self.released[name] = now
                self._release(name, m.get("uid"))
        # process supervision, termination, probes
        for rt in list(self.runtimes.values()):
            changed |= self.supervise(rt)
        # the scheduler: pending pods onto GPUs that freed up
        changed |= self.schedule_pending()
        # desired replicas per deployment
        for uid, d in deps.items():
            changed |= self.sync_deployment(d, rss)
        # replica sets of deleted deployments
        for rs in rss:
            ou = _owner_uid(rs)
            if ou and ou not in deps and \
                    (_meta(rs).get("labels") or {}).get(LABEL + "-owned") == "true" and \
                    now - self.released.get("rs/" + _meta(rs)["name"], -10.0) > 2.0:
                self.released["rs/" + _meta(rs)["name"]] = now
                try:
                    self.client.delete("replicasets", _meta(rs)["name"], self.namespace)
                except ApiError as e:
                    if e.code != 404:
                        raise
        if changed:
            self._write_pids()

    # ------------------------------------------------------------ deployments

    def sync_deployment(self, d, rss):
        meta = _meta(d)
        uid = meta.get("uid")
        spec = d.get("spec") or {}
        want = int(spec.get("replicas", 1))
        rs_name, rs_uid = self.ensure_rs(d, rss)
        active = [rt for rt in self.runtimes.values() if rt.dep_uid == uid and not rt.terminating]
        changed = False
        if len(active) < want:
            for _ in range(want - len(active)):
                if self.create_pod(d, rs_name, rs_uid) is None:
                    break
                changed = True
        elif len(active) > want:
            # ReplicaSet controller order: unassigned first, then not ready, then newest
            victims = sorted(active, key=lambda r: (not r.pending, r.ready, -r.seq))
            victims = victims[:len(active) - want]
            for rt in victims:
                self.begin_terminate(rt, "scale-in")
                changed = True
        active = [rt for rt in self.runtimes.values() if rt.dep_uid == uid and not rt.terminating]
        ready = sum(1 for rt in active if rt.ready)
        self.write_status(d, rs_name, want, len(active), ready)
        return changed

    def ensure_rs(self, d, rss):
        meta = _meta(d)
        uid = meta["uid"]
        if uid in self.rs_of:
            return self.rs_of[uid]
        for rs in rss:
            if _owner_uid(rs) == uid:
                self.rs_of[uid] = (_meta(rs)["name"], _meta(rs)["uid"])
                return self.rs_of[uid]
        spec = d.get("spec") or {}
        tmpl = json.loads(json.dumps(spec.get("template") or {}))
        h = template_hash(tmpl)
        tmeta = tmpl.setdefault("metadata", {})
        tmeta["labels"] = dict(tmeta.get("labels") or {}, **{"pod-template-hash": h})
        sel = json.loads(json.dumps(spec.get("selector") or {}))
        sel.setdefault("matchLabels", {})["pod-template-hash"] = h
        labels = dict(tmeta["labels"])
        labels[LABEL + "-owned"] = "true"
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": "%s-%s" % (meta["name"], h), "namespace": self.namespace,
                           "labels": labels,
                           "annotations": {"deployment.kubernetes.io/desired-replicas":
                                           str(spec.get("replicas", 1))},
                           "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                "name": meta["name"], "uid": uid,
                                                "controller": True,
                                                "blockOwnerDeletion": True}]},
              "spec": {"replicas": spec.get("replicas", 1), "selector": sel, "template": tmpl}}
        try:
            out = self.client.create("replicasets", rs, self.namespace)
        except ApiError as e:
            if e.code != 409:
                raise
            out = self.client.get("replicasets", rs["metadata"]["name"], self.namespace)
        self.rs_of[uid] = (_meta(out)["name"], _meta(out)["uid"])
        return self.rs_of[uid]

    def write_status(self, d, rs_name, want, replicas, ready):
        meta = _meta(d)
        dname = meta["name"]
        old = d.get("status") or {}
        unavailable = max(0, want - ready)
        max_unavail = (want * 25) // 100
        avail_ok = ready >= want - max_unavail
        conds = []
        for typ, ok, reason, msg in (
                ("Available", avail_ok,
                 "MinimumReplicasAvailable" if avail_ok else "MinimumReplicasUnavailable",
                 "Deployment has %s minimum availability." % ("" if avail_ok else "not")),
                ("Progressing", True,
                 "NewReplicaSetAvailable" if ready == want == replicas else "ReplicaSetUpdated",
                 'ReplicaSet "%s" %s.' % (rs_name, "is progressing" if ready != want
                                           else "has successfully progressed"))):
            status = "True" if ok else "False"
            prev = next((c for c in old.get("conditions") or [] if c.get("type") == typ), None)
            ltt = prev.get("lastTransitionTime") if prev and prev.get("status") == status \
                else now_rfc3339()
            conds.append({"type": typ, "status": status, "reason": reason,
                          "message": msg.replace("  ", " "),
                          "lastUpdateTime": ltt, "lastTransitionTime": ltt})
        st = {"observedGeneration": meta.get("generation", 1), "replicas": replicas,
              "updatedReplicas": replicas, "readyReplicas": ready, "availableReplicas": ready,
              "unavailableReplicas": unavailable, "conditions": conds}
        key = ("deployment", meta["uid"])
        cmp = {k: v for k, v in st.items() if k != "conditions"}
        cmp["c"] = [(c["type"], c["status"], c["reason"]) for c in conds]
        if self.last_status.get(key) != cmp:
            body = dict(st)
            for k in ("readyReplicas", "availableReplicas", "unavailableReplicas",
                      "updatedReplicas", "replicas"):
                if body[k] == 0:
                    body[k] = None       # omitted when zero, as the real API does
            self.client.patch("deployments", dname, {"status": body}, self.namespace,
                              subresource="status")
            self.last_status[key] = cmp
        rkey = ("replicaset", rs_name)
        rst = {"replicas": replicas, "fullyLabeledReplicas": replicas, "readyReplicas": ready,
               "availableReplicas": ready, "observedGeneration": 1, "want": want}
        if self.last_status.get(rkey) != rst:
            try:
                self.client.patch("replicasets", rs_name, {
                    "metadata": {"annotations": {
                        "deployment.kubernetes.io/desired-replicas": str(want)}},
                    "spec": {"replicas": want}}, self.namespace)
                body = {k: (v if v else None) for k, v in rst.items() if k != "want"}
                body["replicas"] = replicas
                self.client.patch("replicasets", rs_name, {"status": body}, self.namespace,
                                  subresource="status")
            except ApiError as e:
                if e.code != 404:
                    raise
                self.rs_of.pop(meta["uid"], None)
            self.last_status[rkey] = rst

    # ------------------------------------------------------------ pods

    def alloc_ip(self, port):
        for _ in range(254 * 254):
            n = self.ip_next
            self.ip_next += 1
            ip = "%s.%d.%d" % (self.ip_prefix, 1 + (n - 1) // 253, 2 + (n - 1) % 253)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((ip, port))
                return ip
            except OSError:
                continue        # someone else's: skip it
            finally:
                s.close()
        raise RuntimeError("no free loopback address under %s" % self.ip_prefix)

    def create_pod(self, d, rs_name, rs_uid):
        meta = _meta(d)
        spec = d.get("spec") or {}
        tmpl = spec.get("template") or {}
        tmeta = _meta(tmpl)
        h = rs_name.rsplit("-", 1)[-1]
        for _ in range(5):
            # generateName "<rs>-" cut to 58 bytes, then 5 characters (apiserver storage/names)
            name = ("%s-" % rs_name)[:58] + "".join(random.choice(HASH_ALPHABET)
                                                     for _ in range(5))
            if name not in self.runtimes:
                break
        settings = fakeserve_settings(d, name)
        pspec = json.loads(json.dumps(tmpl.get("spec") or {}))
        want = gpu_request(pspec)
        selector = dict(pspec.get("nodeSelector") or {})
        node, why = self.place(want, selector)
        ip = self.alloc_ip(settings["port"]) if node is not None else None
        if node is not None:
            pspec["nodeName"] = node
        labels = dict(tmeta.get("labels") or {})
        labels["pod-template-hash"] = h
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.namespace, "labels": labels,
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                 "name": rs_name, "uid": rs_uid,
                                                 "controller": True,
                                                 "blockOwnerDeletion": True}],
                            "finalizers": [FINALIZER]},
               "spec": pspec}
        if tmeta.get("annotations"):
            pod["metadata"]["annotations"] = dict(tmeta["annotations"])
        created = self.client.create("pods", pod, self.namespace)
        self.seq += 1
        rt = PodRuntime(name, meta["name"], meta["uid"], ip, settings["port"], settings, self.seq)
        rt.uid = _meta(created).get("uid")
        cs = pspec.get("containers") or [{}]
        rt.container = cs[0].get("name", "server")
        rt.image = cs[0].get("image", "fakeserve")
        rt.gpus_req, rt.selector, rt.node = want, selector, node
        with self.lock:
            self.runtimes[name] = rt
        if node is None:
            self.event("pod-created", rt, cold_start=settings["cold_start"],
                       profile=settings["profile"], gpus=settings["gpus"],
                       slots=settings["slots"], service_ms=settings["service_ms"], node=None)
            self.patch_pending_status(rt, why)
            self.event("pod-unschedulable", rt, message=why)
            return rt
        self.start_process(rt)
        self.event("pod-created", rt, cold_start=settings["cold_start"],
                   profile=settings["profile"], gpus=settings["gpus"], slots=settings["slots"],
                   service_ms=settings["service_ms"], node=node)
        self.patch_pod_status(rt, started=True)
        return rt

    def fakeserve_cmd(self, rt):
        s = rt.settings
        cmd = [self.python, FAKESERVE, "--listen", "%s:%d" % (rt.ip, rt.port),
               "--gpus", str(s["gpus"]), "--slots", str(s["slots"]),
               "--service-ms", str(s["service_ms"]), "--service-sigma", str(s["service_sigma"]),
               "--seed", str(s["seed"] + rt.restarts), "--profile", s["profile"],
               "--model", s["model"], "--cold-start", str(s["cold_start"]),
               "--grace", str(s["grace"]), "--max-queue", str(s["max_queue"]),
               "--metrics-fault", s["metrics_fault"], "--pod-name", rt.name]
        if s.get("token_cost_ms"):
            cmd += ["--token-cost-ms", str(s["token_cost_ms"]),
                    "--prompt-token-cost", str(s["prompt_token_cost"])]
        if s.get("prompt_mix"):
            cmd += ["--prompt-mix", s["prompt_mix"]]
        if self.control_token:
            cmd += ["--control-token", self.control_token]
        return cmd

    def start_process(self, rt):
        rt.proc = procs.spawn(self.fakeserve_cmd(rt),
                              os.path.join(self.pod_log_dir, rt.name + ".log"))
        rt.started = time.monotonic()
        rt.ready = False
        rt.next_probe = rt.started + min(0.05, rt.settings["cold_start"])
        self._write_pids()

    def patch_pod_status(self, rt, started=False):
        ts = now_rfc3339()
        ready = "True" if rt.ready else "False"
        running = rt.proc is not None and rt.proc.poll() is None
        conds = [{"type": "PodReadyToStartContainers", "status": "True",
                  "lastTransitionTime": rt.cond_ts if hasattr(rt, "cond_ts") else ts},
                 {"type": "Initialized", "status": "True",
                  "lastTransitionTime": getattr(rt, "cond_ts", ts)},
                 {"type": "Ready", "status": ready, "lastTransitionTime": ts},
                 {"type": "ContainersReady", "status": ready, "lastTransitionTime": ts},
                 {"type": "PodScheduled", "status": "True",
                  "lastTransitionTime": rt.sched_ts or getattr(rt, "cond_ts", ts)}]
        if not hasattr(rt, "cond_ts"):
            rt.cond_ts = ts
            rt.start_ts = ts
        if not rt.ready:
            for c in conds[2:4]:
                c["reason"] = "ContainersNotReady"
                c["message"] = "containers with unready status: [%s]" % rt.container
        state = {"running": {"startedAt": getattr(rt, "proc_ts", ts)}} if running else {
            "terminated": {"exitCode": rt.proc.returncode if rt.proc else 0,
                           "reason": "Completed" if rt.terminating else "Error",
                           "finishedAt": ts}}
        if started:
            rt.proc_ts = ts
        st = {"phase": "Running", "conditions": conds, "hostIP": "127.0.0.1",
              "hostIPs": [{"ip": "127.0.0.1"}], "podIP": rt.ip, "podIPs": [{"ip": rt.ip}],
              "startTime": rt.start_ts, "qosClass": "Burstable",
              "containerStatuses": [{"name": rt.container, "ready": rt.ready,
                                     "started": running, "restartCount": rt.restarts,
                                     "image": rt.image, "imageID": "fake://" + rt.image,
                                     "containerID": "fake://%d" % (rt.proc.pid if rt.proc
                                                                   else 0),
                                     "state": state}]}
        try:
            self.client.patch("pods", rt.name, {"status": st}, self.namespace,
                              subresource="status")
        except ApiError as e:
            if e.code != 404:
                raise

    # ------------------------------------------------------------ the scheduler's part

    def node_table(self):
        """[(name, labels, {resource: GPUs} or None for no limit)], by name: our own node and
        the labelled Node objects (one named like ours replaces it)."""
        nodes = {self.node_name: ({"kubernetes.io/hostname": self.node_name}, None)}
        for n in self.nodes.snapshot().values():
            m = _meta(n)
            alloc = (n.get("status") or {}).get("allocatable") or {}
            gpus = {}
            for r in GPU_RESOURCES:
                try:
                    gpus[r] = int(str(alloc.get(r, 0)))
                except ValueError:
                    gpus[r] = 0
            labels = dict(m.get("labels") or {})
            labels.setdefault("kubernetes.io/hostname", m["name"])
            nodes[m["name"]] = (labels, gpus)
        return sorted((k, v[0], v[1]) for k, v in nodes.items())

    def gpus_used(self):
        """{node: {resource: GPUs}} held by the pods bound there whose process has not exited."""
        used = {}
        with self.lock:
            rts = list(self.runtimes.values())
        for rt in rts:
            if rt.node is None:
                continue
            u = used.setdefault(rt.node, {})
            for r, n in rt.gpus_req.items():
                u[r] = u.get(r, 0) + n
        return used

    def place(self, want, selector):
        """(node, None) for the first node that matches selector and has `want` GPUs free, or
        (None, the kube-scheduler's message) when none has."""
        table, used = self.node_table(), self.gpus_used()
        reasons, verdicts = {}, {}

        def add(d, k):
            d[k] = d.get(k, 0) + 1
        for name, labels, gpus in table:
            if any(labels.get(k) != v for k, v in selector.items()):
                add(reasons, "node(s) didn't match Pod's node affinity/selector")
                add(verdicts, "Preemption is not helpful for scheduling")
                continue
            if gpus is None:
                return name, None
            u = used.get(name, {})
            short = [r for r, n in sorted(want.items()) if gpus.get(r, 0) - u.get(r, 0) < n]
            if not short:
                return name, None
            for r in short:
                add(reasons, "Insufficient " + r)
            if any(n > gpus.get(r, 0) for r, n in want.items()):
                add(verdicts, "Preemption is not helpful for scheduling")
            else:
                add(verdicts, "No preemption victims found for incoming pod")
        return None, fit_error(len(table), reasons, verdicts)

    def patch_pending_status(self, rt, message):
        """PodScheduled=False, Unschedulable, as the scheduler writes it (the transition time
        kept while the message changes)."""
        rt.unsched_ts = rt.unsched_ts or now_rfc3339()
        rt.unsched_msg = message
        st = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": message, "lastProbeTime": None, "lastTransitionTime": rt.unsched_ts}]}
        try:
            self.client.patch("pods", rt.name, {"status": st}, self.namespace,
                              subresource="status")
        except ApiError as e:
            if e.code != 404:
                raise

    def schedule_pending(self):
        """Bind the pending pods that fit now (oldest first) and start them.  True if any."""
        with self.lock:
            pending = sorted((rt for rt in self.runtimes.values()
                              if rt.pending and not rt.terminating), key=lambda r: r.seq)
        changed = False
        for rt in pending:
            node, why = self.place(rt.gpus_req, rt.selector)
            if node is None:
                if why != rt.unsched_msg:
                    self.patch_pending_status(rt, why)
                continue
            # as the scheduler binds: the pod's name and UID (a precondition)
            meta = {"name": rt.name, "uid": rt.uid} if rt.uid else {"name": rt.name}
            body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            try:
                self.client.request("POST", self.client.path("pods", self.namespace, rt.name,
                                                              "binding"), body=body)
                bound = self.client.get("pods", rt.name, self.namespace)
            except ApiError as e:
                if e.code in (404, 409):
                    continue        # deleted meanwhile: the reconcile loop terminates it
                raise
            # the API server set PodScheduled=True with the binding; a kubelet keeps that
            # condition's transition time in the statuses it writes
            rt.sched_ts = next((c.get("lastTransitionTime") for c in
                                (bound.get("status") or {}).get("conditions") or []
                                if c.get("type") == "PodScheduled" and
                                c.get("status") == "True"), None)
            rt.node = node
            rt.ip = self.alloc_ip(rt.port)
            self.start_process(rt)
            self.event("pod-scheduled", rt, node=node,
                       waited_s=round(time.time() - rt.created_wall, 3))
            self.patch_pod_status(rt, started=True)
            changed = True
        return changed

    def probe(self, rt):
        c = http.client.HTTPConnection(rt.ip, rt.port, timeout=0.3)
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            return r.status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            c.close()

    def supervise(self, rt):
        """Drive one pod's process: readiness, crashes, termination.  True if PIDs changed."""
        now = time.monotonic()
        exited = rt.proc is not None and rt.proc.poll() is not None
        if rt.terminating and rt.proc is None:
            exited = True        # never ran (it was Pending): nothing to drain
        if rt.terminating:
            if not rt.signalled:
                if exited or now - rt.term_started >= rt.settings["pre_stop"]:
                    self._sigterm(rt)
                return False
            if not exited and not rt.killed and now - rt.term_started > rt.settings["grace"]:
                rt.proc.kill()
                rt.killed = True
                self.event("pod-killed", rt, reason="grace period over")
            if exited:
                if rt.proc is not None:
                    self.event("process-exit", rt, code=rt.proc.returncode,
                               drain_s=round(now - rt.term_started, 3))
                if rt.api_delete:
                    self._release(rt.name, rt.uid)
                with self.lock:
                    self.runtimes.pop(rt.name, None)
                self.released[rt.name] = now
                self.event("pod-deleted", rt)
                return True
            return False
        if rt.pending:
            return False
        if exited:
            if rt.next_restart == 0.0:
                code = rt.proc.returncode
                self.event("process-exit", rt, code=code, unexpected=True)
                was_ready = rt.ready
                rt.ready = False
                if was_ready:
                    self.patch_pod_status(rt)
                backoff = min(10.0, 0.5 * (2 ** min(rt.restarts, 5)))
                rt.next_restart = now + backoff
                return True
            if now >= rt.next_restart:
                rt.restarts += 1
                rt.next_restart = 0.0
                self.start_process(rt)
                self.event("process-restart", rt, restarts=rt.restarts)
                self.patch_pod_status(rt, started=True)
                return True
            return False
        if not rt.ready and now >= rt.next_probe:
            rt.next_probe = now + self.probe_period
            if self.probe(rt):
                rt.ready = True
                rt.ready_wall = time.time()
                self.patch_pod_status(rt)
                self.event("pod-ready", rt, cold_start_measured=round(now - rt.started, 3))
        return False

    def begin_terminate(self, rt, why, api=True):
        """Graceful delete: deletionTimestamp (through the finalizer), Ready=False, SIGTERM."""
        rt.terminating = True
        rt.api_delete = api
        rt.term_started = time.monotonic()
        was_ready, rt.ready = rt.ready, False
        if api:
            try:
                self.client.delete("pods", rt.name, self.namespace)
            except ApiError as e:
                if e.code != 404:
                    raise
            if not rt.pending:
                self.patch_pod_status(rt)
        rt.signalled = False
        if rt.settings["pre_stop"] <= 0 or not api:
            self._sigterm(rt)
        self.event("pod-terminating", rt, reason=why, was_ready=was_ready)

    def _sigterm(self, rt):
        rt.signalled = True
        rt.term_started = time.monotonic()
        if rt.proc is not None and rt.proc.poll() is None:
            try:
                rt.proc.terminate()
            except ProcessLookupError:
                pass

    def _release(self, name, uid):
        """Remove our finalizer, then end the pod's graceful deletion as a kubelet's status
        manager does once its containers are gone: a DELETE with period 0 and the UID of the
        pod it ran as precondition, so that a new pod of that name is left alone (a bound pod
        stays, marked, until then; the finalizer's removal alone does not delete it)."""
        try:
            self.client.patch("pods", name, {"metadata": {"finalizers": None}}, self.namespace)
        except ApiError as e:
            if e.code != 404:
                raise
            return
        try:
            self.client.delete("pods", name, self.namespace, grace_period_seconds=0,
                               preconditions={"uid": uid} if uid else None)
        except ApiError as e:
            if e.code not in (404, 409):  # gone, or another pod of that name by now
                raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--state-dir", required=True, help="pod logs, PID file, events")
    ap.add_argument("--ip-prefix", default="127.77", help="pods get 127.N.x.y addresses")
    ap.add_argument("--all", action="store_true",
                    help="manage every Deployment of the namespace, not only labelled ones")
    ap.add_argument("--control-token", default=os.environ.get("FAKESERVE_CONTROL_TOKEN", ""))
    ap.add_argument("--events", help="JSON-lines event log (default STATE/kubelet-events.jsonl)")
    ap.add_argument("--node-name", default="fake-node-1", help="the kubelet's own node")
    ap.add_argument("--gpu-budget", type=int, default=None,
                    help="give the own node N nvidia.com/gpu (a labelled Node object); "
                         "default: no limit")
    a = ap.parse_args(argv)
    k = Kubelet(a.kubeconfig, a.namespace, a.state_dir, a.ip_prefix, a.all, a.control_token,
                node_name=a.node_name, events_path=a.events, gpu_budget=a.gpu_budget)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    k.start()
    sys.stderr.write("kubelet: managing %s deployments in namespace %s, pods on %s.x.y\n"
                     % ("all" if a.all else "labelled", a.namespace, a.ip_prefix))
    sys.stderr.flush()
    while not done.wait(1.0):
        if not k.thread.is_alive():
            sys.stderr.write("kubelet: loop died\n")
            break
    k.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
