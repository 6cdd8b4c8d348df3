"""`course grade ... | head`: a reader that stops reading must silence the progress, never change a grade.

Before the fix, the BrokenPipeError of a progress line was taken for a grading failure and replaced
a finished learner's grades by an error row, which a re-run then skipped as finished.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.provided.layout import REPO_ROOT

from .. import course_cli

pytestmark = [pytest.mark.grading]

REFERENCE = (REPO_ROOT / "solutions" / "course_ref" / "attention.py").read_text(encoding="utf-8")


def test_closed_stdout_changes_no_grade(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    for learner in ("ann", "ben", "cal"):
        (subs / learner / "course_lib").mkdir(parents=True)
        (subs / learner / "course_lib" / "attention.py").write_text(REFERENCE, encoding="utf-8")
        (subs / learner / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": "02"}))
    proc = subprocess.Popen([sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out",
                             str(tmp_path / "out"), "--no-notebooks", "--chapters", "ch02"], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    proc.stdout.readline()  # like `head -1`: read the first line, then hang up
    proc.stdout.close()
    assert proc.wait(timeout=300) == 0
    with open(tmp_path / "out" / "totals.csv", newline="", encoding="utf-8") as fh:
        totals = {(r["learner"], r["kind"]): (r["points"], r["max_points"]) for r in csv.DictReader(fh)}
    assert set(totals) == {(name, "course_lib") for name in ("ann", "ben", "cal")}
    assert len({points for points, _ in totals.values()}) == 1
    assert all(points == possible and float(points) > 0 for points, possible in totals.values()), totals
    with open(tmp_path / "out" / "lms.csv", newline="", encoding="utf-8") as fh:  # the LMS gradebook's shape
        lms = {r["learner"]: r for r in csv.DictReader(fh)}
    assert set(lms) == {"ann", "ben", "cal"}
    assert {r[next(k for k in r if k.startswith("ch02"))] for r in lms.values()} == {next(iter(totals.values()))[0]}


def test_a_notebook_is_read_never_run(tmp_path: Path) -> None:
    """Nothing of a notebook runs when it is graded: its code can neither act nor earn; its written
    answers wait for the instructor, and an answer left as released scores nothing."""
    import nbformat

    learner = tmp_path / "subs" / "dee"
    (learner / "course_lib").mkdir(parents=True)
    (learner / "course_lib" / "attention.py").write_text(REFERENCE, encoding="utf-8")
    marker = tmp_path / "the notebook ran"
    nb = nbformat.read(REPO_ROOT / "exercises" / "ch02_attention" / "ch02_attention.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran')"))
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "answer-sqrt-dk":
            cell.source = "Without the scale the variance of q·k is d_k and the softmax saturates."
    nbformat.write(nb, learner / "ch02_attention.ipynb")
    out = tmp_path / "out"
    proc = course_cli.run(["grade", str(learner.parent),
                           "--out", str(out), "--quiet", "--chapters", "ch02"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = {r["component"]: r for r in csv.DictReader(fh) if r["kind"] == "notebook"}
    assert rows["answer-sqrt-dk"]["status"] == "needs manual grading" and rows["answer-sqrt-dk"]["points"] == "0"
    assert rows["answer-heatmap"]["status"] == "fail" and "no answer" in rows["answer-heatmap"]["message"]
    assert {r["isolation"] for r in rows.values()} == {"none"}


def test_feedback_keeps_answers_waiting_for_the_instructor_out_of_what_to_fix() -> None:
    """A written answer that waits for hand grading is no mistake: the learner has nothing to fix there.
    The totals say how many of the chapter's points still wait for the instructor."""
    from course_admin.records.report import feedback_markdown
    from course_admin.records.rows import GradeRow

    def row(kind: str, component: str, points: float, max_points: float, status: str, message: str) -> GradeRow:
        return GradeRow("02", kind, component, points, max_points, status, message, "none")

    rows = [row("course_lib", "values, no mask", 1.0, 1.0, "pass", ""),
            row("course_lib", "hidden case 1", 0.0, 1.0, "fail", "output: values differ"),
            row("notebook", "answer-sqrt-dk", 0.0, 2.0, "needs manual grading", "written answer: graded by hand"),
            row("notebook", "answer-heatmap", 0.0, 1.0, "fail", "no answer was written")]
    md = feedback_markdown("ada", rows, {"02": {}})
    fix = md.split("### Notebook", 1)[1].split("What to fix:", 1)[1]
    assert "no answer was written" in fix and "(1 check(s): *answer-heatmap*)" in fix
    assert "graded by hand" not in fix and "answer-sqrt-dk" not in fix
    assert "## Chapter 02 — Attention: 1 / 5 points, of which 2 points wait for hand grading" in md
    assert "### Notebook: 0 / 3, of which 2 points wait for hand grading" in md
    assert "### course_lib checks: 1 / 2\n" in md  # nothing waits there

    one = feedback_markdown("bo", [row("notebook", "answer-heatmap", 0.0, 1.0, "needs manual grading", "by hand")],
                            {"02": {}})
    assert "of which 1 point waits for hand grading" in one and "What to fix" not in one
    graded = feedback_markdown("cy", [row("notebook", "answer-heatmap", 1.0, 1.0, "pass", "graded by hand")], {"02": {}})
    assert "wait" not in graded
