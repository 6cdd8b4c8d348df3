"""Which isolation learner code gets: the bubblewrap probe, the switch, the unprivileged uid of the fallback.

``cold.py`` runs the course_lib child with it (a notebook is never run by the grader: answers.py).

Isolation has two names, used everywhere (grade rows, the command line):

``bwrap``    bubblewrap starts: namespaces (no network, own PID namespace), a file system of our choice.
``rlimits``  the fallback: resource limits, a new session, and killing every process the run left.

One environment switch, ``COURSE_GRADE_ISOLATION`` (auto, bwrap or rlimits), overrides what a caller
asks of ``detect()``.
``why_not_bwrap()`` says truthfully why a run is not under bubblewrap (asked for, or bwrap's failure).

Under ``rlimits`` learner code runs with the grader's rights unless the grader is root: then the course_lib
child runs as an unprivileged uid of its own (``sandbox_uid()``, one per grading process, through
``drop_privileges()``, with no capability), which cannot write the grader's files, read those other users
cannot read, nor signal another learner's run. When Python cannot run as that uid (an interpreter under
a /root of mode 700), ``unprivileged()`` says so and `course grade` refuses, naming the fix.

Ending everything a run started (process trees, cgroups, stale scratch) is reaper.py's job.
"""
from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

SWITCH = "COURSE_GRADE_ISOLATION"
BWRAP_TMP_BYTES = 64 * 1024**2


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
OOM_FIRST = ["choom", "-n", "1000", "--"]  # util-linux; raising one's own oom_score_adj needs no privilege


def sandbox_uid() -> int | None:
    """The uid the rlimits fallback runs learner code as when the grader is root (None otherwise): no
    account, no group, one per grading process so that two learners graded at once cannot touch each
    other's processes. RLIMIT_NPROC then counts this run's processes only."""
    return SANDBOX_UID_BASE + os.getpid() if os.geteuid() == 0 else None


def drop_privileges(uid: int | None, read_all: bool = False) -> list[str]:
    """The argv prefix that runs a command as ``uid`` with no groups and no capabilities at all (none is
    kept: CAP_DAC_READ_SEARCH alone would let learner code read solutions/ and --out/.prepared), no new
    privileges through setuid programs, killed with its parent, and the first process the kernel's
    out-of-memory killer takes (``OOM_FIRST``: where no cgroup of its own caps the run's memory, as in a
    Docker container, a run that needs more than the machine has dies alone, never the grader).
    ``read_all`` must be False: an interpreter other users cannot read is refused (``unprivileged``),
    never made readable by a capability."""
    if read_all:
        raise ValueError("drop_privileges keeps no capability: make the interpreter readable by all users instead")
    first = OOM_FIRST if shutil.which(OOM_FIRST[0]) else []
    if uid is None:
        return first + ["setpriv", "--no-new-privs", "--pdeathsig", "KILL", "--"]
    return first + ["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups", "--inh-caps", "-all",
            "--ambient-caps", "-all", "--bounding-set", "-all", "--no-new-privs", "--pdeathsig", "KILL", "--"]


def _runs_as(uid: int) -> tuple[bool, str]:
    exe, prefix, site = python_paths()
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import torch; print(sys.base_prefix)"
    try:
        proc = subprocess.run(drop_privileges(uid) + [str(exe), "-I", "-S", "-c", code], cwd="/",
                              capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": "/"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"setpriv failed to start: {exc}"
    if proc.returncode != 0:
        return False, f"exit {proc.returncode}, {(proc.stderr.strip() or proc.stdout.strip())[-300:]}"
    if os.path.realpath(proc.stdout.strip() or "?") != str(prefix):
        return False, f"Python started but could not read its installation, {prefix}"
    return True, ""


def closed_to_others(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (``path`` included) that a user with no rights of its own
    (no owner, no group) cannot enter, by its mode bits; None when every one is open (``o+x``)."""
    path = Path(os.path.realpath(path))
    for folder in [*reversed(path.parents), path]:
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            return folder
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return folder
    return None


def readable_by_others(path: Path) -> bool:
    """Whether a user with no rights of its own can read ``path`` (a folder: list and enter it), by mode bits."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return closed_to_others(Path(path).parent) is None and mode & need == need


@functools.lru_cache(maxsize=None)
def unprivileged() -> tuple[bool | None, str]:
    """How the rlimits fallback runs learner code as root: (False, what it can and cannot do) when Python
    runs as ``sandbox_uid()`` with no capability; (None, why not and the fix) when it cannot (e.g. pyenv
    under a /root that only root may enter). Not root: (False, ...) and the grader's own uid."""
    uid = sandbox_uid()
    if uid is None:
        return False, "not root: learner code runs with the grader's own uid"
    ok, why = _runs_as(uid)
    if ok:
        return False, (f"learner code runs as uid {uid} with no capabilities: it cannot write your files nor read "
                       "those other users cannot read, but it can read every file other users can")
    exe, _, site = python_paths()
    closed = [c for c in (closed_to_others(exe), closed_to_others(site)) if c is not None]
    where = (f": {closed[0]} (mode {stat.S_IMODE(os.stat(closed[0]).st_mode):o}) is closed to other users"
             if closed else "")
    return None, (f"Python and torch cannot run as uid {uid}, a user with no rights of its own{where} ({why}). "
                  "Learner code is never given the right to read every file instead. Make the interpreter and the "
                  f"virtual environment readable by all users (e.g. chmod o+x {closed[0] if closed else 'FOLDER'}, "
                  "or a Python installed outside /root), or install bubblewrap (apt-get install bubblewrap)")


def peak_memory_mb() -> tuple[float, float]:
    """(this process's peak resident memory, the largest of its finished descendants'), MB: what `course grade`
    and `course verify` print at their end. The first is the process's own high-water mark (VmHWM); a child's
    count starts from its parent's (getrusage carries it over exec), so the second is at least the parent's
    size when it started the child."""
    import resource
    status = Path("/proc/self/status")
    hwm = next((line.split()[1] for line in status.read_text().splitlines() if line.startswith("VmHWM:")),
               None) if status.is_file() else None
    own = int(hwm) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
