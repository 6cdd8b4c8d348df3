"""`course grade --jobs N` forks its workers (course_admin/grading/batch.py): the process they are forked from
keeps torch to one thread from its start, so that OpenMP never starts its threads there (a child forked after they
started hangs in its first parallel operation), and each worker takes back the thread count the parent had.

One fresh Python a case (this pytest process has run torch on threads of its own): it does what `course grade`
does (keep to one thread, prepare with a parallel-sized operation, grade in a pool of two), and prints what it saw.
The planted process does not keep to one thread: the same operation starts OpenMP's threads in it, which is why
its workers would be spawned (a process that is not kept is never forked from).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from course_lib.provided.layout import LAYOUT

pytestmark = [
    pytest.mark.skipif(not (LAYOUT.root / "solutions" / "course_admin" / "grading" / "batch.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux alone"),
    pytest.mark.grading,
]

SCRIPT = r"""
import json, os, sys
import torch
from course_admin.grading import batch
from course_admin.intake.submissions import Submission
from course_admin.records.rows import GradeRow, Options

def tasks():
    return len(os.listdir("/proc/self/task"))

def grade(sub, numbers, opts):  # in a worker: a parallel-sized operation, then what the worker is
    torch.ones(1 << 22).exp().sum()
    seen = json.dumps({"threads": torch.get_num_threads(), "forked": bool(batch._KEPT)})
    return batch.LearnerGrade(sub.learner, sub.fingerprint, "", [GradeRow("02", "course_lib", "case", 1.0, 1.0,
                              "pass", seen, "none")], chapters=["02"])

kept = sys.argv[1] == "kept"
if kept:
    batch.keep_to_one_thread()
before = tasks()
torch.ones(1 << 22).exp().sum()  # what preparing a chapter does: split among threads, were there more than one
out = {"method": batch._start_method(), "started": tasks() - before, "had": batch._KEPT[:1], "workers": []}
if kept:
    got = []
    batch.run_batch([Submission(n, None, chapter="02", fingerprint=n) for n in ("ann", "bob", "cy")], ["02"],
                    Options(), 2, got.append, grade)
    out["workers"] = [json.loads(g.rows[0].message) for g in got]
print(json.dumps(out))
"""


def seen(how: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}  # as `course grade` on two cores has
    done = subprocess.run([sys.executable, "-c", SCRIPT, how], cwd=LAYOUT.root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_kept_process_forks_workers_that_take_back_its_threads() -> None:
    got = seen("kept")
    assert got["method"] == "fork" and got["started"] == 0 and got["had"] == [2], got
    assert got["workers"] == [{"threads": 2, "forked": True}] * 3, got


def test_planted_a_process_not_kept_starts_openmps_threads_and_spawns() -> None:
    got = seen("planted")
    assert got["method"] == "spawn" and got["started"] >= 1, got
