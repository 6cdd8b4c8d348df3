"""Ending everything a grading run started, and what a killed run left behind.

``kill_all(find)`` freezes (SIGSTOP) what ``find()`` returns, asks again (a fork may have raced the
freeze), then SIGKILLs the lot, until ``find()`` returns nothing alive. A process tree, a cgroup and
the processes carrying a run's token in their environment are three ways of finding the victims.
``sweep_stale()`` removes the cgroups and scratch folders of a grading process that is gone.
``usage(pid)`` says what a process tree has had of the machine: CPU seconds, and seconds its threads were
runnable but waiting for a CPU (the run queue), which is how a run starved by a busy machine is told from
one that loops (it used its CPU) or sleeps (it waited for nothing but itself).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CGROUP_ROOT = Path("/sys/fs/cgroup")
TOKEN_VAR = "COURSE_SANDBOX_TOKEN"


def _stat(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        return stat[stat.rindex(")") + 2:]  # after "pid (comm) ": state, ppid, ...
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Running, sleeping or stopped; not gone and not a zombie waiting for its parent."""
    stat = _stat(pid)
    return bool(stat) and not stat.startswith("Z")


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` in the process tree, in any session or process group."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        stat = _stat(int(entry)) if entry.isdigit() else None
        if stat:
            try:
                kids.setdefault(int(stat.split()[1]), []).append(int(entry))
            except (IndexError, ValueError):
                continue
    out, todo = set(), [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _signal(pids: set[int], sig: int) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except OSError:
            pass


@dataclass(frozen=True)
class Usage:
    """What a process tree has had of the machine since its processes started (cumulative; differences of
    two readings say what happened between them)."""

    cpu_s: float                # on a CPU: its living processes and the children they reaped
    waiting_s: float | None     # runnable but waiting for a CPU (run queue); None where the kernel keeps no schedstat


Meter = Callable[[], Usage]
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _waiting_ns(pid: int) -> int | None:
    """Nanoseconds the threads of ``pid`` spent runnable on the run queue (field 2 of each thread's
    /proc/<pid>/task/<tid>/schedstat); None when the kernel has no schedstat."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    total, seen = 0, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                total += int(fh.read().split()[1])
            seen = True
        except (OSError, IndexError, ValueError):
            continue
    return total if seen or not tids else None


def usage(pid: int) -> Usage:
    """The CPU time (utime, stime, cutime, cstime of /proc/<pid>/stat) and run-queue wait of ``pid`` and
    every process below it. Returns zeros for a tree that is gone; ``waiting_s`` None without schedstat."""
    cpu, waiting, known = 0, 0, True
    for p in {pid} | descendants(pid):
        stat = _stat(p)
        if not stat:
            continue
        try:
            cpu += sum(int(x) for x in stat.split()[11:15])
        except ValueError:
            continue
        wait = _waiting_ns(p)
        known = known and wait is not None
        waiting += wait or 0
    return Usage(cpu / _TICK, waiting / 1e9 if known else None)


def _killpg(pgid: int | None) -> None:
    if pgid is not None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


def kill_all(find: Callable[[], set[int]], *, group: int | None = None, rounds: int = 50,
             pause: float = 0.02) -> int:
    """Freeze, then SIGKILL, whatever ``find()`` returns alive, until nothing is left; also the process
    group ``group`` each round. Returns how many processes were killed."""
    killed: set[int] = set()
    for _ in range(rounds):
        victims = {p for p in find() if _alive(p)}
        if not victims:
            break
        _signal(victims, signal.SIGSTOP)  # frozen processes cannot fork while we collect
        victims |= find()
        _signal(victims, signal.SIGKILL)
        _killpg(group)
        killed |= victims
        time.sleep(pause)
    _killpg(group)  # without /proc nothing is found: the process group at least
    return len(killed)


def kill_tree(pid: int) -> int:
    """Kill ``pid`` (a session leader), its process group and every descendant."""
    return kill_all(lambda: {pid} | descendants(pid), group=pid)


def new_token() -> tuple[str, str]:
    """(environment variable, value) to put in a run's environment; ``kill_token(value)`` ends them all."""
    return TOKEN_VAR, uuid.uuid4().hex


def _pids_where(match: Callable[[Path], bool]) -> set[int]:
    """The processes whose /proc folder ``match`` accepts (one that vanishes or cannot be read: not)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if match(entry):
                    found.add(int(entry.name))
            except (OSError, ValueError):
                pass
    return found


def _token_pids(token: str) -> set[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    return _pids_where(lambda entry: needle in (entry / "environ").read_bytes())


def kill_token(token: str) -> int:
    """Kill every process whose environment carries the token, daemons that left the session included."""
    return kill_all(lambda: _token_pids(token) - {os.getpid()})


def _runs_as(entry: Path, uid: int) -> bool:
    with open(entry / "status", "rb") as fh:
        line = next((x for x in fh if x.startswith(b"Uid:")), b"")
    return any(int(u) == uid for u in line.split()[1:])


def kill_uid(uid: int) -> int:
    """Kill every process running as ``uid`` (real, effective, saved or file-system uid): the rlimits
    fallback's uid of its own as root (procs.sandbox_uid), which nothing but this grading process's runs
    use, so that a daemon which left the tree, the cgroup (where there is none) and its token (a new
    environment through exec) still ends with its run."""
    if uid == 0 or uid == os.getuid():
        raise ValueError(f"kill_uid({uid}) would kill the grader's own processes")
    return kill_all(lambda: _pids_where(lambda entry: _runs_as(entry, uid)))


CPU_PERIOD_US = 100_000
CONTROLLERS = ("pids", "memory", "cpu")


class Cgroup:
    """A throwaway cgroup (v1 pids, memory and cpu) for one run; each controller a no-op when not writable.
    ``cpus``: the CPU time its processes may use together per second of wall time (the cpu controller's
    quota), whatever number of processes they are; cgroups of the same parent also share the CPUs by
    equal weight, so one run's many processes cannot crowd out another worker's run."""

    PREFIX = "course_grade_"

    def __init__(self, max_processes: int, memory_bytes: int, cpus: float | None = None) -> None:
        self.dirs: list[Path] = []
        name = f"{self.PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
        quota = {} if cpus is None else {"cpu.cfs_period_us": str(CPU_PERIOD_US),
                                         "cpu.cfs_quota_us": str(max(1000, int(cpus * CPU_PERIOD_US)))}
        for controller, settings in (("pids", {"pids.max": str(max_processes)}),
                                     ("memory", {"memory.limit_in_bytes": str(memory_bytes)}),
                                     ("cpu", quota)):
            if not settings:
                continue
            base = CGROUP_ROOT / controller
            if (base / "cgroup.procs").is_file():
                self._make(base / name, settings)

    def _make(self, d: Path, settings: dict[str, str]) -> None:
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

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def kill_all(self) -> int:
        return kill_all(self.pids, rounds=200, pause=0.01)

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)

    @classmethod
    def sweep_stale(cls) -> int:
        """Kill and remove the cgroups of a grading process that is gone."""
        killed = 0
        for controller in CONTROLLERS:
            try:
                entries = list((CGROUP_ROOT / controller).glob(cls.PREFIX + "*"))
            except OSError:
                continue
            for d in entries:
                if _owner_gone(d.name):
                    group = cls.__new__(cls)
                    group.dirs = [d]
                    killed += group.kill_all()
                    group.remove()
        return killed


def _owner_gone(name: str) -> bool:
    """For a name course_grade_<pid>_...: whether that process is gone."""
    m = re.match(rf"{Cgroup.PREFIX}(\d+)[_-]", name)
    return bool(m) and not Path(f"/proc/{m.group(1)}").exists()


def sweep_stale() -> int:
    """Kill and remove what a grading process that was killed left: its cgroups and its scratch folders
    (``tempfile`` folders named course_grade_<pid>_...); those of a live process are kept."""
    killed = Cgroup.sweep_stale()
    for d in Path(tempfile.gettempdir()).glob(Cgroup.PREFIX + "*"):
        if d.is_dir() and not d.is_symlink() and _owner_gone(d.name):
            shutil.rmtree(d, ignore_errors=True)
    return killed
