"""Fast tests of the notebook grader's pure parts: no kernel, no nbgrader run (test_notebook_grading.py
runs the whole thing). Scrubbing hidden lines, decoding the learner's notebook, the feedback page,
reconciling cells with the release, a cell's result; and the process control both graders share.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_admin import nb_cells, nb_worker, procs
from course_admin.nb_cells import (HIDDEN_LINE, MESSAGE_LIMIT, cell_result, grade_plan, hidden_lines,
                                   load_learner_notebook, reconcile, scrub)
from course_admin.nb_feedback import feedback_html
from course_admin.notebooks import CellGrade

SECRET = "assert secret_shape_check(w) == (2, 3, 3)"


def _meta(cell, gid: str, *, grade=False, solution=False, locked=False, points=0):
    cell.metadata["nbgrader"] = {"grade": grade, "grade_id": gid, "locked": locked, "schema_version": 3,
                                 "solution": solution, **({"points": points} if grade else {})}
    return cell


def source_notebook() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        _meta(new_markdown_cell("# Intro"), "intro", locked=True),
        _meta(new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION"), "impl", solution=True),
        _meta(new_code_cell(f"assert x == 1\n### BEGIN HIDDEN TESTS\n{SECRET}\nok\n### END HIDDEN TESTS"),
              "test_x", grade=True, locked=True, points=2),
        _meta(new_code_cell("assert x > 0"), "test_pos", grade=True, locked=True, points=3),
        _meta(new_markdown_cell("YOUR ANSWER HERE"), "why", grade=True, solution=True, points=1),
    ])


def release() -> nbformat.NotebookNode:
    nb = source_notebook()
    nb.cells[1].source = "# YOUR CODE HERE"
    nb.cells[2].source = "assert x == 1"
    return nb


def learner() -> nbformat.NotebookNode:
    nb = nbformat.reads(nbformat.writes(release()), as_version=4)  # as the worker reads it
    nb.cells[1].source = "x = 1  # mine"
    nb.cells[4].source = "Because."
    return nb


def gids(nb) -> list[str | None]:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


# ------------------------------------------------------------------------------- the source notebook
def test_grade_plan_lists_graded_cells_with_points_and_manual_flag():
    plan = grade_plan(json.loads(nbformat.writes(source_notebook())))
    assert plan == [("test_x", 2.0, False), ("test_pos", 3.0, False), ("why", 1.0, True)]


def test_hidden_lines_are_the_long_lines_inside_hidden_blocks():
    nb = json.loads(nbformat.writes(source_notebook()))
    nb["cells"][3]["source"] = ["visible_line_here\n", "### BEGIN HIDDEN TESTS\n", "from_a_list = 1\n",
                                "### END HIDDEN TESTS\n"]
    assert hidden_lines(nb) == {SECRET, "from_a_list = 1"}  # "ok" is too short to be worth hiding


# -------------------------------------------------------------------------------------------- scrubbing
def test_scrub_replaces_a_line_quoting_a_hidden_test():
    message = f"Traceback:\n  line 4: {SECRET}\nAssertionError: weights have the wrong shape"
    assert scrub(message, {SECRET}) == f"Traceback:\n{HIDDEN_LINE}\nAssertionError: weights have the wrong shape"


def test_scrub_strips_ansi_colours_and_caps_the_length():
    assert scrub("\x1b[0;31mAssertionError\x1b[0m: bad", set()) == "AssertionError: bad"
    long = scrub("y" * (MESSAGE_LIMIT + 50), set())
    assert long == "y" * MESSAGE_LIMIT + " …"
    assert scrub(None, {SECRET}) == ""


# ---------------------------------------------------------------------------- decoding the learner's file
def test_bad_json_is_a_reason_not_a_notebook(tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    path.write_text('{"cells": [ {"cell_type": "code", ')
    nb, why = load_learner_notebook(path)
    assert nb is None and "not valid JSON" in why and "save it again" in why


def test_not_utf8_and_missing_file_are_reasons(tmp_path: Path):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(b"\xff\xfe{}")
    assert load_learner_notebook(path)[0] is None and "not valid JSON" in load_learner_notebook(path)[1]
    nb, why = load_learner_notebook(tmp_path / "absent.ipynb")
    assert nb is None and why.startswith("the notebook could not be read")


@pytest.mark.parametrize("text", ['{"hello": "world"}', '[1, 2]', '{"cells": "none"}'])
def test_json_that_is_not_a_notebook(tmp_path: Path, text: str):
    path = tmp_path / "nb.ipynb"
    path.write_text(text)
    assert load_learner_notebook(path) == (None, "the file is JSON but not a Jupyter notebook (no list of cells)")


def test_odd_metadata_is_dropped_and_the_cells_rebuilt(tmp_path: Path):
    raw = json.loads(nbformat.writes(learner()))
    raw["metadata"] = {"kernelspec": "garbage", "language_info": 3}
    raw["cells"][0]["metadata"]["nbgrader"] = "not a dict"
    raw["cells"][1]["metadata"]["nbgrader"]["points"] = "lots"
    raw["cells"][1]["metadata"]["tags"] = ["x"]
    raw["cells"][2]["outputs"] = "??"
    raw["cells"][3]["source"] = ["assert ", 5, "x > 0"]
    raw["cells"].append({"cell_type": "widget", "source": "?"})
    raw["cells"].append("not a cell")
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(raw))
    nb, why = load_learner_notebook(path)
    assert why == "" and nb is not None
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert [c["metadata"] for c in nb["cells"]] == [
        {}, {"nbgrader": {"grade_id": "impl"}}, {"nbgrader": {"grade_id": "test_x"}},
        {"nbgrader": {"grade_id": "test_pos"}}, {"nbgrader": {"grade_id": "why"}}]
    assert nb["cells"][2]["outputs"] == [] and nb["cells"][3]["source"] == "assert x > 0"
    nbformat.validate(nbformat.from_dict(nb))


def test_nbformat_3_is_converted(tmp_path: Path):
    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[
        nbformat.v3.new_code_cell(input="x = 3"), nbformat.v3.new_text_cell("markdown", source="hi")])])
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.writes(v3, version=3))
    nb, why = load_learner_notebook(path)
    assert why == "" and nb is not None
    assert [(c["cell_type"], c["source"]) for c in nb["cells"]] == [("code", "x = 3"), ("markdown", "hi")]


# ----------------------------------------------------------------------------------------- the feedback
def test_feedback_escapes_totals_and_never_shows_hidden_lines():
    cells = [CellGrade("test_<b>", 0.0, 2.0, "fail", f"AssertionError: <script>\n    {SECRET}"),
             CellGrade("test_pos", 3.0, 3.0, "pass", ""),
             CellGrade("why", 0.0, 1.0, "needs manual grading", "written answer: graded by hand")]
    html = feedback_html(cells, None, "02", {SECRET})
    assert "<h1>Chapter 02 notebook: 3 / 6 points</h1>" in html
    assert "test_&lt;b&gt;" in html and "&lt;script&gt;" in html and "<script>" not in html
    assert SECRET not in html and HIDDEN_LINE in html
    assert "<tr class='needs-manual-grading'>" in html and "Not graded" not in html


def test_feedback_of_an_ungraded_notebook_says_why_scrubbed():
    html = feedback_html([], f"it failed on {SECRET} & more", "3", {SECRET})
    assert "<strong>Not graded:</strong> " + HIDDEN_LINE in html and SECRET not in html
    assert "0 / 0 points" in html


# --------------------------------------------------------------------------------------- reconciliation
def test_a_deleted_test_cell_is_restored_in_place_with_a_note():
    nb = learner()
    del nb.cells[2]  # test_x
    notes = reconcile(nb, release())
    assert gids(nb) == ["intro", "impl", "test_x", "test_pos", "why"]
    assert nb.cells[2].source == "assert x == 1" and nb.cells[2].outputs == []
    assert notes == {"test_x": "This cell was missing from your notebook; it was restored from the course's copy."}


def test_a_deleted_answer_cell_comes_back_empty_and_a_deleted_first_cell_goes_first():
    nb = learner()
    nb.cells = [c for c in nb.cells if gids(nb)[nb.cells.index(c)] not in ("intro", "why")]
    notes = reconcile(nb, release())
    assert gids(nb) == ["intro", "impl", "test_x", "test_pos", "why"]
    assert notes == {"why": "This cell was missing from your notebook; it was restored from the course's "
                            "copy (your answer there is empty)."}  # intro is not graded: no note


def test_an_edited_test_cell_is_reset_with_a_note():
    nb = learner()
    nb.cells[3].source = "pass"
    nb.cells[3].metadata.nbgrader.update(points=100, locked=False)
    nb.cells[2].metadata.nbgrader["grade"] = False  # try to make a test ungraded
    notes = reconcile(nb, release())
    assert nb.cells[3].source == "assert x > 0"
    assert nb.cells[3].metadata.nbgrader.points == 3 and nb.cells[3].metadata.nbgrader.locked
    assert nb.cells[2].metadata.nbgrader.grade is True
    assert notes == {"test_pos": "You had edited this test cell; it was graded as the course wrote it."}


def test_whitespace_only_edits_are_not_edits():
    nb = learner()
    nb.cells[3].source = "\nassert x > 0   \n\n"
    assert reconcile(nb, release()) == {}


def test_duplicated_and_unknown_grade_ids_become_ordinary_cells():
    nb = learner()
    copy = nbformat.from_dict(json.loads(json.dumps(nb.cells[3])))
    copy.source = "pass  # a copy"
    nb.cells.insert(4, copy)
    nb.cells.append(_meta(new_code_cell("y = 2"), "made_up", grade=True, points=50))
    reconcile(nb, release())
    assert gids(nb) == ["intro", "impl", "test_x", "test_pos", None, "why", None]
    assert nb.cells[4].source == "pass  # a copy" and nb.cells[6].source == "y = 2"


def test_the_learner_keeps_solution_and_answer_cells_but_not_their_type():
    nb = learner()
    nb.cells[4].cell_type = "code"  # a written answer turned into code
    nb.cells[4].outputs, nb.cells[4].execution_count = [], None
    assert reconcile(nb, release()) == {}
    assert nb.cells[1].source == "x = 1  # mine" and nb.cells[4].source == "Because."
    assert nb.cells[4].cell_type == "markdown" and "outputs" not in nb.cells[4]
    assert nb.nbformat_minor == 4 and all("id" not in c for c in nb.cells)


# --------------------------------------------------------------------------------------- a cell's result
def _grade(auto, max_score=2.0, manual=None, needs_manual=False):
    return SimpleNamespace(max_score=max_score, auto_score=auto, manual_score=manual,
                           needs_manual_grade=needs_manual)


def test_cell_result_reports_the_last_error_with_the_note_first():
    cell = new_code_cell("x")
    cell.outputs = [new_output("error", ename="ValueError", evalue="first", traceback=[]),
                    new_output("error", ename="AssertionError", evalue=" rows should sum to 1 ", traceback=[])]
    assert cell_result(_grade(0.0), cell, "Restored.") == {
        "points": 0.0, "status": "fail", "message": "Restored. AssertionError: rows should sum to 1"}


def test_cell_result_partial_pass_and_written_answers():
    code = new_code_cell("x")
    assert cell_result(_grade(1.0), code, "")["message"] == "1 of 2 points: the test reported partial credit"
    assert cell_result(_grade(2.0), code, "") == {"points": 2.0, "status": "pass", "message": ""}
    text = new_markdown_cell("answer")
    assert cell_result(_grade(None, manual=1.5, needs_manual=True), text, "") == {
        "points": 1.5, "status": "needs manual grading", "message": "written answer: graded by hand"}
    assert cell_result(_grade(0.0), text, "")["message"] == "no answer was written"


# ----------------------------------------------------------------------------------- process control
def test_isolation_switch_and_a_forced_bwrap_that_cannot_run(monkeypatch):
    monkeypatch.setattr(procs, "bwrap_works", lambda: (False, "bwrap is not installed"))
    monkeypatch.setenv(procs.SWITCH, "rlimits")
    assert procs.detect("bwrap") == "rlimits"  # the switch wins
    monkeypatch.delenv(procs.SWITCH)
    assert procs.detect() == "rlimits"
    with pytest.raises(RuntimeError, match="bwrap is not installed"):
        procs.detect("bwrap")


def test_kill_tree_ends_descendants_in_other_sessions():
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 301 & sleep 302 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(procs.descendants(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    victims = procs.descendants(proc.pid)
    assert len(victims) >= 2
    procs.kill_tree(proc.pid)
    proc.wait(timeout=10)
    time.sleep(0.1)
    assert not [p for p in victims if procs._alive(p)]


def test_kernel_argv_follows_the_jobs_isolation(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "run"))
    job = {"snapshot": str(tmp_path / "snap"), "memory_mb": 64, "assignment": "ch02_x",
           "repo_root": str(Path(nb_cells.__file__).resolve().parents[2])}
    plain = nb_worker.kernel_argv({**job, "isolation": "rlimits"}, tmp_path / "course")
    assert plain[:3] == [sys.executable, "-I", "-c"] and plain[4:6] == [job["snapshot"], str(64 * 1024**2)]
    boxed = nb_worker.kernel_argv({**job, "isolation": "bwrap"}, tmp_path / "course")
    assert boxed[0] == "bwrap" and "--unshare-net" in boxed and boxed[-len(plain):] == plain
    assert boxed[boxed.index("--tmpfs", boxed.index("/tmp")) + 1] == job["repo_root"]  # the repository hidden
    assert os.path.basename(boxed[boxed.index("--chdir") + 1]) == "ch02_x"
