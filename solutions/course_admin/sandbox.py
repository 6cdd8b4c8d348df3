"""Run one command on learner code, contained: no network, limits, its own directory, nothing left behind.

Two isolation levels (``procs.py`` names and detects them), chosen once per grading run (``detect()``)
and recorded in every grade row:

``bwrap``    Debian's bubblewrap: new user, PID, network, IPC, UTS and cgroup namespaces
             (``--unshare-all``), an empty root with read-only binds of /usr, the Python installation
             and the virtual environment, the sandbox directory as the only writable place, a small
             tmpfs /tmp, ``--die-with-parent`` and ``--new-session``; uid 65534 inside.
             The grader's files, other submissions and the gradebook are simply not there.
``rlimits``  the fallback when bubblewrap cannot start: the same limits, a new session, but the
             learner code sees the file system and the network (the child adds a Python audit hook that
             refuses sockets, subprocesses and opening files outside the sandbox, which stops careless
             code, not a determined attacker).

Both levels apply, through ``prlimit``, RLIMIT_AS (memory), RLIMIT_FSIZE (size of any file written,
with SIGXFSZ ignored so that writes fail instead of killing), RLIMIT_NOFILE and RLIMIT_CPU; stdout and
stderr go to a log file, cut to its head and tail when large. When the kernel lets us (cgroup v1 ``pids``
and ``memory`` controllers writable, as root here), the command runs in its own cgroup with a cap on
processes and memory. Afterwards the process tree, the cgroup and any process carrying the run's token
in its environment are killed (``procs.kill_tree``, ``Cgroup.kill_all``, ``procs.kill_token``), daemons
that left the session included.
"""
from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import procs
from .procs import bwrap_works, detect, python_paths, sweep_stale

__all__ = ["Limits", "RunResult", "bwrap_works", "detect", "python_paths", "run", "sweep_stale"]


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    memory_bytes: int = 2 * 1024**3
    file_bytes: int = 16 * 1024**2      # any single file, the captured output included
    output_keep: int = 64 * 1024        # bytes of the log's head and of its tail kept on disk
    max_processes: int = 64             # needs the pids cgroup
    open_files: int = 256
    tmp_bytes: int = procs.BWRAP_TMP_BYTES  # bwrap's /tmp


@dataclass
class RunResult:
    returncode: int | None  # None when the command was stopped at the time limit
    timed_out: bool


def _bwrap_argv(box: Path, inner: list[str], limits: Limits) -> list[str]:
    return procs.bwrap_root(limits.tmp_bytes) + [
        "--bind", str(box), "/sandbox", "--chdir", "/sandbox", "--setenv", "HOME", "/sandbox", "--", *inner]


def _cap_log(path: Path, keep: int) -> None:
    """Keep the log on disk small: its first and last ``keep`` bytes when it holds over four times that."""
    size = path.stat().st_size if path.exists() else 0
    if size <= 4 * keep:
        return
    with open(path, "rb") as fh:
        head = fh.read(keep)
        fh.seek(size - keep)
        tail = fh.read()
    path.write_bytes(head + f"\n… [{size - 2 * keep} bytes of output left out] …\n".encode() + tail)


def _script(command: list[str], limits: Limits, isolation: str, cgroup: procs.Cgroup) -> str:
    """The shell line: join the cgroup, ignore SIGXFSZ, exec prlimit and the command."""
    guard = [] if isolation == "bwrap" else ["setpriv", "--pdeathsig", "KILL", "--"]
    prlimit = guard + ["prlimit", f"--as={limits.memory_bytes}", f"--fsize={limits.file_bytes}",
                       f"--nofile={limits.open_files}", f"--cpu={int(limits.wall_s) + 5}", "--core=0", "--"]
    join = "".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))} && " for d in cgroup.dirs)
    return f"{join}trap '' XFSZ && exec " + " ".join(shlex.quote(a) for a in prlimit + command)


def run(box: Path, argv: list[str], limits: Limits, isolation: str, log: Path) -> RunResult:
    """Run ``argv`` (paths inside the box given as /sandbox/...) with ``box`` as its only writable place.

    In ``rlimits`` mode /sandbox in ``argv`` is rewritten to the box's real path.
    """
    if isolation == "bwrap":
        command = _bwrap_argv(box, argv, limits)
    else:
        command = [a.replace("/sandbox", str(box)) if a.startswith("/sandbox") else a for a in argv]
    cgroup = procs.Cgroup(limits.max_processes, limits.memory_bytes + 512 * 1024**2)
    token_var, token = procs.new_token()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(box), token_var: token,
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp" if isolation == "bwrap" else str(box)}
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(["/bin/sh", "-c", _script(command, limits, isolation, cgroup)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=box,
                                env=env, start_new_session=True, close_fds=True)
        try:
            proc.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            procs.kill_tree(proc.pid)
            proc.wait()
    cgroup.kill_all()
    procs.kill_token(token)
    cgroup.remove()
    _cap_log(log, limits.output_keep)
    return RunResult(None if timed_out else proc.returncode, timed_out)
