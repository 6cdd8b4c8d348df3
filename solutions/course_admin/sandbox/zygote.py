"""The fork server of a warm sandbox: runs *inside* bubblewrap as the sandbox's pid 1 (``--as-pid-1``),
imports torch once, then forks one grading child per request, strictly one at a time, and sweeps what that
child left before it answers.

Started by warm.py as ``python -I -S /sandbox/_zygote/zygote.py SITE_PACKAGES`` with one end of a
SOCK_SEQPACKET socket at fd $COURSE_ZYGOTE_FD, and the compiled seccomp filter (confine.py) beside it in
``filter.bpf``. Messages are JSON, one a packet:

    zygote -> worker  {"ready": pid}                 torch and the child imported, nothing forked yet
    worker -> zygote  {"box": "/sandbox/run_...", "start": n, "limits": {...}}
                      with two fds: the result pipe's write end and the log file
    zygote -> worker  {"started": pid}
    zygote -> worker  {"status": wait status, "left": ""}    the child ended and the sandbox was swept;
                      "left" names what could not be swept (the worker then throws the sandbox away)

Nothing of a run can reach the zygote. It is pid 1 of the sandbox's PID namespace, so no signal from inside
that it does not handle (it handles none) reaches it, SIGKILL and SIGSTOP included; it is not dumpable
(PR_SET_DUMPABLE 0), so no process of the sandbox can open its /proc/<pid>/mem, fd or environ. Each child,
before it imports any of the learner's code (child.run):
- closes the control socket and every fd but stdin, the log (as 1 and 2) and the result pipe (as 3);
- takes a session, and user, network and IPC namespaces of its own (confine.own_namespaces): an abstract
  unix socket or an IPC object of one run is not there for the next;
- takes the run's rlimits, stays undumpable, and loads the seccomp filter (confine.py: no ptrace, no
  process_vm_*, no pidfd, no keyrings, no message queues, no new namespaces or mounts ...), which every
  process it starts inherits.

The sweep between children: SIGKILL to every process of the sandbox (kill(-1): all but the zygote) until
none is left, their zombies reaped (the zygote is their init); /tmp emptied (but for the folders bubblewrap
made there to reach a Python or venv that lives under /tmp); every System V IPC object removed; the
keyrings cleared (x86_64 and aarch64; the filter denies them, this is a second line). Nothing else is
writable. Last, what another process of the same uid can change in the zygote and every later child would
inherit (rlimits, nice, scheduling, affinity, I/O priority, OOM score) must be as it was at start; if not,
the worker throws the sandbox away.
"""
from __future__ import annotations

import ctypes
import importlib.util  # noqa: F401 - imported once here, not in every child
import json
import os
import re
import resource
import signal
import socket
import sys
import time
import traceback
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT_FD = 3
LIMITS = {"as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE, "nofile": resource.RLIMIT_NOFILE,
          "cpu": resource.RLIMIT_CPU, "core": resource.RLIMIT_CORE}
_LIBC = ctypes.CDLL(None, use_errno=True)
IPC_RMID = {"shm": lambda i: _LIBC.shmctl(i, 0, None), "sem": lambda i: _LIBC.semctl(i, 0, 0),
            "msg": lambda i: _LIBC.msgctl(i, 0, None)}  # 0 is IPC_RMID
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}  # syscall numbers; IOPRIO_WHO_PROCESS is 1
KEYCTL = {"x86_64": 250, "aarch64": 219}  # syscall numbers
KEYRINGS = (-4, -5, -3)  # the user, user-session and session keyrings (KEY_SPEC_*)


def _reap() -> None:
    """Collect every ended child: as the sandbox's init, the zygote inherits every orphan of a run."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _others() -> list[int]:
    """Live processes of the sandbox other than its init (pid 1, this zygote) and this zygote."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if stat[stat.rindex(b")") + 2:][:1] not in (b"Z", b"X"):  # zombies are init's to reap
                found.append(int(name))
    return found


def _remove(path: str) -> None:
    """Remove a file or a whole tree, making each folder writable first (a learner may chmod 000)."""
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
        for name in os.listdir(path):
            _remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def attributes() -> tuple:
    """What a process of the same uid can change in the zygote from outside, and its children inherit:
    every rlimit (prlimit(2)), nice, scheduling policy and priority, CPU affinity, I/O priority and
    oom_score_adj (/proc/<pid>/ is the sandbox user's: the uid it maps to outside owns it)."""
    with open("/proc/self/oom_score_adj", encoding="ascii") as fh:
        oom = fh.read().strip()
    ioprio = _LIBC.syscall(IOPRIO_GET[os.uname().machine], 1, 0) if os.uname().machine in IOPRIO_GET else None
    return (tuple(resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_")),
            os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), os.sched_getparam(0).sched_priority,
            tuple(sorted(os.sched_getaffinity(0))), ioprio, oom)


class Baseline(NamedTuple):
    """The sandbox as the zygote found it, before any child: what every sweep must give back."""
    attributes: tuple
    binds: frozenset[str]  # mount points under /tmp: bwrap's binds of a Python or venv that lives there
    leads: frozenset[str]  # the folders bwrap made in /tmp to reach them
    tmp: list             # every path in /tmp outside the binds, with its mode


def _binds_in_tmp() -> frozenset[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in fh]
    return frozenset(p for p in points if p.startswith("/tmp/"))


def _tmp_tree(binds: frozenset[str]) -> list:
    found = []
    for root, dirs, files in os.walk("/tmp"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in binds]
        found += [(os.path.join(root, n), os.lstat(os.path.join(root, n)).st_mode) for n in dirs + files]
    return sorted(found)


def baseline() -> Baseline:
    binds = _binds_in_tmp()
    leads = {os.path.dirname(b) for b in binds}
    for lead in list(leads):
        while lead not in ("/tmp", "/"):
            leads.add(lead)
            lead = os.path.dirname(lead)
    return Baseline(attributes(), binds, frozenset(leads - {"/tmp", "/"}), _tmp_tree(binds))


def _empty(folder: str, base: Baseline) -> None:
    """Remove everything in ``folder`` but the binds and the folders that lead to them (emptied in turn)."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if path in base.leads:
                _empty(path, base)
            elif path not in base.binds:
                _remove(path)
        except OSError:
            pass


def sweep(base: Baseline) -> str:
    """Kill every other process, empty /tmp, remove System V IPC objects, check that the zygote's
    ``attributes()`` are still the baseline's. '' when clean, else what is left."""
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap()
        if not _others():
            break
        time.sleep(0.005)
    else:
        return f"processes {_others()} survived SIGKILL"
    _empty("/tmp", base)
    if _tmp_tree(base.binds) != base.tmp:
        return "/tmp is not as the sandbox started (could not be emptied, or a folder changed)"
    for kind in IPC_RMID:
        for ipc_id in _ipc_ids(kind):
            IPC_RMID[kind](ipc_id)
        if _ipc_ids(kind):
            return f"System V IPC ({kind}) objects could not be removed"
    if _keys_left():
        return "keys left in a keyring"
    if attributes() != base.attributes:
        return "the zygote's limits, priority, affinity or OOM score were changed"
    return ""


def _keys_left() -> bool:
    """Empty the keyrings a later child would share (the sandbox's user namespace has its own): the user,
    user-session, session and persistent keyrings. True when one still holds a key."""
    nr = KEYCTL.get(os.uname().machine)
    if nr is None:
        return False  # an architecture whose numbers we do not know: keyrings are not swept (docstring)
    persistent = _LIBC.syscall(nr, 22, -1, -4)  # KEYCTL_GET_PERSISTENT, linked into the user keyring
    rings = ([persistent] if persistent > 0 else []) + list(KEYRINGS)
    for ring in rings:
        _LIBC.syscall(nr, 7, ring)  # KEYCTL_CLEAR
    return any(_LIBC.syscall(nr, 11, ring, None, 0) > 0 for ring in rings)  # KEYCTL_READ: bytes of key ids


def _ipc_ids(kind: str) -> list[int]:
    """The ids of the sandbox's System V IPC objects of one kind (its IPC namespace is its own)."""
    with open(f"/proc/sysvipc/{kind}", encoding="ascii") as fh:
        return [int(line.split()[1]) for line in fh.read().strip().splitlines()[1:]]


def _child(sock: socket.socket, fds: list[int], request: dict, run, program: bytes) -> None:
    """In the forked child: fds, session, namespaces, limits, the seccomp filter, then the grading child
    proper. Never returns."""
    import confine  # imported by main(), beside this file

    code = 70
    try:
        sock.detach()  # its fd is closed below; the object must not close a reused number later
        result_fd, log_fd = fds
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        if result_fd != RESULT_FD:
            os.dup2(result_fd, RESULT_FD)
        os.closerange(RESULT_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        os.setsid()
        confine.own_namespaces()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in any Python; the zygote ignores it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file over the limit fails to write, never kills
        for name, value in request["limits"].items():
            resource.setrlimit(LIMITS[name], (value, value))
        confine.load_filter(program)  # one thread here; undumpable, as the zygote that forked it
        os.environ["COURSE_RESULT_FD"] = str(RESULT_FD)
        os.chdir(request["box"])
        code = run(request["box"], int(request["start"]))
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 - whatever happens, the child never returns into the zygote's loop
        try:
            os.write(2, traceback.format_exc().encode(errors="replace")[-4000:])
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def main() -> int:
    sock = socket.socket(fileno=int(os.environ.pop("COURSE_ZYGOTE_FD")))
    sys.path[:0] = [HERE, sys.argv[1]]
    import confine  # copied beside this file by warm.py, as the grading child (child.py) is

    confine.dumpable(False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # pid 1 gets no other signal from inside the sandbox
    with open(os.path.join(HERE, "filter.bpf"), "rb") as fh:
        program = fh.read()
    import torch  # noqa: F401 - the point of the zygote: every child finds it imported
    import child  # the grading child (child.py), copied beside this file

    sys.path[:2] = []  # children put their own box first
    base = baseline()
    sock.send(json.dumps({"ready": os.getpid()}).encode())
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2)
        if not message:
            return 0  # the worker closed the socket
        request = json.loads(message)
        if len(fds) != 2:
            raise RuntimeError(f"a request came with {len(fds)} fds, not 2")
        pid = os.fork()
        if pid == 0:
            _child(sock, fds, request, child.run, program)
        for fd in fds:
            os.close(fd)
        sock.send(json.dumps({"started": pid}).encode())
        while True:
            _, status = os.waitpid(pid, 0)
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                break  # else stopped: a child that made the zygote its tracer (PTRACE_TRACEME) stays stopped
        sock.send(json.dumps({"status": status, "left": sweep(base)}).encode())


if __name__ == "__main__":
    sys.exit(main())
