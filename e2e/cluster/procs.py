# SPDX-License-Identifier: Apache-2.0
"""Child processes of the local cluster: started with a parent-death signal so nothing outlives
the process that started it, stopped by PID only (SIGTERM, then SIGKILL after a grace period),
and listed in a JSON PID file so `up.py down` can kill them even if their parent died.
"""

import ctypes
import json
import os
import signal
import subprocess
import time

PR_SET_PDEATHSIG = 1

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # not Linux: no parent-death signal
    _libc = None


def _pdeathsig():
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(cmd, log_path=None, env=None, cwd=None, die_with_parent=True):
    """Start cmd (a list) with stdout+stderr appended to log_path (or discarded); returns the
    Popen.  With die_with_parent the child gets SIGKILL when the starting thread's process
    exits (Linux PR_SET_PDEATHSIG)."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=cwd, close_fds=True,
                                preexec_fn=_pdeathsig if die_with_parent else None)
    finally:
        if log_path:
            out.close()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def stop(proc_or_pid, grace=5.0, sig=signal.SIGTERM):
    """Send sig, wait up to grace seconds, then SIGKILL.  Accepts a Popen or a PID (a PID that
    is not our child is polled through /proc).  Returns the exit code when known."""
    if isinstance(proc_or_pid, subprocess.Popen):
        p = proc_or_pid
        if p.poll() is not None:
            return p.returncode
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            return p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            try:
                return p.wait(5)
            except subprocess.TimeoutExpired:
                return None
    pid = int(proc_or_pid)
    if not alive(pid):
        return None
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return None
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid):
            return None
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return None


def write_pidfile(path, data):
    """Atomically write {"name": pid or [pids]} as JSON."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_pidfile(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def pids_in(data):
    """All PIDs in a PID-file document (values may be ints, lists or nested dicts)."""
    out = []
    if isinstance(data, bool):
        return out
    if isinstance(data, int):
        out.append(data)
    elif isinstance(data, list):
        for v in data:
            out.extend(pids_in(v))
    elif isinstance(data, dict):
        for v in data.values():
            out.extend(pids_in(v))
    return out
