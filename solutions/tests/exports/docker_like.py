"""Run a command confined as Docker confines a container by default, with no container runtime: the
Gradescope emulation of test_gradescope.py.

What Docker gives a container's root by default, and what this gives the command:

* **14 capabilities** (Docker's default list, ``DOCKER_CAPS``), none of CAP_SYS_ADMIN: the bounding set
  is cut to them before the command is executed (``setpriv --bounding-set``), so root keeps only those.
* **Docker's default seccomp rules** for a process without CAP_SYS_ADMIN, as far as namespaces and
  mounts go: unshare, setns, mount, umount2, pivot_root and clone with a CLONE_NEW* flag fail with EPERM,
  clone3 with ENOSYS (``DENIED``). bubblewrap then cannot start ("No permissions to create new
  namespace"), as in a real container.
* **A read-only cgroup file system** that shows the container's memory limit (``memory.max``, 768 MB:
  Gradescope's default) and lets no cgroup be made: run in a mount namespace of its own (``wrap``).
* **Python readable by every uid**, as Gradescope's /usr/bin/python3 is: each folder closed to others on
  the way to the interpreter, the venv or the checkout (pyenv under /root, a clone in a mode-700
  temporary folder) is covered, in the mount namespace only, by an open one holding the same entries,
  each with its own mode.

``python docker_like.py COMMAND...`` (``wrap(COMMAND, keep, scratch)`` gives the whole argv)
loads the filter and executes the command; run it as root.
"""
from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

DOCKER_CAPS = ("chown", "dac_override", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
               "net_bind_service", "net_raw", "sys_chroot", "mknod", "audit_write", "setfcap")
DENIED = ("unshare", "setns", "mount", "umount2", "pivot_root")
GRADESCOPE_MEMORY = 768 * 1024**2


def docker_filter() -> bytes:
    """The BPF program of Docker's namespace and mount rules (clone's CLONE_NEW* flags and clone3 too),
    compiled by libseccomp as the grader's own filter is."""
    from course_admin.sandbox.confine import build_filter

    return build_filter(DENIED)


def _closed_folders(paths: list[Path]) -> list[Path]:
    """Every folder closed to other users (no ``o+x``) on the way to ``paths``, ``paths`` included,
    outermost first (e.g. /root for pyenv, and a checkout cloned into a mode-700 temporary folder)."""
    closed = set()
    for path in paths:
        path = Path(os.path.realpath(path))
        for folder in [*reversed(path.parents), path]:
            try:
                mode = os.stat(folder).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                closed.add(folder)
    return sorted(closed, key=lambda f: len(f.parts))


def _opened(folder: Path, stage: Path) -> list[str]:
    """Shell lines that cover ``folder`` with an open tmpfs holding what it holds when they run: the folder is
    bound to ``stage`` (an empty folder outside it), then each entry is bound back from there with its own
    mode, and links are made again. The entries are listed by the shell, not here: a file another process
    removes between the listing and its mount is left out, where a listing made earlier failed the mount."""
    q = shlex.quote
    held, into = q(str(stage)), q(str(folder))
    return [f"mkdir -p {held}", f"mount --bind {into} {held}",
            f"mount -t tmpfs -o size=1m,mode=755 opened {into}",
            f"for e in {held}/* {held}/.[!.]* {held}/..?*; do",
            f'  t={into}/"${{e##*/}}"',
            '  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$t"',
            '  elif [ -d "$e" ]; then mkdir "$t"; mount --bind "$e" "$t" || [ ! -e "$e" ]',
            '  elif [ -e "$e" ]; then touch "$t"; mount --bind "$e" "$t" || [ ! -e "$e" ]',
            "  fi",
            "done"]


def opening(keep: list[Path], scratch: Path) -> list[str]:
    """Shell lines, for a mount namespace of its own, that open every folder closed to others on the way
    to Python and to ``keep`` (through ``scratch``, an empty folder open to all): what lets another uid
    run this venv's Python (the hub test's local users too)."""
    from course_admin.sandbox.procs import python_paths

    lines: list[str] = []
    for k, folder in enumerate(_closed_folders([*python_paths(), *keep])):
        lines += _opened(folder, scratch / str(k))
    return lines


def unshare_works() -> bool:
    """Whether this process may make a mount namespace of its own (``unshare --mount``: root, and allowed here)."""
    try:
        return subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def in_mount_namespace(lines: list[str], command: list[str]) -> list[str]:
    """The argv that runs the shell ``lines`` in a mount namespace of its own (stopping at the first that fails),
    then executes ``command`` there."""
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
            "\n".join(["set -e", *lines, 'exec "$@"']), "sh", *command]


def with_python_open(command: list[str], keep: list[Path], scratch: Path) -> list[str]:
    """The argv that runs ``command`` where every folder closed to others on the way to Python and to ``keep``
    is open (``opening``), and nothing else is changed: what another uid needs to run this venv's Python."""
    return in_mount_namespace(opening(keep, scratch), command)


def wrap(command: list[str], keep: list[Path], scratch: Path, memory_bytes: int = GRADESCOPE_MEMORY) -> list[str]:
    """The argv that runs ``command`` in a mount namespace of its own (read-only cgroup file system with
    the container's memory limit; every folder closed to others on the way to Python and to ``keep``
    opened, through ``scratch``, an empty folder open to all), under Docker's capabilities and seccomp
    rules."""
    cgroup = ["mount -t tmpfs -o size=1m,mode=755 cgroup /sys/fs/cgroup",
              f"printf %s {memory_bytes} > /sys/fs/cgroup/memory.max",
              "mount -o remount,ro,size=1m tmpfs /sys/fs/cgroup"]
    confined = [sys.executable, str(Path(__file__).resolve()), *command]  # main(): Docker's rules, then command
    return in_mount_namespace(cgroup + opening(keep, scratch), confined)


def main(argv: list[str]) -> int:
    """Load Docker's rules and execute ``argv`` with Docker's capabilities only."""
    from course_admin.sandbox.confine import load_filter

    load_filter(docker_filter())  # with NO_NEW_PRIVS, which Docker leaves off: nothing here needs setuid
    caps = "-all," + ",".join(f"+{c}" for c in DOCKER_CAPS)
    os.execvp("setpriv", ["setpriv", "--bounding-set", caps, "--inh-caps", "-all", "--", *argv])
    return 127  # unreachable: execvp replaces this process or raises


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
