"""The cold run: one command on learner code in a sandbox started for it, contained, nothing left behind.

Two isolation levels (``procs.py`` names and detects them), chosen once per grading run (``detect()``)
and recorded in every grade row:

``bwrap``    Debian's bubblewrap: new user, PID, network, IPC, UTS and cgroup namespaces
             (``--unshare-all``), an empty root with read-only binds of /usr, the Python installation
             and the virtual environment, the sandbox directory bound *read-only* at /sandbox, the root
             and /dev remounted read-only, and a tmpfs /tmp of ``Limits.tmp_bytes`` as the only writable
             place; ``--die-with-parent`` and ``--new-session``; uid 65534 inside. The grader's files,
             other submissions and the gradebook are simply not there.
``rlimits``  the fallback when bubblewrap cannot start (or was asked for): the same limits, a new
             session, but the learner code sees the file system (and the network, where no seccomp
             filter can be set: the filter refuses every socket but a unix one). As root, the command
             runs as an unprivileged uid of its own (``procs.sandbox_uid``) with RLIMIT_NPROC, and the
             sandbox directory is readable, not writable, by it; otherwise with the grader's own rights.
             The child's Python audit hook (sockets, subprocesses, files outside the sandbox) stops
             careless code, not a determined attacker: ``course grade`` asks for ``--trust-learners``.

In both, the grading child loads a seccomp filter before any learner code (confine.py: no ptrace, no
keyrings or message queues, no new namespaces or mounts, no socket but a unix one ...), left in the box by
``confine_box``.

Under bwrap, the grading child normally does not come from ``run`` but from a warm sandbox (warm.py):
one bwrap per grading process, with the same binds and limits, whose fork server forks a child per run
and sweeps what it leaves; ``run`` is the cold way (``COURSE_GRADE_WARM=0``, and the rlimits fallback).

Results never go through the file system: the command writes them to a pipe, whose fd it finds in
$COURSE_RESULT_FD, as frames (``RESULT_HEADER``: case index, length, then a ``torch.save`` payload),
and this process writes each complete frame to ``box/out/NNN.pt``, at most ``Limits.result_bytes`` a
frame and ``Limits.results_total`` in all. So a learner can fill neither the disk (nothing on disk is
writable) nor the results folder: what a run puts on the grader's disk is bounded by ``results_total``
and the log's kept head and tail (``output_keep`` twice), whatever calls its code makes.

Both levels apply, through ``prlimit``, RLIMIT_AS (memory), RLIMIT_FSIZE (size of any file written,
with SIGXFSZ ignored so that writes fail instead of killing), RLIMIT_NOFILE and RLIMIT_CPU; stdout and
stderr go to a pipe this process drains (output.py), and only its head and tail reach the log file. When the kernel lets us (cgroup v1 ``pids``,
``memory`` and ``cpu`` controllers writable, as root here), the command runs in its own cgroup with a cap
on processes, memory (tmpfs pages count as memory) and CPU (``Limits.cpus``: one CPU, however many
processes it starts). Afterwards the process tree, the cgroup and any
process carrying the run's token in its environment are killed (``reaper.kill_tree``, ``Cgroup.kill_all``,
``reaper.kill_token``), daemons that left the session included.
"""
from __future__ import annotations

import functools
import os
import select
import shlex
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import confine, procs, reaper
from .output import OutputPipe
from .procs import bwrap_works, detect, python_paths
from .reaper import sweep_stale

__all__ = ["OVER_TOTAL", "Limits", "RunResult", "Watchdog", "cpu_limit", "bwrap_works", "detect", "python_paths", "run", "sweep_stale"]

RESULT_FD_VAR = "COURSE_RESULT_FD"
RESULT_HEADER = struct.Struct("<IQ")  # case index, payload length
OVER_TOTAL = ".over"  # out/NNN.over: case NNN's frame came after the run's results reached results_total


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    cpu_s: float | None = None          # RLIMIT_CPU of the command (None: wall_s + 5)
    memory_bytes: int = 2 * 1024**3
    file_bytes: int = 16 * 1024**2      # any single file, the captured output included
    output_keep: int = 64 * 1024        # bytes of the log's head and of its tail kept on disk
    max_processes: int = 64             # needs the pids cgroup
    open_files: int = 256
    tmp_bytes: int = procs.BWRAP_TMP_BYTES  # bwrap's /tmp, the only writable place under bwrap
    cpus: float = 1.0                   # CPU seconds per wall second, all its processes together (cgroup cpu)
    # A case's outputs are at most 133 kB (chapter 04), a run's 1 MB (all eight chapters): 64 times that.
    result_bytes: int = 4 * 1024**2     # one result frame (one case's outputs): results.RESULT_MAX_BYTES
    results_total: int = 64 * 1024**2   # everything in box/out together: the most a run puts on the disk


def cpu_limit(limits: Limits) -> int:
    """RLIMIT_CPU of a run, whole seconds: ``cpu_s``, else the wall limit and 5 s."""
    return int(limits.cpu_s if limits.cpu_s is not None else limits.wall_s + 5)


Watchdog = Callable[[reaper.Meter], bool]  # given the run's meter (reaper.usage of its tree): stop it now?


@dataclass
class RunResult:
    returncode: int | None  # None when the command was stopped at the time limit
    timed_out: bool


HIDDEN = "_hidden"  # box/_hidden: an empty folder bound over each path a run must not see


def _bwrap_argv(box: Path, inner: list[str], limits: Limits, pid_1: bool = False,
                hide: Sequence[Path] = ()) -> list[str]:
    """The box read-only at /sandbox; then the root and /dev read-only, leaving the sized /tmp writable.
    ``pid_1``: the command is the sandbox's pid 1 (no bubblewrap init beside it). ``hide``: folders of the
    bound installation shown empty (verify.py hides the corpus package's test split this way)."""
    hidden = [a for path in hide for a in ("--ro-bind", str(box / HIDDEN), str(path))]
    return procs.bwrap_root(limits.tmp_bytes) + hidden + [
        "--ro-bind", str(box), "/sandbox", "--chdir", "/sandbox", "--setenv", "HOME", "/tmp",
        "--remount-ro", "/dev", "--remount-ro", "/", *(["--as-pid-1"] if pid_1 else []), "--", *inner]


def environment(isolation: str, box: Path, token_var: str, token: str) -> dict[str, str]:
    """The whole environment of the command: one thread, a fixed hash seed, no bytecode written, the
    run's token, HOME and TMPDIR where it may write (/tmp under bwrap, else the box), and the learners'
    language when the grader has one (``COURSE_LANG``: what the child says of an exception)."""
    scratch = "/tmp" if isolation == "bwrap" else str(box)
    language = {"COURSE_LANG": os.environ["COURSE_LANG"]} if os.environ.get("COURSE_LANG") else {}  # `--lang`
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": scratch, token_var: token,
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": scratch, **language}


def new_cgroup(limits: Limits) -> reaper.Cgroup:
    """The run's cgroup: its process cap, and its memory with room for tmpfs pages and the interpreter."""
    return reaper.Cgroup(limits.max_processes, limits.memory_bytes + 512 * 1024**2, limits.cpus)


def confine_box(box: Path) -> None:
    """Leave the seccomp filter and its loader beside the grading child (child.confine_here loads them
    before any learner code), where a filter can be set here; ``course grade`` says when it cannot."""
    if confine.available()[0]:
        shutil.copyfile(Path(confine.__file__), box / "_grader_confine.py")
        (box / "_grader_filter.bpf").write_bytes(confine.compile_filter())


def _script(command: list[str], limits: Limits, isolation: str, cgroup: reaper.Cgroup, uid: int | None,
            cpu: bool = True) -> str:
    """The shell line: join the cgroup, ignore SIGXFSZ, exec [setpriv] prlimit and the command. ``cpu``
    False: no RLIMIT_CPU (the warm sandbox's zygote outlives many runs; each child gets its own)."""
    guard = [] if isolation == "bwrap" else procs.drop_privileges(uid)
    nproc = [f"--nproc={limits.max_processes}"] if uid is not None else []
    cpu_rlimit = [f"--cpu={cpu_limit(limits)}"] if cpu else []
    prlimit = guard + ["prlimit", f"--as={limits.memory_bytes}", f"--fsize={limits.file_bytes}",
                       f"--nofile={limits.open_files}", *cpu_rlimit, "--core=0", *nproc, "--"]
    join = "".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))} && " for d in cgroup.dirs)
    return f"{join}trap '' XFSZ && exec " + " ".join(shlex.quote(a) for a in prlimit + command)


def _readable_by_run(box: Path, uid: int) -> None:
    """rlimits as root: the box readable, never writable, by the run's own unprivileged uid (its group, the
    gid of the same number) and by nobody else; the folder holding it only traversable by others. So a
    learner graded at the same time (another worker, another uid) cannot read this run's files, even knowing
    their path from /proc/<pid>/cmdline. Everything in the box was written by us."""
    os.chmod(box.parent, os.stat(box.parent).st_mode | 0o001)
    os.chown(box, -1, uid)
    os.chmod(box, 0o750)
    for root, dirs, files in os.walk(box):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chown(path, -1, uid)
                os.chmod(path, 0o750 if name in dirs else 0o640)


class _Collector:
    """Reads result frames from the pipe in a thread; writes each complete one to out/NNN.pt."""

    def __init__(self, fd: int, out: Path, limits: Limits) -> None:
        self.fd, self.out, self.limits = fd, out, limits
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _read(self, n: int) -> bytes | None:
        chunks, left = [], n
        while left:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                if self.stop.is_set():
                    return None
                continue
            data = os.read(self.fd, min(left, 1 << 20))
            if not data:
                return None
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)

    def _used(self, skip: str) -> int:
        return sum(p.stat().st_size for p in self.out.iterdir() if p.name != skip and p.is_file())

    def _run(self) -> None:
        try:
            while True:
                head = self._read(RESULT_HEADER.size)
                if head is None:
                    return
                index, length = RESULT_HEADER.unpack(head)
                name = f"{index:03d}.pt"
                if index > 999 or length > self.limits.result_bytes:
                    return  # broken or oversized: stop reading; the child's next write fails
                payload = self._read(length)
                if payload is None:
                    return
                if self._used(name) + length > self.limits.results_total:  # kept off the disk, said so
                    (self.out / f"{index:03d}{OVER_TOTAL}").touch()
                    (self.out / name).unlink(missing_ok=True)
                    continue
                tmp = self.out / f".{name}.part"
                tmp.write_bytes(payload)
                tmp.replace(self.out / name)
        except OSError:
            return

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        os.close(self.fd)


def _wait(proc: subprocess.Popen, wall_s: float, watchdog: Watchdog | None) -> bool:
    """Wait for ``proc``; True when it ran past ``wall_s`` or the watchdog (given the meter of its
    process tree) said stop."""
    meter = functools.partial(reaper.usage, proc.pid)
    deadline = time.monotonic() + wall_s
    while True:
        step = min(0.1, deadline - time.monotonic()) if watchdog else deadline - time.monotonic()
        try:
            proc.wait(timeout=max(step, 0))
            return False
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline or (watchdog is not None and watchdog(meter)):
                return True


def run(box: Path, argv: list[str], limits: Limits, isolation: str, log: Path,
        watchdog: Watchdog | None = None, hide: Sequence[Path] = ()) -> RunResult:
    """Run ``argv`` (paths inside the box given as /sandbox/...) with ``box`` as its only writable place.

    The command is stopped (``timed_out``) after ``limits.wall_s`` seconds, or earlier when ``watchdog``,
    called every 0.1 s while it runs with a meter of its process tree (``reaper.usage``: CPU seconds and
    run-queue wait), returns True.

    In ``rlimits`` mode /sandbox in ``argv`` is rewritten to the box's real path. The command's results
    (frames on the result pipe, see the module docstring) land in ``box/out``. ``hide``: folders shown empty
    to the command (bwrap only: rlimits cannot hide anything, so asking it to is an error).
    """
    confine_box(box)
    uid = None
    if hide and isolation != "bwrap":
        raise ValueError(f"only bubblewrap can hide {', '.join(map(str, hide))} from a run")
    if isolation == "bwrap":
        (box / HIDDEN).mkdir(exist_ok=True)
        command = _bwrap_argv(box, argv, limits, hide=hide)
    else:
        command = [a.replace("/sandbox", str(box)) if a.startswith("/sandbox") else a for a in argv]
        uid = procs.sandbox_uid()
        if uid is not None:
            _readable_by_run(box, uid)
    cgroup = new_cgroup(limits)
    token_var, token = reaper.new_token()
    env = environment(isolation, box, token_var, token)
    (box / "out").mkdir(exist_ok=True)
    read_end, write_end = os.pipe()
    # The child writes to the pipe's own fd number, inherited through sh, bwrap and prlimit: no shell
    # redirection, since dash's `exec 3>&N` refuses an N of two digits (a grader with many files open).
    env[RESULT_FD_VAR] = str(write_end)
    collector = _Collector(read_end, box / "out", limits)
    output = OutputPipe(limits.output_keep)
    timed_out = False
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", _script(command, limits, isolation, cgroup, uid)],
                                stdin=subprocess.DEVNULL, stdout=output.write_end, stderr=subprocess.STDOUT,
                                cwd=box, env=env, start_new_session=True, close_fds=True, pass_fds=(write_end,))
        os.close(write_end)
        write_end = -1
        output.handed_over()
        try:
            timed_out = _wait(proc, limits.wall_s, watchdog)
        finally:
            reaper.kill_tree(proc.pid)
            proc.wait()
        cgroup.kill_all()
        reaper.kill_token(token)
        if uid is not None:
            reaper.kill_uid(uid)  # whatever the run's uid still runs: a daemon that left tree, cgroup and token
        cgroup.remove()
    finally:
        if write_end >= 0:
            os.close(write_end)
        collector.finish()
        output.finish(log)
    return RunResult(None if timed_out else proc.returncode, timed_out)
