"""Messages that blame the right thing in `course grade` (issue 26, section 4), on planted submissions.

The same planted learners as solutions/tests/checks/test_messages_blame.py, graded the way `course grade`
grades them (``grade.course_lib_rows``: the sandboxed run, then diagnose.py). What the old grader said is shown
from the rows ``verdict.judge_case`` leaves (each case on its own evidence) and from the note applied without the
traced runs; then what the grade table says now. Hidden rows stay free of learner-chosen text.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from course_lib.provided import chapters

from course_admin.grading import diagnose, grade, plan
from course_admin.grading.sandboxed import grade_course_lib
from course_admin.intake.submissions import Reader
from course_admin.records.rows import GradeRow, Options
from course_admin.sandbox import cold

from ..checks.test_messages_blame import (EVAL_EXCLUDED, FILL_1E9, NOTE_02, OUTPUT_DROPOUT, STD_EPS_OUTSIDE, TRAINING_03,
                                          UNBIASED, planted_files)

pytestmark = [pytest.mark.grading]

EXPLAINED = "Explained by the mistake named in '{}': fix that first."


@pytest.fixture(scope="module")
def grading(tmp_path_factory: pytest.TempPathFactory):
    """grading(name, changes, chapter) -> (the submission's folder, the options, a work folder)."""
    root = tmp_path_factory.mktemp("messages")
    plan.use_store(root / ".prepared")
    opts = Options(isolation=cold.detect("auto"), timeout_s=120.0, store=str(root / ".prepared"))

    def submission(name: str, changes: dict[str, list[tuple[str, str]]]) -> Path:
        planted_files(root / name / "course_lib", changes)
        (root / name / "manifest.json").write_text(json.dumps({"learner": name}))
        (root / f"work_{name}").mkdir()
        return root / name
    yield submission, opts, root
    plan.use_store(None)


def rows_of(sub: Path, number: str, opts: Options, root: Path) -> dict[str, GradeRow]:
    lib = grade.course_lib_rows(Reader(sub), [number], opts, root / f"work_{sub.name}")
    assert all(type(r) is GradeRow for r in lib[number])  # what diagnose.py needs is not kept in the table
    return {r.component: r for r in lib[number]}


def test_the_chapter_02_note_heads_only_the_graded_cases_that_run_chapter_02(grading) -> None:
    submission, opts, root = grading
    sub = submission("fill_var", {"attention.py": [FILL_1E9], "encoder.py": [UNBIASED]})
    got = rows_of(sub, "05", opts, root)
    norm = got["LayerNorm values (batch, seq, d_model)"]
    assert norm.status == "fail" and "chapter 02" not in norm.message, norm.message
    assert got["encoder layer, Post-LN"].message.startswith(f"Chapter 05 {NOTE_02}"), got["encoder layer, Post-LN"]
    assert "chapter 02" not in got["built from scratch"].message
    chapter = plan.prepare("05")
    assert chapter.runs[0] == {"05"} and {"02", "03", "05"} <= chapter.runs[5]  # traced on the reference, stored
    earlier = {"02": [GradeRow("02", "course_lib", "x", 0.0, 1.0, "fail", "wrong", "bwrap")]}
    source = grade._submitted(Reader(sub))
    untraced = dataclasses.replace(chapter, runs=[])  # what the old grader knew: every failed case got the note
    old = diagnose.prerequisite_notes(untraced, list(got.values()), earlier, source)
    assert all(NOTE_02 in r.message for r in old if r.status != "pass")
    new = diagnose.prerequisite_notes(chapter, list(got.values()), earlier, source)
    assert NOTE_02 not in new[1].message and NOTE_02 in new[5].message


def test_no_mistake_the_passed_cases_rule_out_is_graded(grading) -> None:
    submission, opts, root = grading
    sub = submission("output_dropout", {"multihead.py": [OUTPUT_DROPOUT]})
    chapter = plan.prepare("03")
    raw = {r.component: r for r in grade_course_lib(Reader(sub), [chapter], opts, root / "work_output_dropout")["03"]}
    assert EVAL_EXCLUDED <= set(raw[TRAINING_03].names)  # judged alone, as the old grader did: six names
    got = rows_of(sub, "03", opts, root)
    texts = chapters.load_spec("03").MISTAKES
    training = got[TRAINING_03]
    assert training.status == "fail" and not [n for n in EVAL_EXCLUDED if texts[n] in training.message], training
    failed_hidden = [r for name, r in got.items() if name.startswith("hidden case") and r.status != "pass"]
    for r in failed_hidden:
        assert not [n for n in EVAL_EXCLUDED if texts[n] in r.message], r.message
        assert "(this hidden case checks:" in r.message  # the grader's own words, nothing the learner chose


def test_one_mistake_is_graded_once_and_explains_the_others(grading) -> None:
    submission, opts, root = grading
    sub = submission("std_eps", {"encoder.py": [UNBIASED, STD_EPS_OUTSIDE]})
    chapter = plan.prepare("05")
    raw = {r.component: r for r in grade_course_lib(Reader(sub), [chapter], opts, root / "work_std_eps")["05"]}
    eps_case = "LayerNorm eps inside the square root"
    assert not raw[eps_case].names and raw[eps_case].message.startswith("output: values differ")  # the old row
    got = rows_of(sub, "05", opts, root)
    first = "LayerNorm values (batch, seq, d_model)"
    text = chapters.load_spec("05").MISTAKES["unbiased_variance"]
    assert text in got[first].message
    explained = [name for name, r in got.items() if r.message.startswith(EXPLAINED.format(first))]
    assert eps_case in explained and len(explained) >= 3, explained
    for name, r in got.items():  # one thing to fix: the mistake's own text, or the line that points to it
        assert r.status == "pass" or text in r.message or name in explained, (name, r.message)
    hidden = [got[name] for name in explained if name.startswith("hidden case")]
    for r in hidden:  # the label of a public case and the grader's words: no value, no learner text
        assert "got " not in r.message and "(this hidden case checks:" in r.message, r.message
