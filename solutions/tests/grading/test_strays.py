"""The strays check of test_grading.py (solutions/tests/strays.py) can fail: a planted process that a grading
would have left behind (an orphan with a marker in its command line) is found, and the same process while its
test still owns it (as another worker's running batch owns its processes) is not. The planted processes carry a
marker of their own, so that test_grading.py, perhaps running beside this on another worker, never sees them."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from ..strays import strays

MARKER = f"planted-stray-{os.getpid()}"
SLEEPER = f"import time; time.sleep(60)  # {MARKER}"


def found(pid: int) -> bool:
    return any(line.startswith(f"{pid}: ") for line in strays((MARKER.encode(),)))


def test_a_process_a_grading_left_behind_is_a_stray_and_a_running_ones_is_not() -> None:
    owned = subprocess.Popen([sys.executable, "-c", SLEEPER])            # a child of this test: a live batch's
    reader, writer = os.pipe()
    starter = subprocess.Popen([sys.executable, "-c",                    # starts the sleeper and exits: an orphan
                                "import subprocess, sys, os; "
                                f"p = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]); "
                                f"os.write({writer}, str(p.pid).encode())"], pass_fds=(writer,))
    starter.wait(timeout=60)
    os.close(writer)
    orphan = int(os.read(reader, 32))
    os.close(reader)
    try:
        deadline = time.monotonic() + 10
        while not found(orphan) and time.monotonic() < deadline:         # until its command line reads
            time.sleep(0.1)
        assert found(orphan), strays((MARKER.encode(),))
        assert not found(owned.pid)
    finally:
        owned.kill()
        os.kill(orphan, 9)
        owned.wait(timeout=30)
