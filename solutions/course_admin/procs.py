"""Which isolation learner code gets: the bubblewrap probe, the switch, the unprivileged uid of the fallback.

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

Ending everything a run started (process trees, cgroups, stale scratch) is reaper.py's job.
"""
from __future__ import annotations

import functools
import os
import shutil
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
