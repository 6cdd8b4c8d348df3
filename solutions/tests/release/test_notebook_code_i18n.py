"""The Chinese notebooks' code cells (code_i18n.py): comments, printed lines, docstrings and plot labels translated,
the code itself the same AST as the English, nbgrader's cells the English bytes; planted breaches of each rule
caught; and `make submit`'s empty-answer check knows both placeholders (preflight.py). A few seconds (no nbgrader
run). The plot labels' font: test_plot_font.py."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from course_admin.release import code_i18n, notebook_i18n
from course_lib.provided import preflight
from course_lib.provided.layout import LAYOUT

LANG = "zh_CN"
NAMES = [s.name for s in LAYOUT.exercise_sources()]
CELL = '''import torch

words = ["the", "cat"]  # (seq,): the sentence
scale = True  # noqa: F841


def f(x):
    """Return x doubled."""
    return 2 * x


print("largest weight:", f(scale), f"scale={scale:.1f}")
ax.set_xlabel("key (attended to)")
ax.plot(words, label="mean norm")
'''


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_the_rule_picks_comments_printed_lines_docstrings_and_plot_labels_only() -> None:
    prose = ["(seq,): the sentence", "Return x doubled.", "largest weight:", "scale={scale:.1f}"]
    assert [p.text for p in code_i18n.pieces(CELL, plot=False)] == prose
    # plot labels join the rule with PLOT_LABELS, on: the learner's package has a CJK font (provided/plots.py)
    assert code_i18n.PLOT_LABELS
    assert [p.text for p in code_i18n.pieces(CELL)] == [*prose, "key (attended to)", "mean norm"]
    assert [p.text for p in code_i18n.pieces(CELL, prose=False)] == ["key (attended to)", "mean norm"]
    nbgrader_cell = {"cell_type": "code", "metadata": {"nbgrader": {"locked": True}}, "source": "check()  # check it"}
    assert not code_i18n.translatable(nbgrader_cell)
    assert code_i18n.units({"cells": [nbgrader_cell]}) == []


def test_the_skeleton_keeps_the_code_and_drops_only_the_words() -> None:
    zh = code_i18n.translate_source(CELL, {"(seq,): the sentence": "(seq,)：句子", "largest weight:": "最大权重：",
                                           "scale={scale:.1f}": "缩放={scale:.1f}", "Return x doubled.": "返回 x 的两倍。"})
    assert "# (seq,)：句子" in zh and '"最大权重："' in zh and 'f"缩放={scale:.1f}"' in zh and '"""返回 x 的两倍。"""' in zh
    assert code_i18n.skeleton(zh) == code_i18n.skeleton(CELL)
    for planted in (CELL.replace("2 * x", "3 * x"), CELL.replace('"cat"', '"dog"'),  # code, a data string
                    CELL.replace("{scale:.1f}", "{scale:.2f}"), CELL.replace('ax.plot(words', 'ax.plot(["the"]')):
        assert code_i18n.skeleton(planted) != code_i18n.skeleton(CELL), planted
    assert code_i18n.skeleton(CELL.replace('"key (attended to)"', '"键"')) == code_i18n.skeleton(CELL), "a label"


@pytest.mark.parametrize("en, zh, found", [
    ("largest weight of each row:", "largest weight of each row:", "still English"),
    ("largest weight of each row:", "每一行的最大权重:", "half-width"),
    ("step {step:4d}  loss", "第 {step} 步  损失", "{fields} changed"),
    ("(1, 45): 40 pad tokens", "(1, 45)：4 个填充词元", "numbers changed"),
    ("white = True = may attend", "白色 = True = 可以注意", "term list"),
    ("padding averaged in", "填充\n也被平均", "line break"),
])
def test_the_lint_finds_a_broken_translation(en: str, zh: str, found: str) -> None:
    assert any(found in issue for issue in code_i18n.issues(en, zh)), code_i18n.issues(en, zh)


def test_untranslated_stale_and_code_changing_translations_stop_the_edition() -> None:
    name = "ch02_attention"
    english = _nb(LAYOUT.root / "solutions" / "source" / name / f"{name}.ipynb")
    catalog = notebook_i18n.load(notebook_i18n.catalog_path(LAYOUT, LANG, name))
    assert catalog.code and notebook_i18n.problems_of(english, catalog, LANG) == []
    planted = copy.deepcopy(english)
    cell = next(c for c in planted["cells"] if c.get("id") == "workbook-heatmap")
    cell["source"] = _text(cell).replace("# then run again with False", "# then run it again with False")
    left = notebook_i18n.problems_of(planted, catalog, LANG)
    assert left == ["code untranslated: 'then run it again with False'",
                    "code stale (its English is gone): 'then run again with False'"], left
    broken = copy.deepcopy(catalog)
    broken.code = {**catalog.code, "largest weight of each row:": '每一行的最大权重：", 1 + "'}
    assert any("changes the code" in p or "does not parse" in p
               for p in notebook_i18n.problems_of(english, broken, LANG)), "a translation that adds code"


@pytest.mark.parametrize("name", NAMES)
def test_each_chinese_notebook_has_its_words_translated_and_its_code_unchanged(name: str) -> None:
    catalog = code_i18n.load(code_i18n.path(LAYOUT.solutions, LANG, name))
    for english_path, edition_path in (
            (LAYOUT.root / "solutions" / "source" / name / f"{name}.ipynb",
             LAYOUT.root / "solutions" / f"source_{LANG}" / name / f"{name}.ipynb"),
            (LAYOUT.root / "exercises" / name / f"{name}.ipynb", LAYOUT.root / f"exercises_{LANG}" / name / f"{name}.ipynb")):
        for en, zh in zip(_nb(english_path)["cells"], _nb(edition_path)["cells"]):
            if en["cell_type"] != "code":
                continue
            if not code_i18n.translatable(en):
                assert _text(zh) == _text(en), f"{edition_path.name} {en.get('id')}: nbgrader's cell changed"
                continue
            assert code_i18n.skeleton(_text(zh)) == code_i18n.skeleton(_text(en)), f"{edition_path.name} {en.get('id')}"
            assert [p.text for p in code_i18n.pieces(_text(zh))] == [
                catalog.get(p.text) for p in code_i18n.pieces(_text(en))], f"{edition_path.name} {en.get('id')}"


def test_the_chinese_printed_line_and_plot_labels_are_in_the_release() -> None:
    released = (LAYOUT.root / f"exercises_{LANG}" / "ch02_attention" / "ch02_attention.ipynb").read_text(encoding="utf-8")
    assert "每一行的最大权重：" in released and "largest weight of each row" not in released
    assert "然后改成 False 再运行一次" in released and "then run again with False" not in released
    assert 'ax.set_xlabel(\\"键（被关注者）\\")' in released and "key (attended to)" not in released


def test_make_submit_counts_either_placeholder(tmp_path: Path) -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": text}
             for text in ("在此作答", "My answer.", ["YOUR ANSWER ", "HERE"])]
    notebook = tmp_path / "ch02_attention.ipynb"
    notebook.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert preflight.empty_answers(notebook) == (2, "在此作答")
    notebook.write_text(json.dumps({"cells": cells[1:]}), encoding="utf-8")
    assert preflight.empty_answers(notebook) == (1, "YOUR ANSWER HERE")
    notebook.write_text(json.dumps({"cells": cells[1:2]}), encoding="utf-8")
    assert preflight.empty_answers(notebook) == (0, "YOUR ANSWER HERE")
    released = LAYOUT.root / f"exercises_{LANG}" / "ch02_attention" / "ch02_attention.ipynb"
    assert preflight.empty_answers(released)[0] == 2, "the Chinese release's two written answers are still empty"


@pytest.mark.parametrize("name", NAMES)
def test_the_plot_labels_are_translated(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every plot label has its translation, linted; one missing stops the edition (PLOT_LABELS is on)."""
    english = _nb(LAYOUT.root / "solutions" / "source" / name / f"{name}.ipynb")
    catalog = code_i18n.load(code_i18n.path(LAYOUT.solutions, LANG, name))
    assert code_i18n.problems(english, catalog) == []
    if name == "ch02_attention":
        zh = copy.deepcopy(english)
        code_i18n.translate_cells(zh, catalog)
        assert 'ax.set_xlabel("键（被关注者）")' in "".join(_text(c) for c in zh["cells"])
        assert code_i18n.problems(english, {k: v for k, v in catalog.items() if k != "query"}) == [
            "code untranslated: 'query'"]
        monkeypatch.setattr(code_i18n, "PLOT_LABELS", False)  # off, the label is no unit to translate
        assert code_i18n.problems(english, {k: v for k, v in catalog.items() if k != "query"}) == []


@pytest.mark.parametrize("lang", sorted(preflight.ANSWER_PLACEHOLDER))
def test_each_editions_written_answers_hold_its_own_placeholder(lang: str) -> None:
    """nbgrader's ClearSolutions.text_stub per edition (course release; nbgrader_config.py the same): a Chinese
    learner's answer cells read 在此作答, which `make submit` counts as unanswered."""
    folder = LAYOUT.root / ("exercises" if lang == "en" else f"exercises_{lang}")
    answers = [cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
               for notebook in sorted(folder.glob("ch*/*.ipynb"))
               for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
               if cell["cell_type"] == "markdown" and cell.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert len(answers) >= 8 and {a.strip() for a in answers} == {preflight.ANSWER_PLACEHOLDER[lang]}
    config = (LAYOUT.root / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.ClearSolutions.text_stub = ANSWER_PLACEHOLDER[LANG]" in config
