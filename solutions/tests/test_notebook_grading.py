"""Planted notebooks through the notebook half of the grader (solutions/course_admin/notebooks.py).

The pure parts (scrubbing, decoding, reconciling, the feedback page) have fast tests of their own in
test_notebook_units.py.

Each planted case has an expected score per cell. A small nbgrader source notebook is generated here with
nbformat, so the suite does not depend on the chapter notebooks; the real chapter 02 notebook is graded at
the end when it exists. Every autograde starts a worker, nbgrader and a kernel: about 5-10 s each.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from course_admin.notebooks import find_source_notebook, grade_notebook
from notebook_fixture import (
    CORRECT, FULL, HIDDEN_MARK, LOOP_MARK, REPO, UNSCALED, by_name, expected_isolation, grade,
    learner_copy, no_leftovers, scores,
)

# ------------------------------------------------------------------------------------------ the cases
def test_correct_submission_scores_full_marks(tmp_path, chapter):
    result = grade(tmp_path, chapter, learner_copy(chapter))
    assert result.error is None
    assert scores(result) == FULL
    cells = by_name(result)
    assert cells["why_scale"].status == "needs manual grading"
    assert cells["test_warning_is_fine"].status == "pass"  # stderr output and a warning cost nothing
    assert {c.max_points for c in result.cells} == {2, 3, 1}
    assert HIDDEN_MARK not in (result.feedback_html or "")
    assert not no_leftovers(tmp_path)


def test_wrong_implementation_in_snapshot_loses_points(tmp_path, chapter):
    """The learner's own attention.py is graded, never the instructor's copy."""
    result = grade(tmp_path, chapter, learner_copy(chapter), UNSCALED)
    assert scores(result) == {**FULL, "test_scaled": 0}
    msg = by_name(result)["test_scaled"].message
    assert "sqrt(d_k)" in msg and msg.startswith("AssertionError")


def test_snapshot_without_course_lib_scores_zero(tmp_path, chapter):
    """No package: nothing else may be imported instead (the repository's editable install is hidden)."""
    result = grade(tmp_path, chapter, learner_copy(chapter), attention=None)
    assert scores(result) == {k: 0 for k in FULL}
    msg = by_name(result)["test_rows_sum_to_one"].message
    assert "no course_lib package" in msg and "ModuleNotFoundError" in msg


def test_only_the_snapshot_course_lib_is_importable(tmp_path, chapter):
    """A planted course_lib unlike the repository's: the kernel sees it, and nothing of the repository."""
    planted = CORRECT + "\nWHERE = __file__\n"
    nb = learner_copy(chapter)
    probe = new_code_cell(
        "import course_lib, course_lib.attention as a, sys\n"
        "print(a.WHERE)\n"
        "try:\n"
        "    import course_lib.provided  # in the repository, not in this snapshot\n"
        "    raise AssertionError('the repository course_lib leaked in')\n"
        "except ModuleNotFoundError as e:\n"
        "    print('not importable:', e)\n")
    nb.cells.insert(2, probe)
    # grading a learner-added cell is not possible, so check through a test that fails if the probe raised
    nb.cells.insert(3, new_code_cell("assert 'snapshot' in a.WHERE"))
    result = grade(tmp_path, chapter, nb, planted)
    assert scores(result) == FULL
    autograded = next((tmp_path / "work" / "course" / "autograded").rglob("*.ipynb"))
    cells = nbformat.read(autograded, as_version=4).cells
    printed = [o for c in cells if c.cell_type == "code" for o in c.outputs
               if o.get("output_type") == "stream" and "attention.py" in o.get("text", "")]
    # the kernel imports a private copy of the snapshot's course_lib (the planted one: it has WHERE)
    assert printed and str(tmp_path / "work" / "kernel_root" / "course_lib" / "attention.py") in printed[0]["text"]
    errors = [o for c in cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors, errors  # course_lib.provided exists in the repository but not in this snapshot


def test_deleted_test_cell_is_restored_and_graded(tmp_path, chapter):
    nb = learner_copy(chapter)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_scaled"]
    result = grade(tmp_path, chapter, nb)
    assert scores(result) == FULL
    assert "missing" in by_name(result)["test_scaled"].message


def test_deleted_test_cell_with_wrong_code_still_fails(tmp_path, chapter):
    nb = learner_copy(chapter)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                not in ("test_scaled", "test_rows_sum_to_one", "intro", "scratch")]
    result = grade(tmp_path, chapter, nb, UNSCALED)
    assert scores(result) == {**FULL, "test_scaled": 0}


def test_edited_test_cell_is_graded_as_written_by_the_course(tmp_path, chapter):
    nb = learner_copy(chapter)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "test_scaled":
            cell.source = "pass"
            meta["locked"] = False
            meta["points"] = 100
        if meta.get("grade_id") == "test_rows_sum_to_one":
            meta["grade"] = False  # try to make the test ungraded
    result = grade(tmp_path, chapter, nb, UNSCALED)
    assert scores(result) == {**FULL, "test_scaled": 0}
    assert by_name(result)["test_scaled"].max_points == 3
    assert "edited" in by_name(result)["test_scaled"].message


def test_keyboard_interrupt_swallowing_loop(tmp_path, chapter):
    """The looping cell fails, the batch returns, later cells still run, nothing is left running."""
    nb = learner_copy(chapter)
    loop = new_code_cell(
        "import subprocess, time\n"
        f"child = subprocess.Popen(['sh', '-c', 'sleep 300; : {LOOP_MARK}'])  # a process left running\n"
        "while True:\n"
        "    try:\n"
        "        time.sleep(0.05)\n"
        "    except BaseException:\n"
        "        pass\n")
    nb.cells.insert(2, loop)
    started = time.monotonic()
    result = grade(tmp_path, chapter, nb, cell_timeout_s=4)
    assert time.monotonic() - started < 60
    assert result.error is None
    assert scores(result) == FULL  # the tests after the loop ran in the restarted kernel
    autograded = next((tmp_path / "work" / "course" / "autograded").rglob("*.ipynb"))
    cell = nbformat.read(autograded, as_version=4).cells[2]
    assert any(o.get("ename") == "CellTimeoutError" for o in cell.outputs)
    spec = tmp_path / "work" / "jupyter" / "kernels" / "course-grader" / "kernel.json"
    assert (json.loads(spec.read_text())["argv"][0] == "bwrap") == (result.isolation == "bwrap")
    time.sleep(0.5)
    leftovers = [p for p in no_leftovers(tmp_path)] + [
        p for p in os.listdir("/proc") if p.isdigit() and LOOP_MARK.encode()
        in Path(f"/proc/{p}/cmdline").read_bytes()] if Path("/proc").is_dir() else []
    assert not leftovers


def test_fallback_without_bubblewrap_leaves_nothing_running(tmp_path, chapter, monkeypatch):
    """Where bubblewrap is missing, the worker reaps and kills the learner's leftovers itself."""
    monkeypatch.setenv("COURSE_GRADE_ISOLATION", "rlimits")
    assert expected_isolation() == "rlimits"
    test_keyboard_interrupt_swallowing_loop(tmp_path, chapter)  # grade() checks result.isolation


def test_loop_inside_a_test_cell_scores_zero_there(tmp_path, chapter):
    """An implementation that hangs fails the test cells that call it, and the notebook still returns."""
    hang = CORRECT.replace("    scores = query", "    while True:\n        try:\n            pass\n"
                           "        except BaseException:\n            pass\n    scores = query")
    result = grade(tmp_path, chapter, learner_copy(chapter), hang, cell_timeout_s=3, timeout_s=90)
    assert result.error is None
    assert scores(result) == {k: 0 for k in FULL}
    message = by_name(result)["test_scaled"].message
    assert "longer than 3 s" in message and ("CellTimeoutError" in message or "KeyboardInterrupt" in message)


def test_kernel_death_fails_one_cell_only(tmp_path, chapter):
    nb = learner_copy(chapter)
    nb.cells.insert(2, new_code_cell("import os\nos._exit(0)"))
    result = grade(tmp_path, chapter, nb)
    assert result.error is None
    assert scores(result) == FULL


def test_bad_json_is_an_error_grade_not_an_exception(tmp_path, chapter):
    result = grade(tmp_path, chapter, None, raw='{"cells": [ {"cell_type": "code", ')
    assert result.error and "not valid JSON" in result.error
    assert scores(result) == {k: 0 for k in FULL}
    assert {c.status for c in result.cells} == {"error"}
    assert "not valid JSON" in result.feedback_html


def test_not_a_notebook_is_an_error_grade(tmp_path, chapter):
    result = grade(tmp_path, chapter, None, raw='{"hello": "world"}')
    assert result.error and "not a Jupyter notebook" in result.error


def test_odd_metadata_is_repaired_and_graded(tmp_path, chapter):
    nb = json.loads(nbformat.writes(learner_copy(chapter)))
    nb["metadata"] = {"kernelspec": "garbage", "language_info": 3}
    nb["cells"][1]["metadata"]["nbgrader"] = "not a dict"
    nb["cells"][2]["metadata"]["nbgrader"]["points"] = "lots"
    nb["cells"][3]["outputs"] = "??"
    result = grade(tmp_path, chapter, None, raw=json.dumps(nb))
    assert result.error is None
    assert scores(result) == FULL


def test_whole_notebook_time_limit(tmp_path, chapter):
    """A hard limit for the whole notebook: everything is killed, the grade says why."""
    result = grade(tmp_path, chapter, learner_copy(chapter), timeout_s=3)
    assert result.error and "did not finish within 3 s" in result.error
    assert scores(result) == {k: 0 for k in FULL}
    time.sleep(0.5)
    assert not no_leftovers(tmp_path)


def test_feedback_never_shows_hidden_tests(tmp_path, chapter):
    """Hidden assertions fail with their message only; no line of the hidden block reaches the feedback."""
    wrong_shape = CORRECT.replace("return output, weights", "return output, weights.unsqueeze(0)")
    result = grade(tmp_path, chapter, learner_copy(chapter), wrong_shape)
    html = result.feedback_html
    assert html and "test_rows_sum_to_one" in html
    assert scores(result)["test_rows_sum_to_one"] == 0
    source_text = Path(chapter[0]).read_text()
    assert HIDDEN_MARK in source_text
    hidden_lines = [line.strip() for line in nbformat.read(chapter[0], as_version=4).cells[2].source.splitlines()]
    assert HIDDEN_MARK not in html
    for line in hidden_lines[hidden_lines.index("### BEGIN HIDDEN TESTS"):]:
        if len(line) > 12:
            assert line not in html
    assert "BEGIN HIDDEN TESTS" not in html
    for cell in result.cells:
        assert HIDDEN_MARK not in cell.message


# --------------------------------------------------------------------- the real chapter 02 notebook
def _real_source() -> Path | None:
    try:
        return find_source_notebook("02")
    except (FileNotFoundError, ValueError):
        return None


REAL = _real_source()
REAL_RELEASE = REPO / "exercises" / "ch02_attention" / "ch02_attention.ipynb"


def _real_snapshot(folder: Path, attention: str) -> Path:
    snap = folder / "snapshot"
    shutil.copytree(REPO / "course_lib", snap / "course_lib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (snap / "course_lib" / "attention.py").write_text(attention)
    return snap


@pytest.mark.skipif(REAL is None or not REAL_RELEASE.is_file(),
                    reason="solutions/source/ch02_attention/ and exercises/ch02_attention/ are not written yet")
@pytest.mark.parametrize("impl", ["correct", "unscaled"])
def test_real_chapter_02_notebook(tmp_path, impl):
    nb_path = tmp_path / "ch02_attention.ipynb"
    nb = nbformat.read(REAL_RELEASE, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "markdown":
            cell.source = "The variance of q.k grows with d_k, so the softmax saturates."
    nbformat.write(nb, nb_path)
    ref = (REPO / "solutions" / "course_ref" / "attention.py").read_text()
    attention = ref if impl == "correct" else ref.replace("/ math.sqrt(d_k)", "")
    assert attention != ref or impl == "correct"
    snap = _real_snapshot(tmp_path, attention)
    started = time.monotonic()
    result = grade_notebook(nb_path, snap, "02", tmp_path / "work")
    print(f"\nreal ch02 ({impl}) took {time.monotonic() - started:.1f} s: "
          + ", ".join(f"{c.name}={c.points:g}/{c.max_points:g} {c.status}: {c.message[:80]}" for c in result.cells))
    assert result.error is None, result.error
    assert result.isolation == expected_isolation()
    manual = [c for c in result.cells if c.status == "needs manual grading"]
    auto = [c for c in result.cells if c.status != "needs manual grading"]
    assert manual and auto, "the real notebook should have a written answer and autograded cells"
    if impl == "correct":
        assert all(c.status == "pass" for c in auto), [(c.name, c.message) for c in auto]
    else:
        assert any(c.status == "fail" for c in auto)
    hidden = [line.strip() for cell in nbformat.read(REAL, as_version=4).cells
              for line in cell.source.split("### BEGIN HIDDEN TESTS", 1)[-1].split("### END HIDDEN TESTS")[0].splitlines()
              if "BEGIN HIDDEN TESTS" in cell.source and len(line.strip()) > 12]
    for line in hidden:
        assert line not in result.feedback_html
