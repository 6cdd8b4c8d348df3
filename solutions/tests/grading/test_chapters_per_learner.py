"""One learner, one submission per chapter: `zoe_ch02.zip` and `zoe_ch03.zip` in one folder, or nbgrader's
`submitted/ann/ch02_attention/` and `submitted/ann/ch03_multihead_attention/`, are graded each on its own
chapter into the same table; two submissions for the same chapter still collide."""
from __future__ import annotations

import csv
import subprocess
import zipfile
from pathlib import Path

import pytest

from course_lib.provided.layout import LAYOUT

from .. import course_cli

FILES = {"02": ["attention.py"], "03": ["attention.py", "multihead.py"]}
pytestmark = [
    pytest.mark.skipif(not (LAYOUT.reference / "multihead.py").is_file(), reason="chapter 03 is not built"),
    pytest.mark.grading,
]


def write_zip(path: Path, modules: list[str]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for module in modules:
            zf.writestr(f"course_lib/{module}", (LAYOUT.reference / module).read_text())


def write_folder(path: Path, modules: list[str]) -> None:
    (path / "course_lib").mkdir(parents=True)
    for module in modules:
        (path / "course_lib" / module).write_text((LAYOUT.reference / module).read_text())


def grade(subs: Path, out: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    proc = course_cli.run(["grade", str(subs), "--out", str(out),
                           "--no-notebooks", "--timeout", "60"], cwd=LAYOUT.root, capture_output=True, text=True,
                          timeout=600)
    with open(out / "grades.csv", newline="", encoding="utf-8") as fh:
        return proc, list(csv.DictReader(fh))


def totals(rows: list[dict]) -> dict[tuple[str, str], tuple[float, float]]:
    """(points, max) per learner and chapter, of the code's rows: these submissions hand in no trained model, so
    chapter 08's model row (test_trained.py grades it) would be 0 of 3 for all of them."""
    out: dict[tuple[str, str], list[float]] = {}
    for r in (r for r in rows if r["kind"] != "capstone"):
        t = out.setdefault((r["learner"], r["chapter"]), [0.0, 0.0])
        t[0] += float(r["points"])
        t[1] += float(r["max_points"])
    return {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.slow
def test_one_submission_per_chapter(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    for chapter, modules in FILES.items():
        write_zip(subs / f"zoe_ch{chapter}.zip", modules)
    write_folder(subs / "ann" / "ch02_attention", FILES["02"])
    write_folder(subs / "ann" / "ch03_multihead_attention", FILES["03"])
    write_zip(subs / "max_ch02.zip", FILES["02"])
    write_folder(subs / "max_ch02", FILES["02"])  # a second submission of max for chapter 02: a collision
    proc, rows = grade(subs, tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = totals(rows)
    for learner in ("zoe", "ann"):
        for chapter in FILES:
            earned, possible = got[(learner, chapter)]
            assert earned == possible > 0, (learner, chapter, got)
    collided = [r for r in rows if r["learner"].startswith("max (collision")]
    assert collided and {r["status"] for r in collided} == {"error"} and ("max", "02") not in got

    # a new chapter 03 zip regrades chapter 03 only; chapter 02's rows stay as they were
    before = [r for r in rows if r["learner"] == "zoe" and r["chapter"] == "02"]
    write_zip(subs / "zoe_ch03.zip", ["attention.py"])  # multihead.py forgotten this time
    proc, rows = grade(subs, tmp_path / "out")
    assert "already graded, 1 to grade" in proc.stdout, proc.stdout
    assert [r for r in rows if r["learner"] == "zoe" and r["chapter"] == "02"] == before
    assert totals(rows)[("zoe", "03")][0] == 0
    assert {r["status"] for r in rows if r["learner"] == "zoe" and r["chapter"] == "03"} == {"missing"}


# ---------------------------------------------------------------- one sandboxed child per submission
HANGS_ON_3D = '''

_real_attention = scaled_dot_product_attention


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0):  # noqa: F811 - planted
    if query.dim() == 3:  # chapter 02's cases without a heads axis hang; chapter 03 always passes 4-D
        while True:
            pass
    return _real_attention(query, key, value, mask, dropout_p)
'''


def test_one_child_grades_a_chapter_and_what_it_builds_on(tmp_path: Path, monkeypatch) -> None:
    """--prereqs learner: chapter 03 and chapter 02 under it run in one sandboxed child (one torch import) for
    their public cases, and one more for their hidden cases, which it is given only then."""
    from course_admin.grading import grade, plan, sandboxed
    from course_admin.sandbox import cold, warm
    from course_lib.provided import chapters
    from course_admin.records.rows import Options
    from course_admin.intake.submissions import Reader

    write_folder(tmp_path / "zoe", FILES["03"])
    runs = []
    real = sandboxed._launch
    monkeypatch.setattr(sandboxed, "_launch", lambda *a, **k: runs.append(a[1]) or real(*a, **k))
    opts = Options(isolation=cold.detect(), timeout_s=60, notebooks=False)
    work = tmp_path / "work"
    work.mkdir()
    try:
        lib = grade.course_lib_rows(Reader(tmp_path / "zoe"), ["03"], opts, work)
    finally:
        warm.shutdown()  # no sandbox of this test process outlives the test
    assert runs == [0, 0], (runs, [r.message for rows in lib.values() for r in rows][:3])  # public, hidden
    assert set(lib) == {"02", "03"}
    for number, rows in lib.items():
        assert rows and all(r.status == "pass" for r in rows), (number, [r.message for r in rows])
    assert len(lib["03"]) == len(plan.prepare("03").cases)  # the graded chapter: public and hidden cases
    assert len(lib["02"]) == len(chapters.load_spec("02").CASES)  # only built on: its public cases alone


@pytest.mark.slow
@pytest.mark.long  # handed out early (suite_times.py): not the run's last minute
def test_a_chapter_that_hangs_does_not_eat_the_next_chapters_time(tmp_path: Path) -> None:
    """Each chapter of a run has its own time budget: chapter 02 hangs, chapter 03 still gets full marks."""
    subs = tmp_path / "subs"
    write_folder(subs / "kim_ch03", FILES["03"])
    hung = subs / "kim_ch03" / "course_lib" / "attention.py"
    hung.write_text(hung.read_text() + HANGS_ON_3D)
    (subs / "kim_ch02" / "course_lib").mkdir(parents=True)
    (subs / "kim_ch02" / "course_lib" / "attention.py").write_text(hung.read_text())
    proc = course_cli.run(["grade", str(subs), "--out",
                           str(tmp_path / "out"), "--no-notebooks", "--timeout", "8", "--jobs", "1"],
                          cwd=LAYOUT.root, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    got = totals(rows)
    assert got[("kim", "03")][0] == got[("kim", "03")][1] > 0, got
    ch02 = [r for r in rows if r["chapter"] == "02" and r["kind"] == "course_lib"]
    assert any("did not finish within the time limit (8 s per chapter)" in r["message"] for r in ch02), ch02
    assert got[("kim", "02")][0] < got[("kim", "02")][1]


@pytest.mark.slow
def test_a_submission_of_the_whole_course_is_graded_on_every_chapter(tmp_path: Path) -> None:
    """A folder without a chapter in its name holds every chapter: one run grades them all, full marks
    for the reference; a syntax error in the last chapter's module costs that chapter only."""
    from course_lib.provided import chapters
    from course_lib.provided.layout import chapter_facts

    every = chapters.available()
    modules = [m for n in every for m in chapter_facts(n).modules]
    write_folder(tmp_path / "subs" / "una", modules)
    write_folder(tmp_path / "subs" / "vic", modules)
    last = tmp_path / "subs" / "vic" / "course_lib" / chapter_facts(every[-1]).modules[0]
    last.write_text(last.read_text() + "\ndef broken(:\n")
    proc, rows = grade(tmp_path / "subs", tmp_path / "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = totals(rows)
    for number in every:
        earned, possible = got[("una", number)]
        assert earned == possible > 0, (number, got)
    for number in every[:-1]:
        assert got[("vic", number)][0] == got[("vic", number)][1], (number, got)
    assert got[("vic", every[-1])][0] == 0


def test_a_spec_that_cannot_load_in_the_sandbox_is_the_graders_failure(tmp_path: Path, monkeypatch) -> None:
    """The child says "ready" before any learner code runs; a child that dies before that (here a spec
    that raises when loaded) is the grader's failure (retried next run), never a 0 for the learner."""
    from course_admin.grading import grade, sandboxed
    from course_admin.sandbox import cold, warm
    from course_admin.records.rows import Options
    from course_admin.intake.submissions import Reader

    write_folder(tmp_path / "zoe", FILES["02"])
    real = sandboxed._write_job

    def broken(box: Path, segments, opts, hidden=False) -> None:
        real(box, segments, opts, hidden)
        (box / "tests" / "specs" / "ch02.py").write_text("raise RuntimeError('a spec that needs a missing file')\n")

    monkeypatch.setattr(sandboxed, "_write_job", broken)
    opts = Options(isolation=cold.detect(), timeout_s=60, notebooks=False)
    work = tmp_path / "work"
    work.mkdir()
    try:
        with pytest.raises(sandboxed.GraderError, match="(?s)could not start.*a spec that needs a missing file"):
            grade.course_lib_rows(Reader(tmp_path / "zoe"), ["02"], opts, work)
    finally:
        warm.shutdown()
