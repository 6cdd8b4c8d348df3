"""`course grade --lang zh_CN`: the same scores as in English, the feedback in Chinese, the known mistakes named in
Chinese, those recognised by what they raise (in the sandbox) included."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_lib.provided import chapters
from course_lib.provided.layout import LAYOUT

from .. import planted as plant
from .test_grading import course, grade_args

ZH = json.loads((LAYOUT.course_lib / "provided" / "locale" / "zh_CN.json").read_text(encoding="utf-8"))
LEARNERS = ("correct", "wrong_values", "big_negative", "syntax_error")
pytestmark = [
    pytest.mark.skipif(not (LAYOUT.solutions / "course_admin" / "grading" / "grade.py").is_file(),
                       reason="the grader ships only with the instructor's repository"),
    pytest.mark.grading,
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zh")
    every = plant.planted(0, root / "unused.sqlite", root / "victim")
    subs = plant.write({k: every[k] for k in LEARNERS}, root / "subs")
    outs = {}
    for lang in ("en", "zh_CN"):
        outs[lang] = root / lang
        proc = course(*grade_args(subs, outs[lang]), "--lang", lang)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return outs


def test_the_language_never_changes_a_score(graded: dict[str, Path]) -> None:
    def points(out: Path) -> list[tuple[str, str, str]]:
        return [(r["learner"], r["component"], r["points"]) for r in plant.read_csv(out / "grades.csv")]
    assert points(graded["en"]) == points(graded["zh_CN"])


def test_the_feedback_is_chinese_with_the_known_mistakes_in_chinese(graded: dict[str, Path]) -> None:
    mistakes = chapters.load_spec("02").MISTAKES
    for learner, name in (("wrong_values", "no_scale"), ("big_negative", "big_negative_fill")):
        english = (graded["en"] / "feedback" / f"{learner}.md").read_text(encoding="utf-8")
        chinese = (graded["zh_CN"] / "feedback" / f"{learner}.md").read_text(encoding="utf-8")
        assert mistakes[name] in english.replace("\\|", "|"), (learner, english[:800])
        assert ZH[mistakes[name]] in chinese.replace("\\|", "|"), (learner, chinese[:1500])
        assert mistakes[name] not in chinese, "no English left where a translation exists"
        assert ZH["What to fix:"] in chinese and "What to fix:" not in chinese


def test_check_names_and_statuses_are_chinese_in_the_feedback_but_english_keys_in_the_grade_table(
        graded: dict[str, Path]) -> None:
    """The feedback says each check's name and status in Chinese (issue 42, H2); grades.csv keeps the English keys."""
    components = {lang: [r["component"] for r in plant.read_csv(graded[lang] / "grades.csv")] for lang in graded}
    assert components["zh_CN"] == components["en"] and "values, no mask" in components["zh_CN"]
    chinese = (graded["zh_CN"] / "feedback" / "wrong_values.md").read_text(encoding="utf-8")
    for name in ("values, no mask", "hidden case 1"):
        assert f"| {name} |" not in chinese, chinese[:1500]
    assert f"| {ZH['values, no mask']} |" in chinese and ZH["hidden case {number}"].format(number=1) in chinese
    assert f"| {ZH['fail']} |" in chinese and "| fail |" not in chinese


def test_a_syntax_error_is_said_in_chinese(graded: dict[str, Path]) -> None:
    chinese = (graded["zh_CN"] / "feedback" / "syntax_error.md").read_text(encoding="utf-8")
    assert "SyntaxError" in chinese and "cannot import" not in chinese, chinese[:1500]


def test_a_gradescope_zip_for_a_chinese_class_grades_in_chinese(tmp_path: Path) -> None:
    import zipfile

    from course_admin.exports import gradescope
    with zipfile.ZipFile(gradescope.build(["02"], tmp_path, lang="zh_CN")) as zf:
        script = zf.read("run_autograder").decode()
    assert script.rstrip().endswith("--lang zh_CN"), script
