"""nbgrader's whole exchange loop, on this machine, with a temporary exchange folder, for two learners.

Instructor (a course folder with the repository's nbgrader_config.py): generate_assignment,
release_assignment. Each learner (a home of their own, holding the learner tree as `course release
--learner-tree` writes it): fetch_assignment, implements course_lib and answers in the notebook,
`course submit ch02 --into-assignment`, `nbgrader submit`. Instructor: a plain collect (each learner's
course_lib snapshot arrives with the notebook), `course grade`, autograde (loads the notebooks, runs
nothing), a hand score as formgrader stores it, `course grade --manual`, generate_feedback, `course
feedback ch02` (the course_lib feedback into nbgrader's), release_feedback. Each learner: fetch_feedback, and reads their own grades, never the other's.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_admin.release.learner_tree import export_learner_tree
from course_lib.provided.layout import REPO_ROOT

from .. import planted

pytestmark = [pytest.mark.grading]

ASSIGNMENT, ANSWER, COURSE = "ch02_attention", "answer-sqrt-dk", "tfs"
SOURCE = REPO_ROOT / "solutions" / "source" / ASSIGNMENT
BIN = str(Path(sys.executable).parent)


def sh(argv: list[str], cwd: Path, home: Path | None = None, **env: str) -> str:
    full = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **env}
    if home is not None:
        full["HOME"] = str(home)
    proc = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(argv)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def nbgrader(step: str, *args: str, cwd: Path, home: Path | None = None) -> str:
    return sh([sys.executable, "-m", "nbgrader", step, *args], cwd, home)


def config(folder: Path, exchange: Path, base: str = "") -> None:
    """An nbgrader_config.py: ``base`` (the repository's, for the instructor) plus the exchange and course."""
    extra = f"\nc = get_config()  # noqa: F821\nc.Exchange.root = {str(exchange)!r}\nc.CourseDirectory.course_id = {COURSE!r}\n"
    (folder / "nbgrader_config.py").write_text(base + extra, encoding="utf-8")


@pytest.mark.slow
@pytest.mark.skipif(not SOURCE.is_dir(), reason="the chapter 02 source notebook is missing")
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_exchange_loop_two_learners(tmp_path: Path) -> None:
    exchange, teacher = tmp_path / "exchange", tmp_path / "instructor"
    exchange.mkdir(mode=0o777)
    shutil.copytree(SOURCE, teacher / "solutions" / "source" / ASSIGNMENT)
    config(teacher, exchange, (REPO_ROOT / "nbgrader_config.py").read_text(encoding="utf-8"))
    nbgrader("generate_assignment", ASSIGNMENT, "--force", cwd=teacher)
    nbgrader("release_assignment", ASSIGNMENT, cwd=teacher)

    tree = tmp_path / "learner_tree"
    export_learner_tree(REPO_ROOT, tree)
    code = {"alice": planted.REFERENCE, "bob": planted.NO_SCALE}
    answer = {"alice": "q·k sums d_k products of variance 1: its variance is d_k, so divide by √d_k.", "bob": ""}
    for learner in code:
        home = tmp_path / "home" / learner
        shutil.copytree(tree, home / "transformers-from-scratch")  # what nbgitpuller brings to the hub
        config(home, exchange)
        nbgrader("fetch_assignment", ASSIGNMENT, cwd=home, home=home)
        (home / "transformers-from-scratch" / "course_lib" / "attention.py").write_text(code[learner], encoding="utf-8")
        notebook = home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        nb = nbformat.read(notebook, as_version=4)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER and answer[learner]:
                cell.source = answer[learner]
        nbformat.write(nb, notebook)
        said = sh([sys.executable, "-m", "course_lib.provided.cli", "submit", "ch02", "--into-assignment",
                   "--notebook", str(notebook), "--learner", learner], home / "transformers-from-scratch", home,
                  PYTHONPATH=str(home / "transformers-from-scratch"))
        assert f"nbgrader submit {ASSIGNMENT}" in said
        assert json.loads((home / ASSIGNMENT / "course_submission" / "manifest.json").read_text())["learner"] == learner
        nbgrader("submit", ASSIGNMENT, "--student", learner, cwd=home, home=home)

    nbgrader("collect", ASSIGNMENT, cwd=teacher)  # plain: the repository's configuration keeps the snapshot
    for learner in code:
        snapshot = teacher / "submissions" / learner / ASSIGNMENT / "course_submission" / "course_lib" / "attention.py"
        assert snapshot.is_file(), f"collect lost {learner}'s course_lib snapshot: {snapshot}"
        assert snapshot.read_text(encoding="utf-8") == code[learner], f"{learner}'s snapshot is not their code"
    grade = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(teacher / "submissions"), "--out",
             str(teacher / "grades"), "--chapters", "ch02", "--quiet"]
    sh(grade, REPO_ROOT)
    nbgrader("autograde", ASSIGNMENT, cwd=teacher)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{teacher / 'grades' / 'gradebook.db'}") as gb:  # as formgrader stores a hand score
        mark = gb.find_grade(ANSWER, ASSIGNMENT, ASSIGNMENT, "alice")
        mark.manual_score, mark.needs_manual_grade = 1.5, False
        gb.db.commit()
    sh(grade + ["--manual", str(teacher / "grades" / "gradebook.db")], REPO_ROOT)
    with open(teacher / "grades" / "totals.csv", newline="", encoding="utf-8") as fh:
        totals = {(r["learner"], r["kind"]): float(r["points"]) for r in csv.DictReader(fh)}
    assert totals[("alice", "course_lib")] == sum(planted.FULL)
    assert totals[("bob", "course_lib")] == sum(planted.NO_SCALE_VECTOR)
    assert totals[("alice", "notebook")] == 1.5 and totals[("bob", "notebook")] == 0

    nbgrader("generate_feedback", ASSIGNMENT, cwd=teacher)
    for _ in range(2):  # a second run replaces its block
        sh([sys.executable, "-m", "course_lib.provided.cli", "feedback", "ch02", "--out", str(teacher / "grades")],
           REPO_ROOT)
    nbgrader("release_feedback", ASSIGNMENT, cwd=teacher)

    pages = {}
    for learner in code:
        home = tmp_path / "home" / learner
        nbgrader("fetch_feedback", ASSIGNMENT, "--student", learner, cwd=home, home=home)
        (page,) = (home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")
        pages[learner] = page.read_text(encoding="utf-8")
    alice, bob = pages["alice"], pages["bob"]
    assert "Feedback for alice" in alice and "Feedback for bob" not in alice
    assert f"course_lib checks: {sum(planted.FULL):g} / {sum(planted.FULL):g}" in alice
    assert "Feedback for bob" in bob and f"course_lib checks: {sum(planted.NO_SCALE_VECTOR):g} / " in bob
    assert "not divided by √d_k" in bob and "not divided by √d_k" not in alice
    assert answer["alice"][:20] in alice  # nbgrader's own part: the notebook with the hand-graded answer
    assert alice.count("course grade: begin") == 1


def test_plain_collect_keeps_the_snapshot(tmp_path: Path) -> None:
    """A plain `nbgrader collect` with the repository's configuration brings back the whole submission: nbgrader
    applies CourseDirectory.ignore to collect too, and that list is nbgrader's default (no `*.py`, no
    `course_lib`; `course release` refuses extra files in source folders instead)."""
    exchange, teacher = tmp_path / "exchange", tmp_path / "instructor"
    inbound = exchange / COURSE / "inbound" / f"alice+{ASSIGNMENT}+2026-01-01 00:00:00.000000 UTC+abc"
    (inbound / "course_submission" / "course_lib").mkdir(parents=True)
    (inbound / "course_submission" / "course_lib" / "attention.py").write_text(planted.REFERENCE, encoding="utf-8")
    (inbound / "course_submission" / "manifest.json").write_text(json.dumps({"learner": "alice", "chapter": "02"}))
    (inbound / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    shutil.copy(SOURCE / f"{ASSIGNMENT}.ipynb", inbound / f"{ASSIGNMENT}.ipynb")
    teacher.mkdir()
    config(teacher, exchange, (REPO_ROOT / "nbgrader_config.py").read_text(encoding="utf-8"))
    nbgrader("collect", ASSIGNMENT, cwd=teacher)
    assert (teacher / "submissions" / "alice" / ASSIGNMENT / "course_submission" / "manifest.json").is_file()
    assert (teacher / "submissions" / "alice" / ASSIGNMENT / "course_submission" / "course_lib" / "attention.py").is_file()
