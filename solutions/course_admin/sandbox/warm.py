"""A warm sandbox: one bubblewrap sandbox per grading process whose fork server (zygote.py) has imported
torch once, and forks a fresh grading child for each run, one at a time.

Why: starting Python and importing torch costs about 1.5 s of CPU, and it was most of a submission's
cost when each chapter is its own assignment. The cold way (cold.run: a new bwrap and a new Python
per run) stays for the rlimits fallback and behind ``COURSE_GRADE_WARM=0``.

What a learner's run gets is what cold.run gives under bwrap: the same namespaces, read-only root,
64 MiB /tmp, rlimits (set by the zygote in the child), the cgroup (one for the sandbox's life), the
result pipe and an output pipe of its own (output.py: nothing it prints lands on the disk uncapped); and more, since the sandbox outlives the run: the zygote is the
sandbox's pid 1 (bubblewrap's ``--as-pid-1``), undumpable, and each child takes user, network and IPC
namespaces of its own and loads the seccomp filter (confine.py) before any learner code. So no run can
reach the zygote, pid 1 or a later run. The sandbox never starts without the filter: where none can be
set here, ``ZygoteError`` says why and this process grades the cold way. What a run could leave for the
next learner is swept by the zygote before it reports the run's end (zygote.py: every other process
killed, /tmp emptied, System V IPC objects removed, keyrings cleared, the zygote's own inheritable
attributes checked); anything it cannot sweep, a zygote that dies, stops answering or says anything
unexpected, and a run that is stopped at its time limit all make this side throw the whole sandbox away
(every process killed from outside, cgroup included) and start a new one for the next run. A zygote that
died between runs never took the next request: that run is handed once more to a new sandbox, at no
cost to its learner.

The runs' folders are made in the sandbox's ``spool`` folder, bound read-only at /sandbox; only the
run being graded is there while it runs.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing import util
from pathlib import Path

from . import cold, confine, procs, reaper
from .output import OutputPipe

SWITCH = "COURSE_GRADE_WARM"
HERE = Path(__file__).resolve().parent
FILES = {"zygote.py": HERE / "zygote.py", "child.py": HERE / "child.py", "confine.py": HERE / "confine.py"}
START_S = 120.0  # importing torch on a loaded machine


def enabled(isolation: str) -> bool:
    """Whether runs of this isolation go through the warm sandbox: bwrap, unless COURSE_GRADE_WARM=0 or no
    seccomp filter can be set here (``course grade`` says so once, in its banner)."""
    return isolation == "bwrap" and os.environ.get(SWITCH, "1") != "0" and confine.available()[0]


class ZygoteError(RuntimeError):
    """The warm sandbox could not start: said once, then this process grades the cold way."""


class WarmSandbox:
    PID_1 = True  # the zygote is the sandbox's pid 1: no bubblewrap init beside it for a run to take over

    def __init__(self, files: dict[str, Path] = FILES) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"{reaper.Cgroup.PREFIX}{os.getpid()}_warm_"))
        self.spool = self.root / "spool"
        (self.spool / "_zygote").mkdir(parents=True)
        for name, source in files.items():
            shutil.copyfile(source, self.spool / "_zygote" / name)
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.key: tuple | None = None
        self.cgroup: reaper.Cgroup | None = None
        self.token = ""
        self.starts = 0  # sandboxes started: one, unless runs ended badly

    # ------------------------------------------------------------------ life of the sandbox
    def _start(self, limits: cold.Limits) -> None:
        ok, why = confine.available()
        if not ok:  # the runs of a warm sandbox share it: never without the filter
            raise ZygoteError(why)
        (self.spool / "_zygote" / "filter.bpf").write_bytes(confine.compile_filter())
        exe, _, site = procs.python_paths()
        self.cgroup = cold.new_cgroup(limits)
        token_var, self.token = reaper.new_token()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the spool where cold.run would bind a run's box; no RLIMIT_CPU: the zygote outlives many runs
        argv = cold._bwrap_argv(self.spool, [str(exe), "-I", "-S", "/sandbox/_zygote/zygote.py", str(site)], limits,
                                pid_1=self.PID_1)
        script = cold._script(argv, limits, "bwrap", self.cgroup, None, cpu=False)
        env = {**cold.environment("bwrap", self.spool, token_var, self.token),
               "COURSE_ZYGOTE_FD": str(theirs.fileno())}
        with open(self.root / "zygote.log", "ab") as log:
            self.proc = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.spool, env=env,
                                         start_new_session=True, close_fds=True, pass_fds=(theirs.fileno(),))
        theirs.close()
        self.sock, self.key = ours, self._key(limits)
        self.starts += 1
        if "ready" not in self._receive(START_S):
            tail = (self.root / "zygote.log").read_text(errors="replace").strip()[-400:]
            self.stop()
            raise ZygoteError(f"the warm sandbox did not start: {tail or 'no output'}")

    @staticmethod
    def _key(limits: cold.Limits) -> tuple:
        return (limits.memory_bytes, limits.max_processes, limits.tmp_bytes, limits.file_bytes, limits.open_files,
                limits.cpus)

    def stop(self) -> None:
        """Kill the whole sandbox from outside: its process tree, its cgroup, its token."""
        if self.proc is not None:
            reaper.kill_tree(self.proc.pid)
            self.proc.wait()
        if self.cgroup is not None:
            self.cgroup.kill_all()
            self.cgroup.remove()
        if self.token:
            reaper.kill_token(self.token)
        if self.sock is not None:
            self.sock.close()
        self.proc = self.sock = self.cgroup = self.key = None
        self.token = ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ messages
    def _receive(self, seconds: float, watchdog: Callable[[], bool] | None = None) -> dict:
        """The zygote's next message; {} when it closed the socket, said something malformed, or
        ``seconds`` passed (or ``watchdog`` said stop) first: {"timeout": True} then."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (watchdog is not None and watchdog()):
                return {"timeout": True}
            ready, _, _ = select.select([self.sock], [], [], min(0.1, left))
            if not ready:
                continue
            try:
                data = self.sock.recv(1 << 12)
                message = json.loads(data) if data else {}
            except (OSError, ValueError):
                return {}
            ok = isinstance(message, dict) and len(message) <= 2 and all(
                (k == "left" and isinstance(v, str)) or (k != "left" and type(v) is int) for k, v in message.items())
            return message if ok else {}

    # ------------------------------------------------------------------ one run
    def run(self, box: Path, start: int, limits: cold.Limits, log: Path,
            watchdog: cold.Watchdog | None = None) -> cold.RunResult:
        """What cold.run does for the grading child, in a child forked by the warm zygote; ``watchdog`` is
        given the meter of the whole sandbox's process tree (the zygote idles while its child runs)."""
        if box.parent != self.spool:
            raise ValueError(f"{box} is not in the warm sandbox's spool {self.spool}")
        request = {"box": f"/sandbox/{box.name}", "start": start,
                   "limits": {"as": limits.memory_bytes, "fsize": limits.file_bytes, "nofile": limits.open_files,
                              "cpu": cold.cpu_limit(limits), "core": 0}}
        (box / "out").mkdir(exist_ok=True)
        log.write_bytes(b"")
        ended = self._attempt(request, box, limits, log, watchdog)
        if ended.get("unstarted"):  # the zygote died between runs: none of this run's code ran; once more
            ended = self._attempt(request, box, limits, log, watchdog)
        if ended.get("left"):
            with open(log, "ab") as fh:
                fh.write(f"\n[warm sandbox thrown away: {ended['left']}]\n".encode())
        if "returncode" in ended:
            return cold.RunResult(ended["returncode"], False)
        if ended.get("timeout"):
            return cold.RunResult(None, True)
        return cold.RunResult(-9, False)  # the sandbox itself ended: reported as the run being killed

    def _attempt(self, request: dict, box: Path, limits: cold.Limits, log: Path,
                 watchdog: cold.Watchdog | None) -> dict:
        """Hand the run to the zygote (a new sandbox first if none is up or its limits differ) and wait for
        its end. Returns the zygote's last message with the run's "returncode" added; {"timeout": True};
        {"unstarted": True} when the zygote never took the request; {} when the sandbox ended during the
        run or said something that is not a run's end. All but a clean end throw the sandbox away."""
        if self.proc is None or self.proc.poll() is not None or self.key != self._key(limits):
            self.stop()
            self._start(limits)
        read_end, write_end = os.pipe()
        collector = cold._Collector(read_end, box / "out", limits)
        output = OutputPipe(limits.output_keep)
        ended: dict = {}
        try:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [write_end, output.write_end])
            except OSError:
                ended = {"unstarted": True}
            os.close(write_end)
            write_end = -1
            output.handed_over()
            if not ended:
                started = self._receive(30.0)
                pid = self.proc.pid
                stop = None if watchdog is None else (lambda: watchdog(lambda: reaper.usage(pid)))
                ended = self._receive(limits.wall_s, stop) if "started" in started else {"unstarted": True}
            if "status" in ended:
                try:
                    ended["returncode"] = os.waitstatus_to_exitcode(ended["status"])
                except ValueError:  # not the status of an ended process: the zygote is not to be trusted
                    ended = {}
        finally:
            if write_end >= 0:
                os.close(write_end)
            if "returncode" not in ended or ended.get("left"):
                self.stop()  # timed out, died, said something odd, or left what it could not sweep
            collector.finish()
            kept = output.finish()
            with open(log, "ab") as fh:  # an attempt's output after the one before (a run handed over twice)
                fh.write(kept)
        return ended


_WARM: WarmSandbox | None = None
_BROKEN = ""


def current(isolation: str) -> WarmSandbox | None:
    """This process's warm sandbox (made on first use, closed at exit); None when runs of this isolation
    do not use one (``enabled``) or it failed to start here."""
    global _WARM
    if not enabled(isolation) or _BROKEN:
        return None
    if _WARM is None:
        _WARM = WarmSandbox()
        atexit.register(shutdown)
        util.Finalize(None, shutdown, exitpriority=10)  # a worker process of a pool skips atexit
    return _WARM


def broken(exc: ZygoteError) -> None:
    """The warm sandbox cannot start here: say so once; this process grades the cold way from now on."""
    global _BROKEN
    if not _BROKEN:
        print(f"course grade: {exc}; grading the cold way (a new sandbox per run, as safe, slower)",
              file=sys.stderr)
    _BROKEN = str(exc)
    shutdown()


def shutdown() -> None:
    global _WARM
    if _WARM is not None:
        _WARM.close()
        _WARM = None
