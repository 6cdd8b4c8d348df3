"""No English sentence reaches a Chinese learner (issue 42, M2), found the way a reviewer finds one: run a chapter's
planted mistake and the grader's error paths (a bad upload, a bad manifest, a missing notebook, Gradescope's
failures) with ``COURSE_LANG=zh_CN`` and look for a run of three or more English words outside code (backticks,
identifiers, paths) and outside an exception's own text that a message quotes (PyTorch's words, not the course's).

Nothing here runs the sandbox: each path is called where its words are made."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from course_admin.exports import gradescope, gradescope_upload
from course_admin.grading import grade
from course_admin.intake import manifest, submissions
from course_admin.release.variants import wrong_impls
from course_lib.provided import check as check_module

from ..english import english_runs  # the detector, shared with the learner tree's walk (release/)


def test_the_detector_finds_a_sentence_and_spares_code() -> None:
    assert english_runs("未评分：the autograder could not run your code here。") == ["the autograder could not run"
                                                                                   " your code here"]
    assert english_runs("填充掩码 (batch, 1, 1, seq_k)：请用 `mask = tokens != pad_id` 与 manifest.json") == []
    assert english_runs("引发了 RuntimeError：The size of tensor a (2) must match the size") == []


@pytest.fixture
def chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")


def test_a_planted_mistake_is_reported_in_chinese(chinese: None) -> None:
    """What the reviewer ran: chapter 02 without the √d_k scale, and with dropout before the softmax."""
    impls = wrong_impls("02")
    for name in ("no_scale", "dropout_before_softmax"):
        results = check_module.results_and_causes("02", impls[name])[0]
        text = check_module.table(results, width=10_000) + "\n".join(r.message for r in results)
        assert not english_runs(text), (name, english_runs(text))


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def test_the_intake_errors_and_warnings_are_chinese(chinese: None, tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ann_ch02.zip").write_bytes(b"not a zip")
    _zip(subs / "ben_ch02.zip", {"../evil.py": "x"})
    _zip(subs / "cal_ch02.zip", {"manifest.json": "{not json", "course_lib/attention.py": "x = 1\n"})
    _zip(subs / "dee_ch02.zip", {"manifest.json": json.dumps({"learner": "eve", "files": {
        "course_lib/attention.py": "0" * 64}}), "course_lib/attention.py": "x = 1\n"})
    (subs / "fay").mkdir()
    (subs / "fay" / "notes.txt").write_text("nothing to grade")
    found = submissions.discover([subs, tmp_path / "nobody_ch02.zip"])
    said = {s.learner: [s.error or ""] + s.warnings for s in found}
    dee = next(s for s in found if s.learner == "dee")
    said["dee"] += manifest.manifest_warnings(submissions.Reader(dee.path), dee.manifest)
    assert all(said[k][0] for k in ("ann", "ben", "cal", "fay", "nobody")), said
    assert len(said["dee"]) >= 3, said["dee"]
    left = {k: english_runs(" ".join(v)) for k, v in said.items() if english_runs(" ".join(v))}
    assert not left, left


def test_the_graders_own_rows_are_chinese(chinese: None, tmp_path: Path) -> None:
    """A submission not graded, a notebook missing or unreadable."""
    chapter = SimpleNamespace(number="02")
    folder = tmp_path / "zoe"
    (folder / "course_lib").mkdir(parents=True)
    (folder / "course_lib" / "attention.py").write_text("x = 1\n")
    rows = grade.notebook_rows(submissions.Reader(folder), chapter)
    (folder / "ch02_attention.ipynb").write_text("{not json")
    rows += grade.notebook_rows(submissions.Reader(folder), chapter)
    said = [grade.not_graded("x")] + [r.message for r in rows]
    assert rows and not [english_runs(m) for m in said if english_runs(m)], said


def test_a_warning_row_is_said_in_chinese_and_keyed_in_english(chinese: None, tmp_path: Path) -> None:
    _zip(tmp_path / "zoe_ch02.zip", {"manifest.json": json.dumps({"learner": "eve"}), "course_lib/attention.py": "x"})
    sub = submissions.discover([tmp_path / "zoe_ch02.zip"])[0]
    row = grade.warning_rows("02", sub.warnings)[0]
    assert row.component.startswith(submissions.IDENTITY_WARNING), "the grade table's key stays English"
    assert row.message == sub.warnings[0] and not english_runs(row.message) and "eve" in row.message


def test_gradescopes_failures_are_chinese(chinese: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def results(root: Path) -> str:
        return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["output"]

    said = []
    assert gradescope.run(tmp_path / "a", ["02"], "auto", "zh_CN") == 1  # no submission folder
    said.append(results(tmp_path / "a"))

    def no_isolation(isolation: str) -> tuple[list[str], str]:
        raise RuntimeError("no sandbox here")

    monkeypatch.setattr("course_admin.grading.container.container_isolation", no_isolation)
    (tmp_path / "b" / "submission").mkdir(parents=True)
    assert gradescope.run(tmp_path / "b", ["02"], "auto", "zh_CN") == 1
    said.append(results(tmp_path / "b"))
    upload = tmp_path / "c" / "submission"
    upload.mkdir(parents=True)
    (upload / "notes.txt").write_text("x")
    with pytest.raises(submissions.SubmissionError) as err:
        gradescope_upload.stage(upload, tmp_path / "c" / "work", "zoe", "02")
    said.append(str(err.value))
    packed = tmp_path / "d"
    (packed / "course_lib").mkdir(parents=True)
    (packed / "manifest.json").write_text(json.dumps({"chapter": "03"}))
    said += gradescope.packed_for_another(packed, ["02"])
    assert len(said) == 4 and not [english_runs(m) for m in said if english_runs(m)], said


def test_the_help_of_course_check_and_course_submit_is_chinese(chinese: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from course_lib.provided import submit

    said = []
    for main, argv in ((check_module.main, ["--help"]), (submit.main, ["--help"]), (check_module.main, [])):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr()
        said.append(out.out + out.err)
    assert all(said) and not [english_runs(m) for m in said if english_runs(m)], said


def test_what_a_hidden_case_checks_is_said_in_chinese(chinese: None) -> None:
    """A failed hidden case's row ends "(this hidden case checks: ...)": its ``about`` translated, or its id as code."""
    from course_admin.grading.plan import hidden_cases
    from course_admin.grading.verdict import hidden_property
    from course_lib.provided import chapters

    said = {c.name: hidden_property(SimpleNamespace(case=c)) for n in chapters.available() for c in hidden_cases(n)}
    assert len(said) > 50 and said["h-float64-heads"] == "全程 float64，带多个头"  # its about, in Chinese
    assert not {k: v for k, v in said.items() if english_runs(v)}, {k: v for k, v in said.items() if english_runs(v)}


def test_a_refused_resume_says_what_differs_in_chinese(chinese: None) -> None:
    """The training harness's words a capstone learner meets on a resume (course_lib/provided/training.py)."""
    from course_lib.provided import training

    said = training._differences({"lr": 0.001, "model": {"layers": 2}}, {"lr": 0.002, "model": {"layers": 2}})
    from course_admin.release import messages

    template = messages.load("zh_CN")["{key}: saved {saved}, now {now}"]
    assert said == [template.format(key="lr", saved="0.001", now="0.002")] and not english_runs(said[0]), said
