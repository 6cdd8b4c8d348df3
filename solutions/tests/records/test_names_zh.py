"""Check names and statuses in the learner's language (issue 42, H2): the feedback file and Gradescope's results say
each check's name and status in Chinese, with the words of the book's grading appendix, while the grade table keeps
its English keys; a name made from a template (a hidden case, the trained model's bar) keeps its fields."""
from __future__ import annotations

import pytest

from course_admin.book import catalogs
from course_admin.exports import gradescope_results
from course_admin.grading import trained
from course_admin.records import report
from course_admin.records.rows import NAMES, GradeRow
from course_admin.release import messages
from course_lib.provided import chapters, i18n
from course_lib.provided.layout import LAYOUT

APPENDIX = LAYOUT.root / "book" / "locale" / "zh_CN" / "LC_MESSAGES" / "book" / "appendix_grading.po"
ZH = messages.load("zh_CN")


def _rows() -> list[GradeRow]:
    return [GradeRow("02", "course_lib", "values, no mask", 1.0, 1.0, "pass", "", "bwrap"),
            GradeRow("02", "course_lib", "built from scratch", 0.0, 1.0, "fail", "uses torch", "bwrap"),
            GradeRow("02", "course_lib", i18n.HIDDEN_CASE.format(number=3), 0.0, 1.0, "error", "timed out", "bwrap"),
            GradeRow("02", "notebook", "answer-sqrt-dk", 0.0, 2.0, "needs manual grading", "", "none"),
            GradeRow("02", "notebook", "answer-other", 0.0, 1.0, "missing", "no notebook", "none")]


def test_every_case_name_says_what_the_grading_appendix_calls_it() -> None:
    """The appendix tells a learner "the check 从零实现 reads your source": that row must carry that name."""
    appendix = {m.id: m.string for m in catalogs.read(APPENDIX) if m.id and m.string}
    names = {c.name for n in chapters.available() for c in chapters.load_spec(n).CASES}
    differ = {n: (ZH.get(n), appendix.get(n)) for n in sorted(names) if ZH.get(n) != appendix.get(n)}
    assert not differ, f"{len(differ)} case name(s) translated otherwise than the grading appendix: {differ}"


def test_the_feedback_names_checks_and_statuses_in_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    text = report.feedback_markdown("zoe", _rows(), {})
    for english in ("values, no mask", "built from scratch", "needs manual grading", "missing", "hidden case"):
        assert english not in text, (english, text)
    for chinese in (ZH["values, no mask"], ZH["built from scratch"], ZH["hidden case {number}"].format(number=3),
                    ZH["needs manual grading"], ZH["missing"], ZH["error"]):
        assert chinese in text, (chinese, text)
    monkeypatch.setenv("COURSE_LANG", "en")
    assert "| values, no mask |" in report.feedback_markdown("zoe", _rows(), {})


def test_gradescope_names_the_tests_in_chinese_and_the_rows_keep_english_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    rows = [r for r in _rows() if r.kind == "course_lib"] + trained.zero("08", "missing", "no model")
    out = gradescope_results.results([("zoe", r) for r in rows], ["02", "08"], 1.0)
    names = [t["name"] for t in out["tests"]]
    assert names == ["ch02 " + ZH["values, no mask"], "ch02 " + ZH["built from scratch"],
                     "ch02 " + ZH["hidden case {number}"].format(number=3),
                     "ch08 " + ZH["trained model: test accuracy of at least {bar}"].format(bar=f"{trained.handin.BAR:.0%}")]
    assert out["tests"][2]["visibility"] == "after_published", "a hidden case is still known as one"
    assert [r.component for r in rows][:2] == ["values, no mask", "built from scratch"]
    assert trained.COMPONENT.startswith("trained model: ") and i18n.HIDDEN_CASE.format(number=3) == "hidden case 3"


def test_a_name_no_catalog_knows_is_shown_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    assert i18n.check_name("answer-sqrt-dk", NAMES) == "answer-sqrt-dk"
    assert i18n.check_name("hidden case 12") == ZH["hidden case {number}"].format(number=12)
    monkeypatch.setenv("COURSE_LANG", "en")
    assert i18n.check_name("hidden case 12") == "hidden case 12"


def test_the_explained_line_speaks_the_learners_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 42, M1: "Explained by the mistake named in '<case>'" was printed in English in a Chinese table."""
    from course_lib.provided import diagnosis

    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    line = diagnosis.explained("", "dropout on the weights, after the softmax")
    assert line == ZH[diagnosis.EXPLAINED].format(case=ZH["dropout on the weights, after the softmax"])
    assert "Explained" not in diagnosis.explained("x", "hidden case 2") and ZH["hidden case {number}"].format(number=2) \
        in diagnosis.explained("x", "hidden case 2")
    monkeypatch.setenv("COURSE_LANG", "en")
    assert diagnosis.explained("", "values, no mask") == "Explained by the mistake named in 'values, no mask': fix that first."


def test_gradescopes_leaderboard_columns_are_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    from course_admin.records.rows import Measurement

    measured = Measurement(0.81, 0.01, 1234, "abc", True, False, 3.5, "cpu", False)
    row = GradeRow("08", trained.KIND, trained.COMPONENT, 3.0, 3.0, "pass", "", "none", measured=measured)
    boards = {}
    for lang in ("zh_CN", "en"):
        monkeypatch.setenv("COURSE_LANG", lang)
        boards[lang] = {c["name"]: c["value"] for c in gradescope_results.results([("zoe", row)], ["08"], 1.0)["leaderboard"]}
    assert boards["en"]["Test accuracy"] == boards["zh_CN"][ZH["Test accuracy"]] == 0.81
    assert boards["en"]["Pretrained (claimed)"] == "no" and boards["zh_CN"][ZH["Pretrained (claimed)"]] == ZH["no"]
    assert not [name for name in boards["zh_CN"] if name in boards["en"]], "every column named in Chinese"
