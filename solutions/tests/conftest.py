"""What the whole instructor suite shares: one folder of prepared chapters for every grading run it starts.

A `course grade` run computes every chapter's expected and known-wrong outputs before it grades anyone (about
12 s here, course_admin/grading/plan.py), into its own `--out`; a hundred tests grading into a hundred fresh
folders paid that a hundred times. $COURSE_GRADE_CACHE (plan.SHARED) lets them share it: set here, in the
controlling process before pytest-xdist starts its workers (they and every `course grade` they start inherit
it), to a folder made for this run and removed at its end. The files are named by a fingerprint of everything
they are computed from, so a test that changes a spec, a hidden case or the reference gets its own; the tests of
the store itself (grading/test_plan.py) unset it.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

SHARED = "COURSE_GRADE_CACHE"  # plan.SHARED (not imported: that would import torch before any test asks)
_MADE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(SHARED):  # a worker inherits it; a user's own is kept
        return
    folder = tempfile.mkdtemp(prefix="course-grade-cache-")  # mode 700, as plan.shared_folder requires
    os.environ[SHARED] = folder
    _MADE.append(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _MADE:
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get(SHARED) == folder:
            del os.environ[SHARED]
    _MADE.clear()
