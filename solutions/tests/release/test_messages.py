"""What the course says to learners, in Chinese (course_lib/provided/i18n.py, course_admin/release/messages.py): every
message translated and in sync with its English, a missing one falling back to English (and failing here), the
language read from the learner tree, and `course check` speaking Chinese on a planted wrong answer."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from course_admin.release import messages
from course_lib.provided import i18n
from course_lib.provided.layout import LAYOUT


def test_every_message_is_translated_and_in_sync() -> None:
    """The fallback to English is for a learner's sake only: here a missing or stale translation fails."""
    left = messages.problems("zh_CN")
    assert not left, f"{len(left)} problem(s) in {LAYOUT.rel(messages.path_of('zh_CN'))}; `python -m " \
        "course_admin.release.messages todo zh_CN` lists what to translate:\n" + "\n".join(left[:20])


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A copy of what messages are extracted from, to edit."""
    for pattern in messages.SOURCES:
        for path in LAYOUT.root.glob(pattern):
            if path.is_file() and "__pycache__" not in path.parts:
                target = tmp_path / path.relative_to(LAYOUT.root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    shutil.copytree(LAYOUT.root / "tests" / "specs", tmp_path / "tests" / "specs", dirs_exist_ok=True)
    shutil.copytree(LAYOUT.hidden, tmp_path / LAYOUT.rel(LAYOUT.hidden), dirs_exist_ok=True)  # hidden cases' abouts
    return tmp_path


def test_a_planted_change_to_one_english_message_is_caught(sources: Path) -> None:
    old = "not implemented yet: {detail}"
    path = sources / "course_lib" / "provided" / "checking.py"
    path.write_text(path.read_text(encoding="utf-8").replace(old, "not written yet: {detail}"), encoding="utf-8")
    wanted = messages.extract(sources)
    assert "not written yet: {detail}" in wanted and old not in wanted
    done = messages.load("zh_CN")
    assert old in done, "the shipped catalog translates the message before the change"
    untranslated = [m for m in wanted if not done.get(m)]
    stale = [m for m in done if m not in wanted]
    assert untranslated == ["not written yet: {detail}"] and stale == [old]


def test_an_f_string_given_to_the_marker_is_refused(sources: Path) -> None:
    path = sources / "course_lib" / "provided" / "check.py"
    path.write_text(path.read_text(encoding="utf-8") + '\n\nX = _(f"{1} checks")\n', encoding="utf-8")
    with pytest.raises(messages.MessageError, match=r"check\.py:\d+: an f-string given to _\(\)"):
        messages.extract(sources)


def test_a_translation_that_breaks_a_field_code_or_typography_is_named() -> None:
    english = "{name}: shape {got}, expected {want}"
    assert messages.issues(english, "{name}：形状为 {got}，应为 {want}") == []
    assert messages.issues(english, "{name}：形状为 {got}，应为 {wanted}")[0].startswith("fields")
    assert messages.issues("use `dim=-1`", "使用 dim=-1") == ["markup lost: '`dim=-1`'"]
    assert messages.issues("the mask", "掩码,用于") != []  # half-width comma beside Chinese


def test_a_missing_translation_falls_back_to_english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    assert i18n._("a message no catalog has") == "a message no catalog has"
    assert i18n._("not implemented yet") == messages.load("zh_CN")["not implemented yet"] != "not implemented yet"
    monkeypatch.setenv("COURSE_LANG", "en")
    assert i18n._("not implemented yet") == "not implemented yet"


def test_the_language_comes_from_the_environment_then_the_trees_pyproject(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.course]\n# the language\nlanguage = "zh_CN"\n')
    assert i18n._tree_language(pyproject) == "zh_CN"
    other = tmp_path / "other.toml"
    other.write_text('[project]\nlanguage = "zh_CN"\n')  # another table's key is not the course's
    assert i18n._tree_language(other) == "en"
    monkeypatch.delenv("COURSE_LANG", raising=False)
    assert i18n.language() == "en"  # this repository's pyproject names none
    for name in ("zh", "zh-CN", "zh_cn"):
        assert i18n.normalise(name) == "zh_CN"
    with pytest.raises(ValueError, match="unknown language 'fr'.*en and zh_CN"):
        i18n.normalise("fr")


def test_course_check_speaks_chinese_on_a_planted_wrong_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Softmax over the wrong axis, as chapter 02's known mistake: the table, the mistake's explanation and the
    closing line in Chinese; the same code in English says it in English."""
    from course_admin.release.variants import wrong_impls
    from course_lib.provided import check as check_module

    wrong = wrong_impls("02")["softmax_wrong_axis"]
    zh = messages.load("zh_CN")
    explanation = zh[next(m for m in zh if m.startswith("Softmax over the wrong axis"))]
    monkeypatch.setenv("COURSE_LANG", "zh_CN")
    results = check_module.results_and_causes("02", wrong)[0]
    failed = [r for r in results if r.status != "pass"]
    assert failed and any(explanation in r.message for r in failed), [r.message for r in failed][:3]
    table = check_module.table(results)
    assert zh["check"] in table and zh["total"] in table and zh["FAIL"] in table
    assert zh["values, no mask"] in table and "values, no mask" not in table, "a case's name in Chinese too (H2)"
    assert [r.case for r in results][0] == "values, no mask", "the result keeps the English key"
    monkeypatch.setenv("COURSE_LANG", "en")
    english = check_module.results_and_causes("02", wrong)[0]
    assert any(r.message.startswith("Softmax over the wrong axis") for r in english if r.status != "pass")
    assert [r.earned for r in english] == [r.earned for r in results], "the language never changes a score"


def test_the_catalog_is_plain_json_with_one_translation_per_message() -> None:
    data = json.loads(messages.path_of("zh_CN").read_text(encoding="utf-8"))
    assert isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, str) and v for k, v in data.items())


RETIRED = {  # the course's term list (issue 42, M7-M12): a rendering the catalog no longer uses -> the term
    "可以注意": "可以关注", "注意到": "关注到", "被注意": "被关注", "你的教师": "老师", "从零构建": "从零实现",
    "标准误差": "标准误", "seed 000": "参考原文 000", "种子文章": "参考原文", "代码桩": "桩代码",
    "权重共享": "权重绑定（tie）或嵌入共享（share）", "的算法）": "的分母取法）",
}


def test_the_catalog_speaks_the_courses_term_list() -> None:
    zh = messages.load("zh_CN")
    found = [(old, new, en[:60]) for en, text in zh.items() for old, new in RETIRED.items() if old in text]
    assert not found, f"{len(found)} retired rendering(s), (old, the term, message): {found[:10]}"
    assert zh["points"] == "得分", "points (a grade) is 得分; 分数 is attention's scores"
