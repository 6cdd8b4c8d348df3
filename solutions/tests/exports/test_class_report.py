"""`course report`: the instructor's page of what a class got wrong, checked against the grade table.

A planted class is written into a grade table through gradebook.py's public methods (each learner does
one thing: full marks, hidden cases failed after every public one passed, a known mistake, a chapter not
handed in); the report's numbers are then recomputed here from grades.csv, independently, and compared.
The comparison is shown to fail on a report with one number planted wrong. A second class is graded for
real (three learners of chapter 02), so the report also reads what `course grade` writes.
"""
from __future__ import annotations

import copy
import csv
import json
import subprocess
from pathlib import Path

import pytest

from course_admin.records.gradebook import Gradebook
from course_admin.records.rows import GradeRow
from course_lib.provided import chapters
from course_lib.provided.layout import REPO_ROOT

from .. import course_cli

pytestmark = [pytest.mark.grading]

MISTAKES = dict(chapters.load_spec("02").MISTAKES)
PUBLIC = [c.name for c in chapters.load_spec("02").CASES]
HIDDEN = [f"hidden case {k}" for k in range(1, 9)]
HOSTILE = "<img src=x onerror=alert(1)>"
FULL = len(PUBLIC) + len(HIDDEN)  # every planted case is worth 1 point


def _rows(chapter: str, fails: dict[str, str], notebook: str | None = None) -> list[GradeRow]:
    """Every public and hidden case of the chapter: 1 point each, failed (with that message) where named."""
    rows = [GradeRow(chapter, "course_lib", name, 0.0 if name in fails else 1.0, 1.0,
                     "fail" if name in fails else "pass", fails.get(name, ""), "bwrap") for name in PUBLIC + HIDDEN]
    if notebook:
        rows.append(GradeRow(chapter, "notebook", "answer-sqrt-dk", 0.0, 2.0, notebook, "", "none"))
    return rows


def plant(out: Path) -> None:
    """The planted class (chapter 02 unless said): see the module docstring."""
    inf, scale = MISTAKES["neg_inf_fill"], MISTAKES["no_scale"]
    learners = {
        "ann": _rows("02", {}, "needs manual grading"),
        "ben": _rows("02", {"hidden case 3": "a property fails", "hidden case 7": "wrong values"}),
        "cal": _rows("02", {"hidden case 3": "a property fails"}),
        "dee": _rows("02", {PUBLIC[5]: f"{inf} [output: 8 NaN]", "hidden case 5": inf}),
        "eve": _rows("02", {p: f"{scale} [values differ]" for p in PUBLIC[:4]}, "fail"),
        HOSTILE: _rows("02", {PUBLIC[0]: "=HYPERLINK(\"x\")"}),
        "fay": _rows("03", {}),
    }
    book = Gradebook(out / "gradebook.sqlite")
    try:
        for who, rows in learners.items():
            book.commit_learner(who, "fp", "planted", "run", rows, part=rows[0].chapter, chapters=[rows[0].chapter])
        book.export_csv(out / "grades.csv")
    finally:
        book.close()


def course(*args: str) -> subprocess.CompletedProcess:
    return course_cli.run(list(args), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)


def check_against_table(report: dict, grades_csv: Path, roster: list[str]) -> None:
    """Every number of report.json, recomputed from grades.csv by this test's own reading of it."""
    with open(grades_csv, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["kind"] != "submission"]
    everyone = sorted(set(roster) | {r["learner"] for r in rows})
    assert report["learners"] == everyone
    for ch in report["chapters"]:
        mine = [r for r in rows if r["chapter"] == ch["number"]]
        points: dict[str, float] = {}
        maxima: dict[str, float] = {}
        for r in mine:
            points[r["learner"]] = points.get(r["learner"], 0) + float(r["points"])
            maxima[r["learner"]] = maxima.get(r["learner"], 0) + float(r["max_points"])
        assert ch["scores"] == points
        assert ch["max_points"] == max(maxima.values())
        assert sum(ch["bins"]) == len(points)
        for who, p in points.items():  # each learner in the bin of its tenth
            assert ch["bins"][min(9, int(10 * p / ch["max_points"]))] >= 1, who
        assert ch["not_submitted"] == [w for w in everyone if w not in points]
        failed = {}
        for r in mine:
            if r["status"] in ("fail", "error", "missing"):
                failed.setdefault(r["component"], set()).add(r["learner"])
        assert {c["name"]: set(c["learners"]) for c in ch["failed_checks"]} == failed
        counts = [len(c["learners"]) for c in ch["failed_checks"]]
        assert counts == sorted(counts, reverse=True)
        made = {key: {r["learner"] for r in mine if r["status"] == "fail" and text in r["message"]}
                for key, text in dict(chapters.load_spec(ch["number"]).MISTAKES).items()}
        assert {c["name"]: set(c["learners"]) for c in ch["mistakes"]} == {k: v for k, v in made.items() if v}
        public_ok = {w for w in points if all(r["status"] == "pass" for r in mine if r["learner"] == w
                                              and r["kind"] == "course_lib" and not r["component"].startswith("hidden"))}
        assert set(ch["public_passers"]) == public_ok
        hidden = {}
        for r in mine:
            if r["learner"] in public_ok and r["component"].startswith("hidden") and r["status"] == "fail":
                hidden.setdefault(r["component"], set()).add(r["learner"])
        assert {c["name"]: set(c["learners"]) for c in ch["hidden_failed"]} == hidden
        assert ch["awaiting_manual"] == sum(r["status"] == "needs manual grading" for r in mine)


def test_report_of_a_planted_class(tmp_path: Path) -> None:
    out = tmp_path / "grades"
    plant(out)
    roster = tmp_path / "roster.csv"
    roster.write_text("name,learner\nGus G,gus\nAnn A,ann\n", encoding="utf-8")
    proc = course("report", "--out", str(out), "--roster", str(roster), "--chapters", "ch02", "ch03")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    check_against_table(report, out / "grades.csv", ["gus", "ann"])
    ch02, ch03 = report["chapters"]
    # what was planted, said outright
    assert ch02["not_submitted"] == ["fay", "gus"]
    assert ch03["not_submitted"] == sorted(["ann", "ben", "cal", "dee", "eve", "gus", HOSTILE])
    assert [(c["name"], c["learners"]) for c in ch02["hidden_failed"]] == [
        ("hidden case 3", ["ben", "cal"]), ("hidden case 7", ["ben"])]
    assert [(c["name"], c["learners"]) for c in ch02["mistakes"]] == [("neg_inf_fill", ["dee"]), ("no_scale", ["eve"])]
    assert [(c["name"], len(c["learners"])) for c in ch02["failed_checks"][:2]] == [
        ("hidden case 3", 2), (PUBLIC[0], 2)]
    assert ch02["bins"][9] == 1 and ch02["awaiting_manual"] == 1  # ann: all but the 2 points waiting for her grader
    html = (out / "report.html").read_text(encoding="utf-8")
    assert HOSTILE not in html and "&lt;img src=x" in html
    assert html.count("<svg") == 3  # two histograms, one bar chart (nothing failed in ch03)
    assert "hidden case 3" in html and MISTAKES["no_scale"][:40] in html
    # the LMS export: one row a learner of the class, one column a chapter, the table's totals
    with open(out / "lms.csv", newline="", encoding="utf-8") as fh:
        lms = list(csv.reader(fh))
    assert lms[0] == ["learner", "ch02 Attention", "ch03 Multi-head attention"]
    by_id = {r[0]: r[1:] for r in lms[1:]}
    assert by_id["gus"] == ["", ""] and by_id["fay"] == ["", f"{FULL}"]
    assert by_id["ann"] == [f"{FULL}", ""]
    assert by_id[HOSTILE] == [f"{FULL - 1}", ""]
    with open(out / "lms_canvas.csv", newline="", encoding="utf-8") as fh:
        canvas = list(csv.reader(fh))
    assert canvas[0][:3] == ["Student", "SIS Login ID", "Section"] and canvas[1] == ["Points Possible", "", "", f"{FULL + 2}", f"{FULL}"]


def test_a_wrong_number_is_caught(tmp_path: Path) -> None:
    """The comparison above can fail: each planted error in a correct report is found."""
    out = tmp_path / "grades"
    plant(out)
    assert course("report", "--out", str(out)).returncode == 0
    good = json.loads((out / "report.json").read_text(encoding="utf-8"))
    check_against_table(good, out / "grades.csv", [])
    for plant_error in (lambda r: r["chapters"][0]["scores"].update(ben=99.0),
                        lambda r: r["chapters"][0]["hidden_failed"][0]["learners"].pop(),
                        lambda r: r["chapters"][0]["mistakes"].pop(),
                        lambda r: r["chapters"][0]["not_submitted"].append("zed")):
        bad = copy.deepcopy(good)
        plant_error(bad)
        with pytest.raises(AssertionError):
            check_against_table(bad, out / "grades.csv", [])


def test_grades_csv_alone_gives_the_same_report(tmp_path: Path) -> None:
    out = tmp_path / "grades"
    plant(out)
    assert course("report", "--out", str(out)).returncode == 0
    from_db = json.loads((out / "report.json").read_text(encoding="utf-8"))
    for name in ("gradebook.sqlite", "gradebook.sqlite-wal", "gradebook.sqlite-shm"):
        (out / name).unlink(missing_ok=True)
    assert course("report", "--out", str(out)).returncode == 0
    assert json.loads((out / "report.json").read_text(encoding="utf-8")) == from_db


def test_bad_input_is_named(tmp_path: Path) -> None:
    proc = course("report", "--out", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "no grade table" in proc.stderr and "course grade" in proc.stderr
    out = tmp_path / "grades"
    plant(out)
    roster = tmp_path / "roster.csv"
    roster.write_text("name,email_address\nGus,g@x\n", encoding="utf-8")
    proc = course("report", "--out", str(out), "--roster", str(roster))
    assert proc.returncode == 2 and "roster.csv" in proc.stderr and "'learner'" in proc.stderr


def test_report_of_a_graded_class(tmp_path: Path) -> None:
    """Three learners graded for real on chapter 02: the mistakes the grader names are counted."""
    from .. import planted

    nan = planted._sub("torch.finfo(scores.dtype).min", 'float("-inf")')
    learners = {name: {"files": {"course_lib/attention.py": code, "course_lib/__init__.py": ""}}
                for name, code in (("ok", planted.REFERENCE), ("noscale", planted.NO_SCALE), ("nan", nan))}
    planted.write(learners, tmp_path / "subs")
    out = tmp_path / "grades"
    graded = course("grade", str(tmp_path / "subs"), "--out", str(out), "--chapters", "ch02", "--no-notebooks", "--quiet")
    assert graded.returncode == 0, graded.stderr
    assert course("report", "--out", str(out)).returncode == 0
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    check_against_table(report, out / "grades.csv", [])
    (ch02,) = report["chapters"]
    named = {c["name"]: c["learners"] for c in ch02["mistakes"]}
    assert named["no_scale"] == ["noscale"] and named["neg_inf_fill"] == ["nan"]
    assert ch02["scores"]["ok"] == ch02["max_points"] and ch02["public_passers"] == ["ok"]
