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
* **Python readable by every uid**, as Gradescope's /usr/bin/python3 is: where this machine's interpreter
  lies under a folder closed to others (pyenv under /root, mode 700), that folder is opened in the
  mount namespace only, its other files hidden.

``python docker_like.py COMMAND...`` (``wrap(COMMAND, keep, scratch)`` gives the whole argv)
loads the filter and executes the command; run it as root.
"""
from __future__ import annotations

import os
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


def _closed_folder() -> Path | None:
    """The folder closed to other users on the way to this interpreter, if any (e.g. /root)."""
    from course_admin.sandbox.procs import closed_to_others, python_paths

    exe, prefix, site = python_paths()
    for path in (exe, prefix, site):
        closed = closed_to_others(path)
        if closed is not None:
            return closed
    return None


def wrap(command: list[str], keep: list[Path], scratch: Path, memory_bytes: int = GRADESCOPE_MEMORY) -> list[str]:
    """The argv that runs ``command`` in a mount namespace of its own (read-only cgroup file system with
    the container's memory limit; the closed folder on the way to Python opened, ``keep`` paths in it
    bound back through ``scratch``, an empty folder), under Docker's capabilities and seccomp rules."""
    lines = ["set -e", "mount -t tmpfs -o size=1m,mode=755 cgroup /sys/fs/cgroup",
             f"printf %s {memory_bytes} > /sys/fs/cgroup/memory.max",
             "mount -o remount,ro,size=1m tmpfs /sys/fs/cgroup"]
    closed = _closed_folder()
    if closed is not None:
        from course_admin.sandbox.procs import python_paths

        stage = scratch
        firsts = sorted({closed / Path(p).resolve().relative_to(closed).parts[0]
                         for p in [*python_paths(), *keep] if Path(p).resolve().is_relative_to(closed)
                         and Path(p).resolve() != closed})
        for i, first in enumerate(firsts):
            lines += [f"mkdir -p {stage}/{i}", f"mount --bind '{first}' {stage}/{i}"]
        lines.append(f"mount -t tmpfs -o size=1m,mode=755 opened '{closed}'")
        for i, first in enumerate(firsts):
            lines += [f"mkdir -p '{first}'", f"mount --bind {stage}/{i} '{first}'"]
    lines.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "\n".join(lines), "sh",
            sys.executable, str(Path(__file__).resolve()), *command]


def main(argv: list[str]) -> int:
    """Load Docker's rules and execute ``argv`` with Docker's capabilities only."""
    from course_admin.sandbox.confine import load_filter

    load_filter(docker_filter())  # with NO_NEW_PRIVS, which Docker leaves off: nothing here needs setuid
    caps = "-all," + ",".join(f"+{c}" for c in DOCKER_CAPS)
    os.execvp("setpriv", ["setpriv", "--bounding-set", caps, "--inh-caps", "-all", "--", *argv])
    return 127  # unreachable: execvp replaces this process or raises


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
