"""What a grading left running: the processes of planted learners, grader children and zygotes that outlived the
`course grade` that started them (solutions/tests/grading/test_grading.py asserts there are none).

Tests run on two workers, so another test's batch may be running while one looks: its processes descend from the
command or the test that runs it, and are not strays. What a grading left behind has lost that ancestry (an orphan
is the child of init).
"""
from __future__ import annotations

import time
from pathlib import Path

STRAY_MARKERS = (b"987654", b"_grader_child", b"_zygote/zygote.py")
OWNERS = (b"pytest", b"xdist", b"course_lib.provided.cli")


def _cmdline_and_parent(pid: int) -> tuple[bytes, int]:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        parent = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return b"", 0
    return cmd, parent


def _owned(pid: int) -> bool:
    """Whether a live test run or `course grade` is among ``pid``'s ancestors."""
    seen: set[int] = set()
    _, pid = _cmdline_and_parent(pid)
    while pid > 1 and pid not in seen:
        seen.add(pid)
        cmd, parent = _cmdline_and_parent(pid)
        if any(owner in cmd for owner in OWNERS):
            return True
        pid = parent
    return False


def strays(markers: tuple[bytes, ...] = STRAY_MARKERS) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if any(m in cmd for m in markers) and not _owned(int(entry.name)):
            found.append(entry.name + ": " + repr(cmd.replace(b"\0", b" ")[:120]))
    return found


def wait_no_strays(seconds: float = 5.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := strays()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
