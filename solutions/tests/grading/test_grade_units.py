"""Unit tests of the grader's pure parts: layout facts, hidden-case redaction, decoding a child's record,
feedback rendering and prerequisite notes. Fast: no sandbox, no subprocess."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from course_admin.grading.verdict import decode, describe_exit
from course_admin.records.report import feedback_markdown
from course_admin.records.rows import GradeRow
from course_lib.provided import chapters
from course_lib.provided.checking import CheckFailure
from course_lib.provided.layout import (Layout, SpecError, chapter_facts, chapter_number, modules_for, owner_of,
                                        prerequisites)

MISTAKES = {"no_scale": "The scores are not divided by √d_k."}


# ---------------------------------------------------------------- layout: a chapter's facts by number
def spec(root: Path, number: str, body: str) -> None:
    (root / "tests" / "specs").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "specs" / f"ch{number}.py").write_text(body)


@pytest.fixture
def tree(tmp_path: Path) -> Layout:
    spec(tmp_path, "02", 'TITLE = "Attention"\nMODULES = ["attention.py"]\nCASES = [object()]\n')
    spec(tmp_path, "03", 'TITLE: str = "Multi-head"\nMODULES: list[str] = ["multihead.py"]\nREQUIRES = ["2"]\n')
    spec(tmp_path, "05", 'TITLE = "Encoder"\nMODULES = ["encoder.py", "norm.py"]\nREQUIRES = ["03"]\n')
    return Layout(tmp_path)


def test_chapter_numbers() -> None:
    assert [chapter_number(x) for x in ("ch02", "02", "2", 2, " CH7 ")] == ["02", "02", "02", "02", "07"]
    with pytest.raises(ValueError, match="write it as ch02"):
        chapter_number("attention")


def test_facts_read_annotated_literals_without_importing(tree: Layout) -> None:
    facts = chapter_facts("03", tree)
    assert (facts.title, facts.modules, facts.requires) == ("Multi-head", ("multihead.py",), ("02",))
    assert tree.chapters() == ["02", "03", "05"]


def test_prerequisites_are_transitive_and_modules_are_their_union(tree: Layout) -> None:
    assert prerequisites("05", tree) == ["02", "03"]
    assert modules_for("05", tree) == ["attention.py", "multihead.py", "encoder.py", "norm.py"]
    assert modules_for("02", tree) == ["attention.py"] and prerequisites("02", tree) == []
    assert owner_of("norm.py", tree) == "05"


def test_a_cycle_or_a_bad_spec_is_named(tree: Layout) -> None:
    spec(tree.root, "02", 'TITLE = "Attention"\nMODULES = ["attention.py"]\nREQUIRES = ["05"]\n')
    with pytest.raises(SpecError, match="cycle"):
        prerequisites("05", tree)
    with pytest.raises(SpecError, match="exactly one"):
        owner_of("missing.py", tree)
    spec(tree.root, "04", 'TITLE = "PE"\nMODULES = "pe.py"\n')
    with pytest.raises(SpecError, match="MODULES must be a list"):
        chapter_facts("04", tree)


def test_the_real_chapter_02() -> None:
    facts = chapter_facts("02")
    assert facts.modules == ("attention.py",) and facts.requires == ()


# ---------------------------------------------------------------- hidden cases say no inputs, shapes or values
# decided by who produced a failure, not by its wording: test_hidden_redaction.py


# ---------------------------------------------------------------- decoding what a child wrote
def test_decode_accepts_plain_tensors_and_failures() -> None:
    out = decode({"kind": "outputs", "outputs": {"output": torch.ones(2)}})
    assert torch.equal(out["output"], torch.ones(2))
    failure = decode({"kind": "exception", "message": "x" * 5000})
    assert isinstance(failure, CheckFailure) and len(str(failure)) == 600
    odd = decode({"kind": "outputs", "outputs": {"output": {"not_tensor": "nd array!"}}})
    assert type(odd["output"]).__name__ == "nd_array_"


@pytest.mark.parametrize("record", [None, [], {"kind": "outputs"}, {"kind": "outputs", "outputs": {"o": 3}},
                                    {"kind": "mystery"}])
def test_decode_refuses_anything_else(record) -> None:
    with pytest.raises(ValueError):
        decode(record)


def test_describe_exit() -> None:
    assert describe_exit(None) == "stopped at the time limit"
    assert "memory" in describe_exit(-9) and "SIGKILL" in describe_exit(-9)
    assert "sys.exit" in describe_exit(0)


# ---------------------------------------------------------------- feedback
def row(component: str, points: float, status: str, message: str = "", kind: str = "course_lib") -> GradeRow:
    return GradeRow("02", kind, component, points, 1.0, status, message, "bwrap")


def test_feedback_groups_failures_by_message_and_names_known_mistakes() -> None:
    text = MISTAKES["no_scale"] + " [output: values differ]"
    rows = [row("a|b", 1.0, "pass"), row("c", 0.0, "fail", text), row("hidden case 1", 0.0, "fail", text),
            row("cell-1", 0.0, "needs manual grading", "graded by hand", kind="notebook")]
    md = feedback_markdown("ada", rows, {"02": MISTAKES})
    assert "## Chapter 02 — Attention: 1 / 4 points" in md
    assert "### course_lib checks: 1 / 3" in md and "### Notebook: 0 / 1" in md
    assert "| a\\|b | 1 / 1 | pass |" in md
    assert "(2 check(s): *c*; *hidden case 1*)" in md
    assert "### Known mistakes recognised" in md and f"- {MISTAKES['no_scale']}" in md


# ---------------------------------------------------------------- prerequisite notes
def test_prereq_note() -> None:
    assert chapters.prereq_note("03", {}) == ""
    note = chapters.prereq_note("03", {"02": (2, 9)})
    assert note == "Chapter 03 uses your chapter 02 (attention.py), which fails 2 of 9 checks: fix those first."


def test_prereq_note_names_only_the_chapters_a_check_runs() -> None:
    failing = {"02": (1, 17), "04": (2, 9)}
    assert chapters.prereq_note("08", failing, frozenset({"08"})) == ""  # masked_mean runs chapter 08's code alone
    assert chapters.prereq_note("08", failing, frozenset({"08", "05", "02"})) == (
        "Chapter 08 uses your chapter 02 (attention.py), which fails 1 of 17 checks: fix those first.")
    assert "chapter 02" in chapters.prereq_note("08", failing) and "chapter 04" in chapters.prereq_note("08", failing)


# ---------------------------------------------------------------- identity, CSV cells, the grade table's schema
def test_learner_ids_come_from_collected_names_in_nfc() -> None:
    from course_admin.intake.submissions import learner_id

    assert learner_id("zoé_ch02.zip") == learner_id("zoe\u0301_ch02.zip") == "zoé"
    assert learner_id("zoë_ch02.zip") == "zoë" != learner_id("zoé_ch02.zip")
    assert [learner_id(n) for n in ("sam_ch02", "Sam-CH7.ZIP", "a\x01b", "", "  ")] == ["sam", "Sam", "a_b",
                                                                                     "unnamed", "unnamed"]


def test_disk_names_are_safe_and_distinct() -> None:
    from course_admin.intake.submissions import disk_name

    assert disk_name("sam") == "sam" and disk_name("a.b_c-1") == "a.b_c-1"
    names = [disk_name(n) for n in ("zoé", "zoë", "Zoe", "zoe~x", "=1+2", "..", "a/b", "zoe")]
    assert len(set(names)) == len(names)
    assert all(n.isascii() and "/" not in n and not n.startswith(".") for n in names)
    assert disk_name("zoé").startswith("zoe~") and disk_name("zoé") == disk_name("zoé")


def test_discover_ignores_the_manifest_and_reports_collisions(tmp_path: Path) -> None:
    import json

    from course_admin.intake.submissions import discover

    def sub(folder: Path, claimed: str) -> None:
        (folder / "course_lib").mkdir(parents=True)
        (folder / "course_lib" / "attention.py").write_text("x = 1\n")
        (folder / "manifest.json").write_text(json.dumps({"learner": claimed}))

    sub(tmp_path / "c" / "aaa", "zoe")
    sub(tmp_path / "c" / "zoe", "zoe")
    sub(tmp_path / "c" / "zoe_ch02", "zoe")
    sub(tmp_path / "nb" / "kim" / "ch02_attention", "kim")
    found = {s.learner: s for s in discover([tmp_path / "c", tmp_path / "nb" / "kim" / "ch02_attention",
                                             tmp_path / "c" / "aaa"])}
    assert sorted(found) == ["aaa", "kim", f"zoe (collision: {tmp_path / 'c' / 'zoe'})",
                             f"zoe (collision: {tmp_path / 'c' / 'zoe_ch02'})"]
    assert found["aaa"].error is None and "manifest.json names the learner 'zoe'" in found["aaa"].warnings[0]
    assert found["kim"].error is None and not found["kim"].warnings
    for key in found:
        if key.startswith("zoe"):
            assert "2 submissions are collected under the learner id 'zoe'" in found[key].error


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted(tmp_path: Path) -> None:
    import csv

    from course_admin.records.gradebook import Gradebook, csv_cell

    assert [csv_cell(v) for v in ("=1+2", "+1", "-x", "@f", "\tx", "\rx", "ok", "a=b")] == \
        ["'=1+2", "'+1", "'-x", "'@f", "'\tx", "'\rx", "ok", "a=b"]
    assert [csv_cell(v) for v in (-1.0, 2.5, 0.0)] == ["-1", "2.5", "0"]
    book = Gradebook(tmp_path / "gradebook.sqlite")
    book.commit_learner("=HYPERLINK(1)", "f", "src", "run",
                        [GradeRow("02", "course_lib", "-case", 1.0, 1.0, "pass", "@msg", "bwrap")])
    book.export_csv(tmp_path / "grades.csv")
    book.export_totals(tmp_path / "totals.csv")
    book.close()
    with open(tmp_path / "grades.csv", newline="") as fh:
        row = list(csv.DictReader(fh))[0]
    assert (row["learner"], row["component"], row["message"], row["points"]) == ("'=HYPERLINK(1)", "'-case",
                                                                                  "'@msg", "1")
    assert "'=HYPERLINK(1),02,course_lib,1,1" in (tmp_path / "totals.csv").read_text()


@pytest.mark.parametrize("extra", ["CREATE TRIGGER t AFTER INSERT ON grades BEGIN DELETE FROM grades; END",
                                   "CREATE VIEW v AS SELECT * FROM grades",
                                   "CREATE INDEX i ON grades (points)",
                                   "CREATE TABLE other (x)"])
def test_a_grade_table_with_objects_we_did_not_create_is_refused(tmp_path: Path, extra: str) -> None:
    import sqlite3

    from course_admin.records.gradebook import Gradebook, GradebookError

    path = tmp_path / "gradebook.sqlite"
    Gradebook(path).close()
    Gradebook(path).close()  # our own schema opens again
    db = sqlite3.connect(path)
    db.execute(extra)
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(GradebookError, match="did not create.*move it away") as err:
        Gradebook(path)
    assert str(path) in str(err.value)
    assert path.read_bytes() == before


def test_a_grade_table_with_other_columns_or_not_sqlite_is_refused(tmp_path: Path) -> None:
    import sqlite3

    from course_admin.records.gradebook import Gradebook, GradebookError

    changed = tmp_path / "changed.sqlite"
    db = sqlite3.connect(changed)
    db.execute("CREATE TABLE grades (learner TEXT, points REAL DEFAULT 99)")
    db.close()
    with pytest.raises(GradebookError, match="table 'grades'"):
        Gradebook(changed)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(GradebookError, match="not a grade table"):
        Gradebook(junk)


# ---------------------------------------------------------------- the table of `course check`
def test_check_table_says_a_repeated_failure_once() -> None:
    from course_lib.provided.check import SAME, SAME_MISTAKE, table
    from course_lib.provided.checking import Result

    stub = [Result("02", f"case {i}", 1.0, 0.0, "fail", "not implemented yet: X") for i in range(3)]
    assert table(stub).startswith("All 3 checks fail (0/3 points): not implemented yet: X")
    named = [Result("02", "a", 1.0, 0.0, "fail", "No scale. [output: 1]", ["no_scale"]),
             Result("02", "b", 0.5, 0.0, "fail", "No scale. [output: 2]", ["no_scale"]),
             Result("02", "c", 1.5, 1.5, "pass"),
             Result("02", "d", 1.0, 0.0, "fail", "No scale. [output: 3]", ["no_scale"]),
             Result("02", "e", 1.0, 0.0, "fail", "No scale. [output: 3]", ["no_scale"])]
    lines = table(named).splitlines()
    assert "No scale. [output: 1]" in lines[2] and SAME_MISTAKE in lines[3]
    assert "No scale. [output: 3]" in lines[5] and SAME in lines[6]  # after a pass, said again
    assert len({line.index(" / ") for line in lines[2:7] + lines[-1:]}) == 1  # the points column is aligned


def test_a_gradebook_of_the_older_layout_is_named_as_such(tmp_path) -> None:
    import sqlite3

    from course_admin.records.gradebook import Gradebook, GradebookError

    path = tmp_path / "gradebook.sqlite"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE learners (learner TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, source TEXT "
                     "NOT NULL, run_id TEXT NOT NULL, finished_at REAL NOT NULL);")
    db.close()
    with pytest.raises(GradebookError, match="older course grade"):
        Gradebook(path)
