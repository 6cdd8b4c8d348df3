"""A busy machine never costs a learner a point (issue 25, part 4): a chapter stopped on wall time that had CPU
to spare and was runnable (starved) is run again, bounded, and said on the instructor's stderr; code that
loops forever still loses its points within the limit, and code that sleeps forever gains nothing.

Two kinds of test. Beside real CPU hogs (spinning processes started here, killed in a ``finally``), a class
is graded with `course grade` as an instructor would; hogs and grader share one CPU (``ONE_CPU``, inherited by the
grader's sandboxes), three hogs on it as on every core of a busy machine, so the suite's other worker keeps the
other cores (spread over both cores, six hogs slowed whatever test ran beside this one four times over). And, deterministically, one learner is graded in this
process with the run's meter (``reaper.usage``) either as it is or made to say that every second of wall
time was spent waiting in the run queue: what a machine that starves the run looks like to the grader.
No assert here is on how long anything took.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_lib.provided.layout import LAYOUT

from .. import course_cli
from .. import planted as plant

pytestmark = [
    pytest.mark.skipif(not (LAYOUT.root / "solutions" / "course_admin" / "grading" / "grade.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
ONE_CPU = {CPUS[-1]} if len(CPUS) > 1 else None  # the CPU hogs and grader share (None: all there is)
HOGS = 3 * (1 if ONE_CPU else max(len(CPUS), 1))  # spinning processes beside the grader: three a core it has
TIMEOUT = 3  # s of CPU per chapter: a correct chapter 02 needs well under 1 s of CPU in the warm sandbox


def pinned() -> None:
    """In a child before it runs: on ONE_CPU alone (its children inherit it)."""
    if ONE_CPU:
        os.sched_setaffinity(0, ONE_CPU)


def start_hogs(count: int) -> list[subprocess.Popen]:
    """``count`` processes that spin on a CPU until killed (each in a session of its own), on ONE_CPU."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True, preexec_fn=pinned)
            for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        try:
            os.killpg(hog.pid, signal.SIGKILL)
        except OSError:
            pass
        hog.wait()


def burner(seconds: float) -> str:
    """Correct attention that first spins for ``seconds`` of its process's CPU time (slow, honest code)."""
    once = f"_BURN_ONCE = [{seconds!r}]\n"
    body = ("    if _BURN_ONCE:\n        import time as _time\n        _end = _time.process_time() + _BURN_ONCE.pop()\n"
            "        while _time.process_time() < _end:\n            pass\n")
    return plant._prefix(once).replace(plant.BODY, body + plant.BODY, 1)


def points(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """(points, max points) of each learner's course_lib rows."""
    out: dict[str, list[float]] = {}
    for r in rows:
        if r["kind"] == "course_lib":
            got = out.setdefault(r["learner"], [0.0, 0.0])
            got[0] += float(r["points"])
            got[1] += float(r["max_points"])
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.slow
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_correct_learners_beside_cpu_hogs_keep_full_marks_and_a_loop_still_loses(tmp_path: Path) -> None:
    """Three spinning processes on the CPU of `course grade --jobs 2`: two correct learners keep every point (one
    of them needs 1.5 s of CPU, half its budget: more than the 3 s of wall time at a quarter of a CPU, so it is
    starved and run again), a learner whose code loops forever (ignoring every signal it can) still scores 0,
    told it ran out of time."""
    learners = plant.planted(0, tmp_path / "gradebook.sqlite", tmp_path / "victim")
    slow = {**learners["correct"], "files": {**learners["correct"]["files"], "course_lib/attention.py": burner(TIMEOUT / 2)}}
    chosen = {"ann": learners["correct"], "bob": slow, "loop": learners["infinite_loop"]}
    plant.write(chosen, tmp_path / "subs")
    from course_admin.grading import plan
    for number in plan.chapters_to_run(["02"]):  # prepared before the hogs start: this test is about the sandbox
        plan.save_prepared(number, tmp_path / "out" / ".prepared")
    hogs = start_hogs(HOGS)
    try:
        proc = course_cli.run(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--jobs", "2",
                               "--timeout", str(TIMEOUT), "--no-notebooks", "--memory", "1536", "--trust-learners",
                               "--chapters", "ch02"], cwd=LAYOUT.root, capture_output=True, text=True, timeout=3600,
                              cpus=ONE_CPU)
    finally:
        stop_hogs(hogs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = plant.read_csv(tmp_path / "out" / "grades.csv")
    got = points(rows)
    for name in ("ann", "bob"):
        assert got[name][0] == got[name][1] > 0, (name, got, proc.stderr)
    assert got["loop"][0] == 0, got
    messages = [r["message"] for r in rows if r["learner"] == "loop" and r["kind"] == "course_lib"]
    assert any(f"ran out of time, using its {TIMEOUT} s of CPU" in m for m in messages), (messages[:3], proc.stderr)
    print(proc.stderr)  # the instructor's log: which chapters were starved and run again (pytest -s shows it)


# ---------------------------------------------------------------- deterministic: one learner, in this process
def sleeper(seconds: float) -> str:
    """Correct attention that sleeps ``seconds`` (using no CPU) in its first call of each process."""
    once = f"_SLEEP_ONCE = [{seconds!r}]\n"
    body = "    if _SLEEP_ONCE:\n        import time as _time\n        _time.sleep(_SLEEP_ONCE.pop())\n"
    return plant._prefix(once).replace(plant.BODY, body + plant.BODY, 1)


def grade_one(tmp_path: Path, attention: str, budget: float, starve: bool, monkeypatch) -> list:
    """Chapter 02's rows of one learner graded in this process with ``budget`` s per chapter; ``starve``:
    the run's meter says that the run spent every second of wall time waiting in the run queue."""
    from course_admin.grading import grade
    from course_admin.intake.submissions import Reader
    from course_admin.records.rows import Options
    from course_admin.sandbox import cold, reaper, warm

    if starve:
        real = reaper.usage
        monkeypatch.setattr(reaper, "usage", lambda pid: dataclasses.replace(real(pid), waiting_s=time.monotonic()))
    (tmp_path / "kim" / "course_lib").mkdir(parents=True)
    (tmp_path / "kim" / "course_lib" / "attention.py").write_text(attention)
    work = tmp_path / "work"
    work.mkdir()
    try:
        return grade.course_lib_rows(Reader(tmp_path / "kim"), ["02"], Options(isolation=cold.detect(),
                                     timeout_s=budget, notebooks=False), work)["02"]
    finally:
        warm.shutdown()  # no sandbox of this test process outlives the test


@pytest.mark.slow
def test_a_starved_chapter_is_run_again_and_keeps_its_points(tmp_path: Path, monkeypatch, capsys) -> None:
    """Stopped at its wall limit with CPU to spare while (so says the meter) waiting for a CPU: run again with
    four times the wall time, where the 3 s it needs fit; full marks, and the instructor is told."""
    rows = grade_one(tmp_path, sleeper(3.0), 2, True, monkeypatch)
    assert rows and all(r.status == "pass" for r in rows), [r.message for r in rows if r.status != "pass"][:3]
    said = capsys.readouterr().err
    assert "kim, chapter 02: starved by a busy machine, not slow" in said, said
    assert "with 8 s of wall time (rerun 1 of 2)" in said, said


def test_a_sleeper_loses_its_points_at_once_with_a_message_that_says_it_waited(tmp_path: Path, monkeypatch,
                                                                               capsys) -> None:
    """The same code measured as it is: it waited for nothing but its own sleep, so it is not starved, and is
    not run again; the case it slept in fails saying so, and the chapter's later cases were not run."""
    rows = grade_one(tmp_path, sleeper(987654.0), 5, False, monkeypatch)
    assert all(r.points == 0 for r in rows if r.component != "built from scratch"), [r.message for r in rows][:3]
    assert any("did not finish within the time limit (5 s per chapter): it waited (sleeping" in r.message
               for r in rows), [r.message for r in rows][:3]
    assert "starved" not in capsys.readouterr().err


@pytest.mark.slow
def test_reruns_are_bounded_and_then_the_chapter_scores_0(tmp_path: Path, monkeypatch, capsys) -> None:
    """Starved for ever (a sleep that never ends, measured as waiting for a CPU): run three times in all,
    then 0 with a message that says the machine was too busy, and the instructor is told to regrade."""
    from course_admin.grading import sandboxed

    monkeypatch.setattr(sandboxed, "STARVED_WALL", (1, 1.5, 2))  # 2 + 3 + 4 s instead of 2 + 8 + 32
    rows = grade_one(tmp_path, sleeper(987654.0), 2, True, monkeypatch)
    assert all(r.points == 0 for r in rows if r.component != "built from scratch"), [r.message for r in rows][:3]
    assert any("run 3 times, the last for 4 s" in r.message and "too busy" in r.message for r in rows), \
        [r.message for r in rows][:3]
    said = capsys.readouterr().err
    assert said.count("starved by a busy machine") == 3, said
    assert "still starved after 2 reruns: its remaining cases score 0" in said, said
