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

from course_lib.provided.layout import REPO_ROOT

REFERENCE = (REPO_ROOT / "solutions" / "course_ref" / "attention.py").read_text(encoding="utf-8")


def test_closed_stdout_changes_no_grade(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    for learner in ("ann", "ben", "cal"):
        (subs / learner / "course_lib").mkdir(parents=True)
        (subs / learner / "course_lib" / "attention.py").write_text(REFERENCE, encoding="utf-8")
        (subs / learner / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": "02"}))
    proc = subprocess.Popen([sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out",
                             str(tmp_path / "out"), "--no-notebooks"], cwd=REPO_ROOT,
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


def test_notebook_memory_limit_reaches_the_kernel(tmp_path: Path) -> None:
    """--notebook-memory is the kernel's limit: far too little and the notebook earns nothing, course_lib all."""
    learner = tmp_path / "subs" / "dee"
    (learner / "course_lib").mkdir(parents=True)
    (learner / "course_lib" / "attention.py").write_text(REFERENCE, encoding="utf-8")
    (learner / "manifest.json").write_text(json.dumps({"learner": "dee", "chapter": "02"}))
    notebook = REPO_ROOT / "exercises" / "ch02_attention" / "ch02_attention.ipynb"
    (learner / notebook.name).write_bytes(notebook.read_bytes())
    totals = {}
    for memory, seconds in (("4096", "120"), ("64", "20")):  # a starved kernel never answers: cut it short
        out = tmp_path / f"out{memory}"
        proc = subprocess.run([sys.executable, "-m", "course_lib.provided.cli", "grade", str(learner.parent),
                               "--out", str(out), "--notebook-memory", memory, "--notebook-timeout", seconds,
                               "--quiet"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        with open(out / "totals.csv", newline="", encoding="utf-8") as fh:
            totals[memory] = {r["kind"]: float(r["points"]) for r in csv.DictReader(fh)}
    assert totals["4096"]["notebook"] > 0 and totals["64"]["notebook"] == 0, totals
    assert totals["4096"]["course_lib"] == totals["64"]["course_lib"] > 0, totals
