"""The warm sandbox (course_admin/sandbox/warm.py, zygote.py): one learner's run must leave nothing that the next
learner's run can see, and a learner who attacks the fork server harms only their own run.

Each test grades small hand-made runs: a learner module ``course_lib/hostile.py`` whose import does the
planted harm, and a spec whose one probe calls its ``look()``, which reports what the run sees of the
sandbox (other processes, /tmp, System V IPC, open sockets, the zygote's fds, its own limits). Planted:
a zygote whose sweep does nothing lets the next learner see all of it, so these tests can fail.
Needs bubblewrap (skipped where it does not work).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from course_lib.provided.layout import LAYOUT

from .. import course_cli
from ..sandbox_runs import CLEAN, SHARED_NAMESPACES, UNFILTERED, clean_view, planted_zygote, run, warm_cls  # noqa: F401

REPO = LAYOUT.root
pytestmark = [
    pytest.mark.skipif(not (REPO / "solutions" / "course_admin" / "sandbox" / "warm.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]

LEAVES_EVERYTHING = '''
import ctypes, os, time
if os.fork() == 0:  # a daemon in a session of its own
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
if os.fork() == 0:  # a process in user and PID namespaces of its own (where the kernel allows them)
    if ctypes.CDLL(None).unshare(0x10000000 | 0x20000000) == 0 and os.fork() == 0:  # CLONE_NEWUSER|NEWPID
        time.sleep(600)
    time.sleep(600)
open("/tmp/left_by_a", "w").write("a")
for _line in open("/proc/self/mountinfo"):  # and in bwrap's folders on the way to a venv under /tmp
    if _line.split()[4].startswith("/tmp/"):
        open(os.path.join(os.path.dirname(_line.split()[4]), "left_by_a"), "w").write("a")
os.makedirs("/tmp/locked/inner")
os.chmod("/tmp/locked", 0)
ctypes.CDLL(None).shmget(0x5eed, 4096, 0o1000 | 0o666)  # IPC_CREAT
_nr = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)  # add_key, keyctl
if _nr:  # a key in the user, user-session and persistent keyrings
    _libc = ctypes.CDLL(None)
    for _ring in (-4, -5, _libc.syscall(_nr[1], 22, -1, -2)):
        _libc.syscall(_nr[0], b"user", b"left_by_a", b"a", 1, _ring)
time.sleep(0.2)
'''

# What a run can change in the zygote (same uid: prlimit, setpriority, sched_setaffinity, its /proc
# files), which every later child would inherit.
ZYGOTE_HARMS = {
    "nice": "import os\nos.setpriority(os.PRIO_PROCESS, os.getppid(), 19)\n",
    "stack": "import os, resource\nresource.prlimit(os.getppid(), resource.RLIMIT_STACK, (1 << 20, 1 << 20))\n",
    "cpus": "import os\nos.sched_setaffinity(os.getppid(), {min(os.sched_getaffinity(0))})\n",
    "oom": "import os\nopen(f'/proc/{os.getppid()}/oom_score_adj', 'w').write('1000')\n",
}


def test_a_run_sees_a_clean_sandbox_with_its_limits(warm_cls):
    w = warm_cls()
    result, seen, log = run(w, "", wall=30.0)
    assert result.returncode == 0 and seen is not None, log
    assert clean_view(seen) == CLEAN
    assert seen["as"] == 2 * 1024**3 and seen["cpu"] == 35  # the run's own limits, wall + 5 s of CPU


def test_what_a_learner_leaves_is_gone_for_the_next(warm_cls):
    w = warm_cls()
    result, seen, log = run(w, LEAVES_EVERYTHING)
    assert result.returncode == 0 and seen is not None, log
    assert seen["others"] >= 1 and seen["tmp"] >= 2 and seen["ipc"] == 1  # the harm was done
    assert seen["keys"] == 0  # the seccomp filter denies keyrings (confine.py); the sweep is a second line
    result, seen, log = run(w, "")
    assert result.returncode == 0, log
    assert clean_view(seen) == CLEAN
    assert w.starts == 1  # swept, not thrown away


def test_without_the_filter_the_sweep_still_clears_keyrings(warm_cls, tmp_path):
    """A planted zygote whose children load no filter: the keys are made, and the sweep clears them."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("keyrings are swept on x86_64 and aarch64 only")
    w = planted_zygote(warm_cls, tmp_path, UNFILTERED)
    result, seen, log = run(w, LEAVES_EVERYTHING)
    assert result.returncode == 0 and seen["keys"] >= 3, log
    result, seen, log = run(w, "")
    assert result.returncode == 0 and clean_view(seen) == CLEAN, log


def test_planted_zygote_that_does_not_sweep_is_caught(warm_cls, tmp_path):
    """The planted wrong fork server: no filter, no namespaces of a run's own, a sweep that does nothing; the
    next learner sees the leftovers."""
    w = planted_zygote(warm_cls, tmp_path, UNFILTERED, SHARED_NAMESPACES, ('def sweep(base: Baseline) -> str:\n',
                                                        'def sweep(base: Baseline) -> str:\n    return ""\n'))
    run(w, LEAVES_EVERYTHING)
    result, seen, log = run(w, "")
    assert result.returncode == 0, log
    assert clean_view(seen) != CLEAN
    assert seen["others"] >= 1 and seen["tmp"] >= 2 and seen["ipc"] == 1
    assert seen["keys"] >= 3 or platform.machine() not in ("x86_64", "aarch64")


SIGNALS = {"kill": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(1)\n",
           "stop": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",
           "kill all": "import contextlib, os, signal\nwith contextlib.suppress(ProcessLookupError):\n"
                       "    os.kill(-1, signal.SIGKILL)\n"}  # ESRCH when it reached no one


@pytest.mark.parametrize("harm", sorted(SIGNALS))
def test_signals_from_a_run_do_not_reach_the_zygote(warm_cls, harm):
    """The zygote is the sandbox's pid 1: a signal from inside that it does not handle never arrives, so the
    run goes on, ends well and the sandbox stays up for the next learner."""
    w = warm_cls()
    result, seen, log = run(w, SIGNALS[harm], wall=4.0)
    assert result.returncode == 0 and seen is not None, (result, log)
    result, seen, log = run(w, "")
    assert result.returncode == 0 and clean_view(seen) == CLEAN, log
    assert w.starts == 1


@pytest.mark.parametrize("harm, expect", [("kill", "ended"), ("stop", "timed out"), ("kill all", "ended")])
def test_planted_zygote_beside_an_init_is_reached_and_thrown_away(warm_cls, harm, expect):
    """Planted: the zygote under bubblewrap's own init (as before it was pid 1). The signal reaches it; the
    sandbox is thrown away, so that only the attacker's run suffers."""
    from course_admin.sandbox import warm

    class BesideInit(warm.WarmSandbox):
        PID_1 = False

    w = warm_cls(cls=BesideInit)
    result, _, log = run(w, SIGNALS[harm], wall=4.0)
    if expect == "timed out":
        assert result.timed_out, (result, log)
    else:
        assert result.returncode == -9 and not result.timed_out, (result, log)
    result, seen, log = run(w, "")
    assert result.returncode == 0 and clean_view(seen) == CLEAN, log
    assert w.starts == 2


def test_a_box_outside_the_spool_is_refused(warm_cls, tmp_path):
    from course_admin.sandbox import cold

    w = warm_cls()
    with pytest.raises(ValueError, match="spool"):
        w.run(tmp_path, 0, cold.Limits(), tmp_path / "log")


def _zygote_harm(w, harm: str) -> tuple[dict, dict]:
    """(what a run saw before the harm, what the run after it saw)."""
    _, before, log = run(w, "")
    assert before is not None, log
    if harm == "cpus" and before["cpus"] < 2:
        pytest.skip("one CPU: an affinity cannot be narrowed")
    result, seen, log = run(w, ZYGOTE_HARMS[harm])
    assert result.returncode == 0 and seen is not None, log
    result, after, log = run(w, "")
    assert result.returncode == 0 and after is not None, log
    return before, after


@pytest.mark.parametrize("harm", sorted(ZYGOTE_HARMS))
def test_what_a_run_changes_in_the_zygote_is_not_inherited(warm_cls, harm):
    w = warm_cls()
    before, after = _zygote_harm(w, harm)
    assert after[harm] == before[harm]
    assert w.starts == 2  # thrown away after the harm


@pytest.mark.parametrize("harm", sorted(ZYGOTE_HARMS))
def test_planted_zygote_that_does_not_check_itself_is_caught(warm_cls, harm, tmp_path):
    """The planted wrong fork server skips the check of its own attributes: the next run inherits the harm."""
    w = planted_zygote(warm_cls, tmp_path, ("    if attributes() != base.attributes:\n", "    if False:\n"))
    before, after = _zygote_harm(w, harm)
    assert after[harm] != before[harm]
    assert w.starts == 1


TRACEME = "import ctypes, os, signal\nctypes.CDLL(None).ptrace(0, 0, None, None)\nos.kill(os.getpid(), signal.SIGUSR1)\n"


def test_a_run_cannot_make_the_zygote_its_tracer(warm_cls):
    """PTRACE_TRACEME is denied by the filter: the signal that follows ends the run as it would anywhere."""
    w = warm_cls()
    result, _, log = run(w, TRACEME, wall=3.0)
    assert result.returncode == -10 and not result.timed_out, (result, log)  # SIGUSR1
    result, seen, log = run(w, "")
    assert result.returncode == 0 and clean_view(seen) == CLEAN, log
    assert w.starts == 1


def test_planted_unfiltered_run_that_makes_the_zygote_its_tracer_harms_only_itself(warm_cls, tmp_path):
    """Planted: children without the filter. The run stops, is not taken for ended, and runs out of time."""
    w = planted_zygote(warm_cls, tmp_path, UNFILTERED)
    result, _, log = run(w, TRACEME, wall=3.0)
    assert result.timed_out, (result, log)
    result, seen, log = run(w, "")
    assert result.returncode == 0 and clean_view(seen) == CLEAN, log


def test_a_zygote_that_died_between_runs_costs_the_next_run_nothing(warm_cls):
    """Not the next learner's fault: their run goes to a new sandbox and is graded in full."""
    import signal

    from course_admin.sandbox import reaper

    w = warm_cls()
    assert run(w, "")[0].returncode == 0
    zygotes = [p for p in reaper.descendants(w.proc.pid)
               if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[3:4] == [b"/sandbox/_zygote/zygote.py"]]
    assert len(zygotes) == 1
    os.kill(zygotes[0], signal.SIGKILL)
    result, seen, log = run(w, "")
    assert result.returncode == 0 and seen is not None and clean_view(seen) == CLEAN, log
    assert w.starts == 2


@pytest.mark.slow
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_warm_and_cold_grade_every_chapter_alike(tmp_path):
    """The whole course, each chapter its own assignment, graded by the correct learner, and every third chapter
    by a wrong one too (chapter 02's unscaled scores, which every later chapter builds on, on 02, 05 and 08; the
    stubs as released on 03 and 06): the same grades.csv, byte for byte, from the warm sandbox and from a new
    sandbox per run (COURSE_GRADE_WARM=0). Thirteen submissions, not all three learners on every chapter (24):
    each cold run starts a sandbox that imports torch, and what the test is for, that a chapter grades alike
    both ways, correct or not, needs every chapter once and each kind of answer (measured: 123 s here before)."""
    import os
        
    from .. import planted as plant

    from course_admin.sandbox import procs
    from course_lib.provided import chapters
    from course_lib.provided.layout import modules_for

    if not procs.bwrap_works()[0]:
        pytest.skip("bubblewrap does not work here")
    numbers = chapters.available()
    learners = {"right": lambda m: (LAYOUT.reference / m).read_text(),
                "unscaled": lambda m: plant.NO_SCALE if m == "attention.py" else (LAYOUT.reference / m).read_text(),
                "stubs": lambda m: (LAYOUT.course_lib / m).read_text()}
    wrong = {1: "unscaled", 2: "stubs"}  # by the chapter's place: 02, 05, 08 unscaled; 03, 06 the stubs
    subs = tmp_path / "subs"
    for name, text in learners.items():
        for number in [n for i, n in enumerate(numbers) if name == "right" or wrong.get(i % 3) == name]:
            package = subs / f"{name}_ch{number}" / "course_lib"
            package.mkdir(parents=True)
            for module in modules_for(number):
                (package / module).write_text(text(module))
    tables = {}
    for way in ("1", "0"):
        out = tmp_path / f"out{way}"
        if way == "0":  # the chapters prepared by the first run: only the sandbox differs
            shutil.copytree(tmp_path / "out1" / ".prepared", out / ".prepared")
        proc = course_cli.run(["grade", str(subs), "--out", str(out),
                               "--no-notebooks", "--jobs", "2", "--quiet"], cwd=REPO, capture_output=True, text=True,
                              timeout=900, env={**os.environ, "COURSE_GRADE_WARM": way})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        tables[way] = (out / "grades.csv").read_bytes()
    assert tables["1"] == tables["0"]
    rows = plant.read_csv(tmp_path / "out1" / "grades.csv")
    share = {}  # the share of their chapters' points each learner scores
    for name in learners:
        mine = [r for r in rows if r["learner"] == name and r["kind"] == "course_lib"]  # no model: not the sandbox
        share[name] = sum(float(r["points"]) for r in mine) / sum(float(r["max_points"]) for r in mine)
    assert share["stubs"] < share["unscaled"] < share["right"] == 1.0, share  # three different tables
