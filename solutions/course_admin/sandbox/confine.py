"""What every process of a learner's run is denied, set in the grading child before any learner code runs,
the warm and the cold way alike, under every isolation.

* A **seccomp filter** (``DENIED``): nothing that reaches into another process (ptrace, process_vm_*,
  pidfd_*, kcmp, perf_event_open, bpf, userfaultfd), nothing that makes state a later run could find
  (keyrings, POSIX message queues), no new namespaces (unshare, setns, clone with a CLONE_NEW* flag;
  clone3, whose flags a filter cannot read, answers ENOSYS so that the C library falls back to clone) and
  no mounts, no io_uring (whose operations bypass the filter), no fallocate (whose FALLOC_FL_KEEP_SIZE
  reserves disk that RLIMIT_FSIZE does not bound); and **no network** (``UNIX_ONLY``): socket and
  socketpair of any address family but AF_UNIX (AF_INET, AF_INET6, AF_NETLINK, AF_PACKET ...), so that no
  learner process can send anything out (the hidden cases' inputs, what it could read), even where the
  network is open (Gradescope's container, whose setup needs it; under bubblewrap there is no network
  anyway, so the rule costs nothing there). AF_UNIX stays: the sandbox's own pipes and sockets (the warm
  sandbox's fork server, multiprocessing and torch's DataLoader workers) use it. socketcall, which
  multiplexes the socket calls behind a pointer a filter cannot read, is denied whole on the architectures
  that have it (not x86_64 or aarch64; and a call of another architecture, i386's int 0x80 included, kills
  the process). A denied call fails with EPERM, so learner code that tries one gets an ordinary OSError.
  The filter is inherited by every thread and process the run makes, and cannot be removed
  (``PR_SET_NO_NEW_PRIVS`` is set with it).
* Under the warm sandbox, a **run of its own** (``own_namespaces``): new user, network and IPC namespaces,
  so an abstract unix socket or an IPC object of one run is not there for the next.
* **Undumpable** (``PR_SET_DUMPABLE`` 0): other processes of the same uid cannot open its /proc/<pid>/mem,
  fd or environ.

Two halves. The grader (trusted, outside any sandbox) compiles the filter with libseccomp, the library
behind the filters of Docker, systemd and nsjail, through ``pyseccomp`` (a ctypes binding with the API of
libseccomp's own Python bindings): ``compile_filter()`` returns the BPF program, and ``available()`` says
whether one can be compiled *and* loaded here. The sandbox side needs only the standard library, since
libseccomp cannot even be found from inside bubblewrap (no /etc there): ``load_filter(program)`` hands the
compiled program to the kernel, as bubblewrap's own ``--seccomp FD`` does. This file is copied beside the
grading child (``_grader_confine.py``) and beside the warm sandbox's fork server.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterable

DENIED: dict[str, str] = {
    **dict.fromkeys(["ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
                     "pidfd_open", "pidfd_getfd", "pidfd_send_signal"], "reaches into another process"),
    **dict.fromkeys(["perf_event_open", "bpf", "userfaultfd"], "observes or rewrites other code"),
    **dict.fromkeys(["add_key", "request_key", "keyctl"], "keyrings outlive a run"),
    **dict.fromkeys(["mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"],
                    "POSIX message queues outlive a run"),
    **dict.fromkeys(["unshare", "setns"], "a namespace of its own escapes the sweep"),
    **dict.fromkeys(["mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
                     "move_mount", "open_tree", "mount_setattr"], "mounts"),
    **dict.fromkeys(["io_uring_setup", "io_uring_enter", "io_uring_register"], "io_uring bypasses the filter"),
    # FALLOC_FL_KEEP_SIZE reserves blocks that RLIMIT_FSIZE does not count (ext4): a run's log could take
    # the grader's disk. Nothing the course runs needs it; a plain write is bounded by the file-size limit.
    "fallocate": "reserves disk space that no file-size limit bounds",
    # i386's, s390's ...: the socket calls multiplexed, their arguments behind a pointer (none on x86_64, aarch64)
    "socketcall": "a socket of any family: the filter cannot read which",
}
# The network: these fail with EPERM for any address family (their first argument) but AF_UNIX, so that no
# learner process can send anything out; AF_UNIX stays for the sandbox's own pipes (zygote, DataLoader).
UNIX_ONLY: dict[str, str] = dict.fromkeys(["socket", "socketpair"], "the network: nothing may be sent out")
# clone(2)'s flags that make a namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 4, 22, 38
SECCOMP_MODE_FILTER = 2
SANDBOX_ID = 65534  # the uid and gid inside bubblewrap (procs.bwrap_root)

_LIBC = ctypes.CDLL(None, use_errno=True)


class ConfineError(OSError):
    """The run could not be confined: the child stops before any learner code runs."""


# ------------------------------------------------------------------ grader side: compile, and check here
@functools.lru_cache(maxsize=None)
def compile_filter() -> bytes:
    """The BPF program of ``DENIED`` and ``UNIX_ONLY`` for this machine's architecture, compiled by libseccomp.

    Raises ImportError or RuntimeError (pyseccomp or libseccomp missing) or OSError."""
    return build_filter(DENIED, unix_only=True)


def build_filter(denied: Iterable[str], unix_only: bool = False) -> bytes:
    """A BPF program that fails the calls ``denied`` and clone with a CLONE_NEW* flag with EPERM, and
    clone3 with ENOSYS (so that the C library falls back to clone); with ``unix_only``, also the calls of
    ``UNIX_ONLY`` for any address family but AF_UNIX. Any other call is allowed."""
    import pyseccomp as seccomp

    def exists(name: str) -> bool:  # a call this architecture does not have cannot be made either
        try:
            return seccomp.resolve_syscall(seccomp.system_arch(), name) >= 0  # < 0: libseccomp's pseudo number
        except Exception:  # noqa: BLE001
            return False

    program = seccomp.SyscallFilter(seccomp.ALLOW)  # any other architecture's calls: killed (libseccomp)
    for name in filter(exists, denied):
        program.add_rule(seccomp.ERRNO(errno.EPERM), name)
    for name in filter(exists, UNIX_ONLY if unix_only else ()):  # all 64 bits compared: a family over 32 bits fails
        program.add_rule(seccomp.ERRNO(errno.EPERM), name, seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
    for flag in CLONE_NEW:
        program.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    program.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as fh:
        program.export_bpf(fh)
        fh.seek(0)
        return fh.read()


_TRIAL = """
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
import confine
confine.load_filter(open(sys.argv[2], "rb").read())
libc = ctypes.CDLL(None, use_errno=True)
denied = libc.syscall(int(sys.argv[3]), os.getpid(), os.getpid(), 0, 0, 0) == -1 and ctypes.get_errno() == 1
print("denied" if denied else "allowed")
"""
KCMP = {"x86_64": 312, "aarch64": 272}  # a harmless call of the list, to see that the filter holds


@functools.lru_cache(maxsize=None)
def available() -> tuple[bool, str]:
    """Whether a learner's run can be confined here: the filter compiles, and a fresh process that loads
    it is refused a denied call (checked once per process). (ok, why not)."""
    try:
        program = compile_filter()
    except Exception as exc:  # noqa: BLE001 - pyseccomp or libseccomp missing, or this kernel's arch unknown
        return False, f"no seccomp filter can be compiled here ({type(exc).__name__}: {exc}); install libseccomp2"
    nr = KCMP.get(os.uname().machine)
    if nr is None:
        return False, f"no seccomp filter is checked on {os.uname().machine}"
    with tempfile.NamedTemporaryFile(suffix=".bpf") as fh:
        fh.write(program)
        fh.flush()
        try:
            proc = subprocess.run([sys.executable, "-I", "-S", "-c", _TRIAL, os.path.dirname(__file__), fh.name,
                                   str(nr)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"the seccomp filter could not be tried ({exc})"
    if proc.stdout.strip() != "denied":
        return False, f"the seccomp filter does not load here: {(proc.stderr.strip() or proc.stdout.strip())[-200:]}"
    return True, "a seccomp filter confines every learner process"


# ------------------------------------------------------------------ sandbox side: standard library only
class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise ConfineError(code, f"{what} failed: {os.strerror(code)}")


def load_filter(program: bytes) -> None:
    """Give the kernel the compiled filter for this thread and all it starts; no new privileges from now on.
    Call it while the process has one thread (a thread started earlier would not be filtered)."""
    if not program or len(program) % 8:
        raise ConfineError(errno.EINVAL, "the seccomp program is empty or not whole BPF instructions")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(_LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "loading the seccomp filter")


def dumpable(flag: bool) -> None:
    _check(_LIBC.prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0), f"prctl(PR_SET_DUMPABLE, {int(flag)})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def own_namespaces() -> None:
    """New user, network and IPC namespaces for this process and what it starts, as uid and gid 65534, with
    no capabilities. Called after fork, before any learner code (the warm sandbox's child)."""
    uid, gid = os.getuid(), os.getgid()  # as the sandbox sees them: what the new namespace maps to
    _check(_LIBC.unshare(0x10000000 | 0x40000000 | 0x08000000), "unshare(CLONE_NEWUSER|NEWNET|NEWIPC)")
    dumpable(True)  # an undumpable process may not write its own maps; nothing but this code runs here
    try:
        for name, text in (("uid_map", f"{SANDBOX_ID} {uid} 1\n"), ("setgroups", "deny"),
                           ("gid_map", f"{SANDBOX_ID} {gid} 1\n")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as fh:
                fh.write(text)
    finally:
        dumpable(False)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice (64 capability bits)
    _check(_LIBC.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data), "capset (dropping capabilities)")
