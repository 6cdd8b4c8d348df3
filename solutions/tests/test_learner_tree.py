"""`course release --learner-tree DIR`: what learners receive works on its own, and holds no secret.

The tree is exported into a temporary folder; there, with no solutions/, the public checks run on the
learner's course_lib (stub: 0 points; the reference copied in: full marks), pytest defaults to the
learner's code, and the instructor's commands say they are the instructor's.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

from course_admin.learner_tree import INSTRUCTOR_ONLY
from course_admin.release import main as release


def run(tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=tree, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("learner") / "tree"
    assert release(["--learner-tree", str(dest)]) == 0
    return dest


def test_nothing_of_the_instructor_is_in_the_tree(tree: Path) -> None:
    shipped = [p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()]
    assert shipped and not [p for p in shipped if p.startswith(INSTRUCTOR_ONLY)]
    for needed in ("course_lib/attention.py", "course_lib/provided/check.py", "tests/specs/ch02.py",
                   "tests/reference/ch02.pt", "exercises/ch02_attention/ch02_attention.ipynb", "README.md"):
        assert needed in shipped, needed


def test_checks_run_on_the_learners_code_in_the_tree(tree: Path) -> None:
    stub = run(tree, "-m", "course_lib.provided.cli", "check", "ch02")
    assert stub.returncode == 1 and "0/10" in stub.stdout and "not implemented yet" in stub.stdout
    work = tree.parent / "solved"
    shutil.copytree(tree, work)
    shutil.copy(REPO_ROOT / "solutions" / "course_ref" / "attention.py", work / "course_lib" / "attention.py")
    solved = run(work, "-m", "course_lib.provided.cli", "check", "ch02")
    assert solved.returncode == 0 and "10/10" in solved.stdout, solved.stdout + solved.stderr


def test_pytest_in_the_tree_grades_the_learners_code(tree: Path) -> None:
    proc = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_public.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not implemented yet" in proc.stdout and "failed" in proc.stdout


def test_instructor_commands_say_so(tree: Path) -> None:
    proc = run(tree, "-m", "course_lib.provided.cli", "grade", "x", "--out", "y")
    assert proc.returncode == 2 and "instructor" in proc.stderr


def test_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert release(["--learner-tree", str(tmp_path)]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
