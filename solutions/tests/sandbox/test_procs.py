"""Process control of the grader (procs.py): the isolation switch, and killing a whole process tree."""
from __future__ import annotations

import subprocess
import time

import pytest

from course_admin.sandbox import procs, reaper


def test_isolation_switch_and_a_forced_bwrap_that_cannot_run(monkeypatch):
    monkeypatch.setattr(procs, "bwrap_works", lambda: (False, "bwrap is not installed"))
    monkeypatch.setenv(procs.SWITCH, "rlimits")
    assert procs.detect("bwrap") == "rlimits"  # the switch wins
    monkeypatch.delenv(procs.SWITCH)
    assert procs.detect() == "rlimits"
    with pytest.raises(RuntimeError, match="bwrap is not installed"):
        procs.detect("bwrap")


def test_kill_tree_ends_descendants_in_other_sessions():
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 301 & sleep 302 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(reaper.descendants(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    victims = reaper.descendants(proc.pid)
    assert len(victims) >= 2
    reaper.kill_tree(proc.pid)
    proc.wait(timeout=10)
    time.sleep(0.1)
    assert not [p for p in victims if reaper._alive(p)]
