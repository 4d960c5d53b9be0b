# SPDX-License-Identifier: Apache-2.0
"""Start and stop fakekube for e2e tests: a subprocess on 127.0.0.1 with a free port, TLS from
a throwaway CA made with the openssl CLI, bearer-token and client-certificate kubeconfigs, and a
plain-HTTP admin port (harness only) for fault injection that survives listener restarts.

    fk = harness.start()                 # HTTPS, token kubeconfig
    try:
        c = fk.client()                  # kubeclient.Client on fk.kubeconfig
        fk.fault({"action": "error", "verb": "patch", "status": 429, "retryAfter": 1})
    finally:
        fk.stop()                        # kills by PID, removes the temp dir

Only the harness uses the admin port; code under test talks to fk.kubeconfig alone.
"""

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from fakekube import kubeclient  # noqa: E402

SERVER = os.path.join(HERE, "server.py")
_live = {}


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.decode()))


def _ec_key(path, cwd):
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", path, cwd=cwd)


def make_pki(directory, users=(("e2e-admin", ("system:masters",)),), server_names=(
        "localhost",), server_ips=("127.0.0.1", "::1"), days=2):
    """Create ca.crt/ca.key, server.crt/server.key (SANs for localhost and 127.0.0.1) and one
    client cert per (user, groups) as <user>.crt/<user>.key (CN = user, O = each group), all
    signed by the CA.  Returns {"ca": path, "ca_key", "server_cert", "server_key",
    "clients": {user: (cert, key)}}."""
    d = directory
    os.makedirs(d, exist_ok=True)
    _ec_key("ca.key", d)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-out", "ca.crt", "-days", str(days),
             "-subj", "/CN=fakekube-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash", cwd=d)
    serial = [1000]

    def sign(name, subj, ext):
        _ec_key(name + ".key", d)
        _openssl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", subj,
                 cwd=d)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        serial[0] += 1
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-set_serial", str(serial[0]), "-out", name + ".crt", "-days", str(days),
                 "-extfile", name + ".ext", cwd=d)
        return os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")

    sans = ",".join(["DNS:" + n for n in server_names] + ["IP:" + i for i in server_ips])
    common = ("authorityKeyIdentifier=keyid,issuer\nsubjectKeyIdentifier=hash\n"
              "basicConstraints=critical,CA:FALSE\n"
              "keyUsage=critical,digitalSignature,keyEncipherment\n")
    scert, skey = sign("server", "/CN=fakekube", common + "extendedKeyUsage=serverAuth\n"
                       "subjectAltName=" + sans + "\n")
    clients = {}
    for user, groups in users:
        subj = "".join("/O=" + g for g in groups) + "/CN=" + user
        safe = "client-" + "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in user)
        clients[user] = sign(safe, subj, common + "extendedKeyUsage=clientAuth\n")
    return {"ca": os.path.join(d, "ca.crt"), "ca_key": os.path.join(d, "ca.key"),
            "server_cert": scert, "server_key": skey, "clients": clients}


_CA_CNF = """[ca]
default_ca = ca_default
[ca_default]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = policy_any
unique_subject = no
[policy_any]
commonName = supplied
organizationName = optional
"""


def make_ca(directory, name, cn, days=2):
    """A self-signed CA <name>.crt/<name>.key in directory; returns (cert, key)."""
    os.makedirs(directory, exist_ok=True)
    _ec_key(name + ".key", directory)
    _openssl("req", "-x509", "-new", "-key", name + ".key", "-out", name + ".crt", "-days",
             str(days), "-subj", "/CN=" + cn, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash", cwd=directory)
    return os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")


def make_cert(directory, ca, name, cn, orgs=(), usage="clientAuth", dns=(), ips=(), days=2,
              expired=False):
    """A certificate <name>.crt/<name>.key signed by ca = (cert, key): CN cn, O each of orgs,
    extendedKeyUsage usage, SANs dns/ips.  expired=True makes one valid only during
    2020-01-01 (signed with `openssl ca`, which can set past dates).  Returns (cert, key)."""
    os.makedirs(directory, exist_ok=True)
    d = directory
    _ec_key(name + ".key", d)
    subj = "".join("/O=" + o for o in orgs) + "/CN=" + cn
    _openssl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", subj, cwd=d)
    ext = ("basicConstraints=critical,CA:FALSE\n"
           "keyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=%s\n" % usage)
    sans = ",".join(["DNS:" + n for n in dns] + ["IP:" + i for i in ips])
    if sans:
        ext += "subjectAltName=" + sans + "\n"
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write(ext)
    ca_cert, ca_key = (os.path.abspath(p) for p in ca)
    if expired:
        cadir = os.path.join(d, name + ".ca")
        os.makedirs(cadir, exist_ok=True)
        with open(os.path.join(cadir, "ca.cnf"), "w") as f:
            f.write(_CA_CNF)
        open(os.path.join(cadir, "index.txt"), "w").close()
        with open(os.path.join(cadir, "serial"), "w") as f:
            f.write("%X\n" % (0x1000 + len(os.listdir(d))))
        _openssl("ca", "-batch", "-config", "ca.cnf", "-cert", ca_cert, "-keyfile", ca_key,
                 "-in", os.path.join(d, name + ".csr"), "-out", os.path.join(d, name + ".crt"),
                 "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
                 "-extfile", os.path.join(d, name + ".ext"), "-notext", cwd=cadir)
    else:
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca_cert, "-CAkey", ca_key,
                 "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-out", name + ".crt",
                 "-days", str(days), "-extfile", name + ".ext", cwd=d)
    return os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")


def make_front_proxy_pki(directory, days=2):
    """The kube-apiserver front-proxy PKI, separate from the cluster CA: front-proxy-ca and the
    client certificate the aggregator presents (CN front-proxy-client, as kubeadm makes it).
    Returns {"ca", "ca_key", "client_cert", "client_key"}."""
    ca = make_ca(directory, "front-proxy-ca", "front-proxy-ca", days)
    cert, key = make_cert(directory, ca, "front-proxy-client", "front-proxy-client", days=days)
    return {"ca": ca[0], "ca_key": ca[1], "client_cert": cert, "client_key": key}


def requestheader_configmap(requestheader_ca, client_ca=None,
                            allowed_names=("front-proxy-client",)):
    """ConfigMap kube-system/extension-apiserver-authentication as kube-apiserver publishes it
    (values are JSON-array strings; the CA files are PEM text)."""
    def pem(p):
        with open(p) as f:
            return f.read()
    data = {
        "requestheader-client-ca-file": pem(requestheader_ca),
        "requestheader-allowed-names": json.dumps(list(allowed_names)),
        "requestheader-username-headers": json.dumps(["X-Remote-User"]),
        "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
        "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
    }
    if client_ca:
        data["client-ca-file"] = pem(client_ca)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication",
                         "namespace": "kube-system"}, "data": data}


def write_kubeconfig(path, server, ca_file=None, token=None, cert_file=None, key_file=None,
                     namespace="default", insecure=False, cluster_extra=None, user_extra=None):
    """Write a kubeconfig (client cert and CA embedded as *-data). cluster_extra and
    user_extra add fields to the cluster and the user (e.g. proxy-url, exec)."""
    import base64

    def b64(p):
        with open(p, "rb") as f:
            return base64.b64encode(f.read()).decode()

    cluster = {"server": server}
    if ca_file:
        cluster["certificate-authority-data"] = b64(ca_file)
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    cluster.update(cluster_extra or {})
    user = dict(user_extra or {})
    if token:
        user["token"] = token
    if cert_file:
        user["client-certificate-data"] = b64(cert_file)
        user["client-key-data"] = b64(key_file)
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- name: fakekube", "  cluster:"]
    lines += ["    %s: %s" % (k, json.dumps(v)) for k, v in cluster.items()]
    lines += ["contexts:", "- name: fakekube", "  context:", "    cluster: fakekube",
              "    user: e2e", "    namespace: %s" % json.dumps(namespace),
              "current-context: fakekube", "users:", "- name: e2e", "  user:"]
    lines += ["    %s: %s" % (k, json.dumps(v)) for k, v in user.items()] or ["    {}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


class FakeKubeProcess:
    """A running fakekube.  Attributes: pid, port, url, kubeconfig (the one chosen by `auth`),
    token_kubeconfig, cert_kubeconfig, token, admin_url, admin_token, pki, tmpdir, log_path."""

    def __init__(self):
        self.proc = None
        self.pid = None

    # ------------------------------------------------------------ clients

    def client(self, kubeconfig=None, **kw):
        return kubeclient.Client.from_kubeconfig(kubeconfig or self.kubeconfig, **kw)

    def admin(self, method, path, body=None, timeout=10.0):
        """Call the harness-only control API; returns the decoded JSON answer."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.admin_url + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + self.admin_token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                payload = r.read()
        except urllib.error.HTTPError as e:
            raise RuntimeError("fakekube admin %s %s: %d %s" % (method, path, e.code,
                                                                e.read().decode()))
        ctype = r.headers.get("Content-Type", "")
        return json.loads(payload) if "json" in ctype else payload.decode()

    def fault(self, *specs):
        """Add fault rules or run immediate actions; returns the list of results."""
        return self.admin("POST", "/fake/faults", list(specs))["results"]

    def faults(self):
        return self.admin("GET", "/fake/faults")["faults"]

    def clear_faults(self):
        return self.admin("DELETE", "/fake/faults")

    def drop_watches(self, clean=False, resource=None):
        spec = {"action": "drop-watches", "clean": clean}
        if resource:
            spec["resource"] = resource
        return self.fault(spec)[0]

    def compact(self):
        return self.fault({"action": "compact"})[0]

    def etcd_compaction_tick(self):
        """One tick of kube-apiserver's etcd compactor now (for a server started with
        --etcd-compaction-interval 0, or besides its timer's): -> {resourceVersion,
        etcdCompactedTo}."""
        return self.fault({"action": "etcd-compaction-tick"})[0]

    def restart(self, delay=0.5, wait=True, timeout=15.0):
        """Close the API listener and connections; listen again after delay seconds."""
        before = self.state()["restarts"]
        self.fault({"action": "restart", "delay": delay})
        if wait:
            kubeclient.wait_for(lambda: self.state()["restarts"] > before, timeout,
                                message="fakekube restart")

    def requests(self, since=0):
        """Requests seen on the API port: (list of dicts, next since value)."""
        r = self.admin("GET", "/fake/requests?since=%d" % since)
        return r["requests"], r["next"]

    def state(self):
        return self.admin("GET", "/fake/state")

    def set_sar(self, default=None, rules=None):
        body = {}
        if default is not None:
            body["default"] = default
        if rules is not None:
            body["rules"] = rules
        return self.admin("PUT", "/fake/sar", body)

    def writes(self, since=0, **match):
        """Successful writes after seq `since` (GET /fake/writes), optionally only those whose
        resource, namespace, name or user equal the given values."""
        q = "&".join(["since=%d" % since] + ["%s=%s" % kv for kv in sorted(match.items())])
        return self.admin("GET", "/fake/writes?" + q)

    def add_token(self, token, user, groups=()):
        return self.admin("POST", "/fake/tokens", {"token": token, "user": user,
                                                   "groups": list(groups)})

    def set_service_endpoint(self, namespace, name, address):
        """Tell the aggregator where Service namespace/name lives ('HOST:PORT'; None forgets)."""
        return self.admin("PUT", "/fake/service-endpoints",
                          {"namespace": namespace, "name": name, "address": address})

    def service_endpoints(self):
        return self.admin("GET", "/fake/service-endpoints")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # ------------------------------------------------------------ lifecycle

    def stop(self, keep_dir=False):
        """Kill the server by PID (SIGTERM, then SIGKILL) and remove the temp dir."""
        _live.pop(self.pid, None)
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(5)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            for f in (self.proc.stdout, self.proc.stderr):
                if f:
                    f.close()
        if self._own_dir and not keep_dir and self.tmpdir and os.path.isdir(self.tmpdir):
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start(tls=True, auth="token", history=1000, bookmark_interval="10s", extra_args=(),
          verbose=False, ready_timeout=20.0, tmpdir=None, token=None, faults=None,
          users=(("e2e-admin", ("system:masters",)),), front_proxy=False,
          service_endpoints=(), aggregator_resync=None):
    """Start fakekube and wait until /readyz answers.  auth: "token" or "cert" selects which
    kubeconfig .kubeconfig is (both are written when tls).  front_proxy=True makes a separate
    front-proxy PKI (fk.front_proxy, see make_front_proxy_pki) whose client certificate the
    aggregator presents to APIService backends; service_endpoints: "NS/NAME=HOST:PORT" strings;
    aggregator_resync: period of the APIService availability checks ("30s" by default).
    Returns a FakeKubeProcess."""
    fk = FakeKubeProcess()
    fk._own_dir = tmpdir is None
    fk.tmpdir = tmpdir or tempfile.mkdtemp(prefix="fakekube-")
    d = fk.tmpdir
    fk.token = token or "e2e-token-" + os.urandom(8).hex()
    fk.admin_token = "admin-" + os.urandom(12).hex()
    fk.pki = make_pki(os.path.join(d, "pki"), users=users) if tls else None
    fk.front_proxy = make_front_proxy_pki(os.path.join(d, "pki", "front-proxy")) \
        if front_proxy else None
    fk.log_path = os.path.join(d, "fakekube.log")
    port_file = os.path.join(d, "port")
    admin_port_file = os.path.join(d, "admin-port")
    fk.token_kubeconfig = os.path.join(d, "kubeconfig-token.yaml")
    fk.cert_kubeconfig = os.path.join(d, "kubeconfig-cert.yaml") if tls else None
    cmd = [sys.executable, SERVER, "--listen", "127.0.0.1:0", "--port-file", port_file,
           "--token", fk.token + ":e2e-admin:system:masters", "--admin-token", fk.admin_token,
           "--admin-listen", "127.0.0.1:0", "--admin-port-file", admin_port_file,
           "--history", str(history), "--bookmark-interval", str(bookmark_interval),
           "--write-kubeconfig", fk.token_kubeconfig, "--parent-pid", str(os.getpid())]
    if tls:
        cmd += ["--tls-cert", fk.pki["server_cert"], "--tls-key", fk.pki["server_key"],
                "--client-ca", fk.pki["ca"], "--kubeconfig-ca", fk.pki["ca"]]
    if faults:
        cmd += ["--faults", json.dumps(faults)]
    if fk.front_proxy:
        cmd += ["--proxy-client-cert", fk.front_proxy["client_cert"],
                "--proxy-client-key", fk.front_proxy["client_key"]]
    for ep in service_endpoints:
        cmd += ["--service-endpoint", ep]
    if aggregator_resync is not None:
        cmd += ["--aggregator-resync", str(aggregator_resync)]
    if verbose:
        cmd.append("--verbose")
    cmd += list(extra_args)
    logf = open(fk.log_path, "wb")
    fk.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    logf.close()
    fk.pid = fk.proc.pid
    _live[fk.pid] = fk
    try:
        deadline = time.monotonic() + ready_timeout
        while not (os.path.exists(port_file) and os.path.exists(admin_port_file)):
            if fk.proc.poll() is not None:
                raise RuntimeError("fakekube exited with %s:\n%s" % (fk.proc.returncode,
                                                                     fk.log()))
            if time.monotonic() > deadline:
                raise RuntimeError("fakekube did not start in %.0fs:\n%s" % (ready_timeout,
                                                                           fk.log()))
            time.sleep(0.02)
        with open(port_file) as f:
            fk.port = int(f.read())
        with open(admin_port_file) as f:
            fk.admin_port = int(f.read())
        fk.url = "%s://127.0.0.1:%d" % ("https" if tls else "http", fk.port)
        fk.admin_url = "http://127.0.0.1:%d" % fk.admin_port
        if tls:
            user, _ = users[0]
            cert, key = fk.pki["clients"][user]
            write_kubeconfig(fk.cert_kubeconfig, fk.url, ca_file=fk.pki["ca"], cert_file=cert,
                             key_file=key)
        fk.kubeconfig = fk.cert_kubeconfig if (auth == "cert" and tls) else fk.token_kubeconfig
        c = fk.client(timeout=5)
        kubeclient.wait_for(lambda: c.request("GET", "/readyz") == "ok",
                            max(1.0, deadline - time.monotonic()), message="fakekube /readyz")
        c.close()
    except BaseException:
        fk.stop()
        raise
    return fk


def stop(fk):
    fk.stop()


@atexit.register
def _stop_all():
    for fk in list(_live.values()):
        try:
            fk.stop()
        except Exception:  # best effort at interpreter exit
            pass


if __name__ == "__main__":
    # Manual use: start a server, print its kubeconfig path, run until Ctrl-C.
    fk = start(verbose=True)
    print("kubeconfig:", fk.kubeconfig, "pid:", fk.pid, "admin:", fk.admin_url, flush=True)
    try:
        fk.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        fk.stop()
