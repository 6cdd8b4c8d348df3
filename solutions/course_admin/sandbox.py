"""Run one command on learner code, contained: no network, limits, its own directory, nothing left behind.

Two isolation levels, chosen once per grading run (``detect()``) and recorded in every grade row:

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
stderr go to a file the parent reads back truncated. When the kernel lets us (cgroup v1 ``pids`` and
``memory`` controllers writable, as root here), the command runs in its own cgroup with a cap on
processes and memory, and every process in it is killed afterwards, including daemons that left the
session. Without cgroups the parent kills the process group and any process carrying the run's token
in its environment.
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CGROUP_ROOT = Path("/sys/fs/cgroup")
TOKEN_VAR = "COURSE_SANDBOX_TOKEN"


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0
    memory_bytes: int = 2 * 1024**3
    file_bytes: int = 16 * 1024**2      # any single file, the captured output included
    output_keep: int = 64 * 1024        # bytes of output kept in the log returned
    max_processes: int = 64             # needs the pids cgroup
    open_files: int = 256
    tmp_bytes: int = 64 * 1024**2       # bwrap's /tmp


@dataclass
class RunResult:
    returncode: int | None
    timed_out: bool
    wall_s: float
    output: str            # head and tail of stdout+stderr
    output_bytes: int
    isolation: str
    leftovers_killed: int  # processes still alive after the command ended, killed by us


def python_paths() -> tuple[Path, Path, Path]:
    """(the real interpreter, its installation prefix, the venv's site-packages)."""
    exe = Path(os.path.realpath(sys.executable))
    prefix = Path(os.path.realpath(sys.base_prefix))
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    return exe, prefix, site


def _bwrap_argv(box: Path, inner: list[str], limits: Limits) -> list[str]:
    exe, prefix, site = python_paths()
    venv = Path(sys.prefix).resolve()
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr"]
    for name in ("lib", "lib64", "bin", "sbin"):
        p = Path("/" + name)
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), str(p)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    binds = {prefix, venv}
    for b in sorted(binds):
        if not str(b).startswith("/usr/"):
            argv += ["--ro-bind", str(b), str(b)]
    argv += ["--bind", str(box), "/sandbox", "--chdir", "/sandbox", "--setenv", "HOME", "/sandbox",
             "--"]
    return argv + inner


@functools.lru_cache(maxsize=None)
def bwrap_works() -> tuple[bool, str]:
    """Whether bubblewrap can start a fully unshared sandbox here (checked once)."""
    if shutil.which("bwrap") is None:
        return False, "bwrap is not installed (apt-get install bubblewrap)"
    box = Path(tempfile.mkdtemp(prefix="course_bwrap_probe_"))
    try:
        exe, _, _ = python_paths()
        argv = _bwrap_argv(box, [str(exe), "-I", "-S", "-c", "print('ok')"], Limits())
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bwrap failed to start: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != "ok":
            return False, f"bwrap failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}"
        return True, "bwrap works"
    finally:
        shutil.rmtree(box, ignore_errors=True)


def detect(requested: str = "auto") -> str:
    """'bwrap' or 'rlimits'. ``requested`` may force one ('bwrap' fails loudly when unavailable)."""
    requested = os.environ.get("COURSE_GRADE_ISOLATION", requested)
    if requested == "rlimits":
        return "rlimits"
    ok, why = bwrap_works()
    if ok:
        return "bwrap"
    if requested == "bwrap":
        raise RuntimeError(f"--isolation bwrap was asked for but {why}")
    return "rlimits"


class _Cgroup:
    """A throwaway cgroup (v1 pids + memory) for one run; all no-ops when not writable."""

    def __init__(self, limits: Limits) -> None:
        self.dirs: list[Path] = []
        name = f"course_grade_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        for controller, settings in (("pids", {"pids.max": str(limits.max_processes)}),
                                     ("memory", {"memory.limit_in_bytes": str(limits.memory_bytes + 512 * 1024**2)})):
            base = CGROUP_ROOT / controller
            if not (base / "cgroup.procs").is_file():
                continue
            d = base / name
            try:
                d.mkdir()
                for key, value in settings.items():
                    (d / key).write_text(value)
                self.dirs.append(d)
            except OSError:
                try:
                    d.rmdir()
                except OSError:
                    pass

    @property
    def active(self) -> bool:
        return any(d.parent.name == "pids" for d in self.dirs)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def kill_all(self) -> int:
        return _kill_until_gone(self.pids, rounds=200, pause=0.01)

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


def _token_pids(token: str) -> set[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.add(int(entry.name))
        except OSError:
            pass
    return found


def _kill_until_gone(find: Callable[[], set[int]], rounds: int, pause: float) -> int:
    """SIGKILL whatever ``find()`` returns until it returns nothing (a fork may race a round)."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(pause)
    return len(killed)


def _kill_token(token: str) -> int:
    return _kill_until_gone(lambda: _token_pids(token) - {os.getpid()}, rounds=50, pause=0.02)


def _read_capped(path: Path, keep: int) -> tuple[str, int]:
    size = path.stat().st_size if path.exists() else 0
    with open(path, "rb") if path.exists() else open(os.devnull, "rb") as fh:
        if size <= 2 * keep:
            data = fh.read()
        else:
            head = fh.read(keep)
            fh.seek(size - keep)
            data = head + f"\n… [{size - 2 * keep} bytes of output left out] …\n".encode() + fh.read()
    return data.decode("utf-8", "replace"), size


def run(box: Path, argv: list[str], limits: Limits, isolation: str, log: Path) -> RunResult:
    """Run ``argv`` (paths inside the box given as /sandbox/...) with ``box`` as its only writable place.

    In ``rlimits`` mode /sandbox in ``argv`` is rewritten to the box's real path.
    """
    token = uuid.uuid4().hex
    if isolation == "bwrap":
        command = _bwrap_argv(box, argv, limits)
    else:
        command = [a.replace("/sandbox", str(box)) if a.startswith("/sandbox") else a for a in argv]
    cgroup = _Cgroup(limits)
    guard = [] if isolation == "bwrap" else ["setpriv", "--pdeathsig", "KILL", "--"]
    prlimit = guard + ["prlimit", f"--as={limits.memory_bytes}", f"--fsize={limits.file_bytes}",
               f"--nofile={limits.open_files}", f"--cpu={int(limits.wall_s) + 5}", "--core=0", "--"]
    join = "".join(f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))} && " for d in cgroup.dirs)
    script = f"{join}trap '' XFSZ && exec " + " ".join(shlex.quote(a) for a in prlimit + command)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(box), TOKEN_VAR: token,
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp" if isolation == "bwrap" else str(box)}
    start = time.monotonic()
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=box, env=env, start_new_session=True,
                                close_fds=True)
        try:
            proc.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    leftovers = cgroup.kill_all() + _kill_token(token)
    cgroup.remove()
    text, size = _read_capped(log, limits.output_keep)
    # keep the log on disk small too
    if size > 4 * limits.output_keep:
        log.write_text(text)
    return RunResult(None if timed_out else proc.returncode, timed_out, time.monotonic() - start,
                     text, size, isolation, leftovers)


def sweep_stale() -> int:
    """Kill and remove the cgroups and scratch folders left by a grading process that was killed."""
    killed = 0
    for controller in ("pids", "memory"):
        base = CGROUP_ROOT / controller
        try:
            entries = list(base.glob("course_grade_*"))
        except OSError:
            continue
        for d in entries:
            m = re.match(r"course_grade_(\d+)_", d.name)
            if not m or Path(f"/proc/{m.group(1)}").exists():
                continue
            group = _Cgroup.__new__(_Cgroup)
            group.dirs = [d]
            killed += group.kill_all()
            group.remove()
    # Scratch folders of a grading process that was killed: named course_grade_<pid>_..., pid gone.
    for d in Path(tempfile.gettempdir()).glob("course_grade_*"):
        m = re.match(r"course_grade_(\d+)_", d.name)
        if m and d.is_dir() and not Path(f"/proc/{m.group(1)}").exists():
            shutil.rmtree(d, ignore_errors=True)
    return killed
