"""Written answers graded by hand in formgrader reach `course grade`'s one table (`--manual`).

A learner's notebook is autograded (its written answer stays "needs manual grading", 0 points); an
nbgrader gradebook is then given a hand score the way formgrader stores one; the same command with
`--manual` replaces that row, and only that row, and the totals follow.
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

from course_lib.provided.layout import REPO_ROOT

from .. import course_cli

pytestmark = [pytest.mark.grading]

REFERENCE = (REPO_ROOT / "solutions" / "course_ref" / "attention.py").read_text(encoding="utf-8")
RELEASED = REPO_ROOT / "exercises" / "ch02_attention" / "ch02_attention.ipynb"
ANSWER = "answer-sqrt-dk"


def _submission(folder: Path, learner: str) -> None:
    (folder / "course_lib").mkdir(parents=True)
    (folder / "course_lib" / "attention.py").write_text(REFERENCE, encoding="utf-8")
    (folder / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": "02"}))
    nb = nbformat.read(RELEASED, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER:
            cell.source = "q·k sums d_k terms of variance 1, so its variance is d_k; dividing keeps it 1."
    nbformat.write(nb, folder / RELEASED.name)


def _grade(subs: Path, out: Path, *extra: str) -> list[dict[str, str]]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = course_cli.run(["grade", str(subs), "--out", str(out),
                           "--quiet", "--chapters", "ch02", *extra], cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _formgrader_scores(db: Path, scores: dict[tuple[str, str], float | None]) -> None:
    """Store hand scores as formgrader does: manual_score set, needs_manual_grade cleared."""
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        gb.add_assignment("ch02_attention")
        gb.add_notebook("ch02_attention", "ch02_attention")
        gb.add_grade_cell(ANSWER, "ch02_attention", "ch02_attention", max_score=2, cell_type="markdown")
        for learner in sorted({learner for learner, _ in scores}):
            gb.add_student(learner)
            gb.add_submission("ch02_attention", learner)
        for (learner, cell), score in scores.items():
            grade = gb.find_grade(cell, "ch02_attention", "ch02_attention", learner)
            if score is not None:
                grade.manual_score = score
                grade.needs_manual_grade = False
        gb.db.commit()


@pytest.mark.skipif(not RELEASED.is_file(), reason="the chapter 02 exercise has not been released")
def test_hand_scores_replace_only_their_rows(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    for learner in ("alice", "bob"):
        _submission(subs / learner, learner)
    before = _grade(subs, tmp_path / "out")
    waiting = [r for r in before if r["component"] == ANSWER]
    assert [(r["learner"], r["status"], r["points"]) for r in waiting] == [
        ("alice", "needs manual grading", "0"), ("bob", "needs manual grading", "0")]

    db = tmp_path / "gradebook.db"
    # alice graded by hand; bob not yet; carol has no submission in this batch (ignored)
    _formgrader_scores(db, {("alice", ANSWER): 1.5, ("bob", ANSWER): None, ("carol", ANSWER): 2.0})
    after = _grade(subs, tmp_path / "out", "--manual", str(db))

    changed = [(b, a) for b, a in zip(before, after) if b != a]
    assert len(after) == len(before) and len(changed) == 1, changed
    row = changed[0][1]
    assert (row["learner"], row["component"], row["points"], row["status"]) == ("alice", ANSWER, "1.5", "graded by hand")
    with open(tmp_path / "out" / "totals.csv", newline="", encoding="utf-8") as fh:
        totals = {(t["learner"], t["kind"]): float(t["points"]) for t in csv.DictReader(fh)}
    assert totals[("alice", "notebook")] == totals[("bob", "notebook")] + 1.5


def test_a_missing_gradebook_is_a_clear_error(tmp_path: Path) -> None:
    proc = course_cli.run(["grade", str(tmp_path), "--out",
                           str(tmp_path / "out"), "--manual", str(tmp_path / "nope.db")],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no nbgrader gradebook" in proc.stderr


# Each language's nbgrader folders, as nbgrader_config.py picks them by COURSE_LANG: (source, release).
FOLDERS = {"en": ("solutions/source", "exercises"), "zh_CN": ("solutions/source_zh_CN", "exercises_zh_CN")}


@pytest.mark.skipif(not RELEASED.is_file(), reason="the chapter 02 exercise has not been released")
@pytest.mark.parametrize("lang", sorted(FOLDERS))
def test_loading_notebooks_for_formgrader_runs_nothing(tmp_path: Path, lang: str) -> None:
    """The repository's nbgrader_config.py, in each language (COURSE_LANG): `nbgrader generate_assignment` gives
    the committed release byte for byte, and `nbgrader autograde` neither executes a learner's notebook nor
    clears its saved outputs; the written answer waits for formgrader."""
    source, release = FOLDERS[lang]
    released = REPO_ROOT / release / "ch02_attention" / RELEASED.name
    shutil.copy(REPO_ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(REPO_ROOT / source / "ch02_attention", tmp_path / source / "ch02_attention")
    marker = tmp_path / "the notebook ran"
    nb = nbformat.read(released, as_version=4)
    saved = nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')", execution_count=1,
                                      outputs=[nbformat.v4.new_output("stream", name="stdout", text="my figure\n")])
    nb.cells.insert(0, saved)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == ANSWER:
            cell.source = "The variance of q·k is d_k; dividing by √d_k brings it back to 1."
    folder = tmp_path / "submissions" / "alice" / "ch02_attention"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / RELEASED.name)
    env = {**os.environ, "COURSE_LANG": lang,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for step in ("generate_assignment", "autograde"):
        argv = [sys.executable, "-m", "nbgrader", step, "ch02_attention"] + (["--force"] if step[0] == "g" else [])
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        if step == "generate_assignment":
            assert (tmp_path / release / "ch02_attention" / RELEASED.name).read_bytes() == released.read_bytes()
    assert not marker.exists(), "nbgrader autograde ran the learner's notebook"
    graded = nbformat.read(tmp_path / "grades" / "autograded" / "alice" / "ch02_attention" / RELEASED.name,
                           as_version=4)
    assert any("my figure" in str(cell.get("outputs")) for cell in graded.cells), "saved outputs were cleared"
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'grades' / 'gradebook.db'}") as gb:
        grades = {g.name: g for g in gb.find_submission_notebook("ch02_attention", "ch02_attention", "alice").grades}
        assert grades[ANSWER].needs_manual_grade and grades[ANSWER].auto_score is None
