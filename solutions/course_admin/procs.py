"""Process control for the grader: which isolation learner code gets, and ending everything it started.

``sandbox.py`` runs the course_lib child with it (a notebook is never run by the grader: answers.py).

Isolation has two names, used everywhere (grade rows, the command line):

``bwrap``    bubblewrap starts: namespaces (no network, own PID namespace), a file system of our choice.
``rlimits``  the fallback: resource limits, a new session, and killing every process the run left.

One environment switch, ``COURSE_GRADE_ISOLATION`` (auto, bwrap or rlimits), overrides what a caller
asks of ``detect()``.
``why_not_bwrap()`` says truthfully why a run is not under bubblewrap (asked for, or bwrap's failure).

Under ``rlimits`` learner code runs with the grader's rights unless the grader is root: then the course_lib
child runs as an unprivileged uid of its own (``sandbox_uid()``, one per grading process, through
``drop_privileges()``), which cannot write the grader's files nor signal another learner's run.

Killing: ``kill_all(find)`` freezes (SIGSTOP) what ``find()`` returns, asks again (a fork may have raced
the freeze), then SIGKILLs the lot, until ``find()`` returns nothing alive. A process tree, a cgroup and
the processes carrying a run's token in their environment are three ways of finding the victims.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable

SWITCH = "COURSE_GRADE_ISOLATION"
CGROUP_ROOT = Path("/sys/fs/cgroup")
TOKEN_VAR = "COURSE_SANDBOX_TOKEN"
BWRAP_TMP_BYTES = 64 * 1024**2
PR_SET_CHILD_SUBREAPER = 36


# ----------------------------------------------------------------------------------------- isolation
def python_paths() -> tuple[Path, Path, Path]:
    """(the real interpreter, its installation prefix, the venv's site-packages)."""
    exe = Path(os.path.realpath(sys.executable))
    prefix = Path(os.path.realpath(sys.base_prefix))
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    return exe, prefix, site


def bwrap_root(tmp_bytes: int = BWRAP_TMP_BYTES) -> list[str]:
    """bubblewrap fully unshared (uid 65534, no capabilities) with an empty root holding read-only /usr,
    /lib*, /bin, /sbin, the Python installation and the virtual environment, /proc, /dev and a small
    tmpfs /tmp. The caller adds its own binds, then ``--`` and the command."""
    _, prefix, _ = python_paths()
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr"]
    for name in ("lib", "lib64", "bin", "sbin"):
        p = Path("/" + name)
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), str(p)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    for b in sorted({prefix, Path(sys.prefix).resolve()}):
        if not str(b).startswith("/usr/"):
            argv += ["--ro-bind", str(b), str(b)]
    return argv


@functools.lru_cache(maxsize=None)
def bwrap_works() -> tuple[bool, str]:
    """Whether bubblewrap can start a fully unshared sandbox here (checked once per process), and why not."""
    if shutil.which("bwrap") is None:
        return False, "bwrap is not installed (apt-get install bubblewrap)"
    exe, _, _ = python_paths()
    argv = bwrap_root() + ["--", str(exe), "-I", "-S", "-c", "print('ok')"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap failed to start: {exc}"
    if proc.returncode != 0 or proc.stdout.strip() != "ok":
        return False, f"bwrap failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}"
    return True, "bwrap works"


def detect(requested: str = "auto") -> str:
    """'bwrap' or 'rlimits'. ``requested`` (or ``COURSE_GRADE_ISOLATION``, which wins) may force one;
    'bwrap' fails loudly when bubblewrap does not work here."""
    requested = os.environ.get(SWITCH, requested)
    if requested == "rlimits":
        return "rlimits"
    ok, why = bwrap_works()
    if ok:
        return "bwrap"
    if requested == "bwrap":
        raise RuntimeError(f"--isolation bwrap was asked for but {why}")
    return "rlimits"


def why_not_bwrap(requested: str = "auto") -> str:
    """Why ``detect(requested)`` does not give bwrap: the switch or option that asked for rlimits, or
    bubblewrap's own failure."""
    switch = os.environ.get(SWITCH)
    if switch == "rlimits":
        return f"rlimits was asked for ({SWITCH}=rlimits in the environment)"
    if requested == "rlimits":
        return "rlimits was asked for (--isolation rlimits)"
    return f"bubblewrap does not work here: {bwrap_works()[1]}"


SANDBOX_UID_BASE = 1_000_000


def sandbox_uid() -> int | None:
    """The uid the rlimits fallback runs learner code as when the grader is root (None otherwise): no
    account, no group, one per grading process so that two learners graded at once cannot touch each
    other's processes. RLIMIT_NPROC then counts this run's processes only."""
    return SANDBOX_UID_BASE + os.getpid() if os.geteuid() == 0 else None


def drop_privileges(uid: int | None, read_all: bool = False) -> list[str]:
    """The argv prefix that runs a command as ``uid`` (no groups, no capabilities, no new privileges
    through setuid programs), killed with its parent. ``read_all`` keeps CAP_DAC_READ_SEARCH (read any
    file, write none): for an interpreter installed where other users cannot read (pyenv under /root)."""
    if uid is None:
        return ["setpriv", "--no-new-privs", "--pdeathsig", "KILL", "--"]
    caps = (["--inh-caps", "-all,+dac_read_search", "--ambient-caps", "+dac_read_search",
             "--bounding-set", "-all,+dac_read_search"] if read_all else
            ["--inh-caps", "-all", "--bounding-set", "-all"])
    return ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", *caps,
            "--no-new-privs", "--pdeathsig", "KILL", "--"]


def _runs_as(uid: int, read_all: bool) -> tuple[bool, str]:
    exe, prefix, site = python_paths()
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import torch; print(sys.base_prefix)"
    try:
        proc = subprocess.run(drop_privileges(uid, read_all) + [str(exe), "-I", "-S", "-c", code], cwd="/",
                              capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"setpriv failed to start: {exc}"
    if proc.returncode != 0 or os.path.realpath(proc.stdout.strip() or "?") != str(prefix):
        return False, f"exit {proc.returncode}, {(proc.stderr.strip() or proc.stdout.strip())[-300:]}"
    return True, ""


@functools.lru_cache(maxsize=None)
def unprivileged() -> tuple[bool | None, str]:
    """How the rlimits fallback runs learner code as root: (read_all, description), read_all None when
    Python cannot run as ``sandbox_uid()`` at all. Not root: (False, ...) and the grader's own uid."""
    uid = sandbox_uid()
    if uid is None:
        return False, "not root: learner code runs with the grader's own uid"
    ok, why = _runs_as(uid, False)
    if ok:
        return False, f"learner code runs as uid {uid}: it cannot write your files"
    if _runs_as(uid, True)[0]:
        return True, (f"learner code runs as uid {uid} allowed to read every file (the interpreter is not "
                      "readable by other users) but to write none")
    return None, (f"Python and torch cannot run as uid {uid} ({why}); make the interpreter and the virtual "
                  "environment readable by all users")


def become_subreaper() -> None:
    """Adopt every orphan our descendants leave, so that ``kill_descendants(os.getpid())`` finds them."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except Exception:  # noqa: BLE001 - not Linux, or no prctl: the process group kill still applies
        pass


# ------------------------------------------------------------------------------------------- killing
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


def kill_descendants(pid: int) -> int:
    """Kill every descendant of ``pid`` (usually ``os.getpid()``), not ``pid`` itself."""
    return kill_all(lambda: descendants(pid) - {os.getpid()})


# ------------------------------------------------------------------------------- tokens and cgroups
def new_token() -> tuple[str, str]:
    """(environment variable, value) to put in a run's environment; ``kill_token(value)`` ends them all."""
    return TOKEN_VAR, uuid.uuid4().hex


def _token_pids(token: str) -> set[int]:
    needle = f"{TOKEN_VAR}={token}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                pass
    return found


def kill_token(token: str) -> int:
    """Kill every process whose environment carries the token, daemons that left the session included."""
    return kill_all(lambda: _token_pids(token) - {os.getpid()})


class Cgroup:
    """A throwaway cgroup (v1 pids + memory) for one run; all no-ops when not writable."""

    PREFIX = "course_grade_"

    def __init__(self, max_processes: int, memory_bytes: int) -> None:
        self.dirs: list[Path] = []
        name = f"{self.PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
        for controller, settings in (("pids", {"pids.max": str(max_processes)}),
                                     ("memory", {"memory.limit_in_bytes": str(memory_bytes)})):
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
        for controller in ("pids", "memory"):
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
