"""The exercise notebooks in Chinese (notebook_i18n.py; `course release` writes solutions/source_zh_CN/, exercises_zh_CN/): every markdown cell translated
from the current English, the editions' notebooks the same as the English but for their prose, and a planted
English change caught. A few seconds (no nbgrader run)."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from course_admin.release import code_i18n, notebook_i18n
from course_admin.release.notebook_facts import HEADINGS
from course_admin.release.stubs import ReleaseError
from course_lib.provided.layout import LAYOUT
from course_lib.provided.preflight import ANSWER_PLACEHOLDER

LANG = "zh_CN"
SOURCES = [s / f"{s.name}.ipynb" for s in LAYOUT.exercise_sources()]
IDS = [s.parent.name for s in SOURCES]


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _catalog(name: str) -> dict:
    return notebook_i18n.load(notebook_i18n.catalog_path(LAYOUT, LANG, name))


def test_every_notebook_is_translated_from_its_current_english() -> None:
    left = notebook_i18n.check(LAYOUT, LANG)
    assert not left, ("exercise notebooks whose Chinese is behind their English (translate with "
                      "`python -m course_admin.release.notebook_i18n todo zh_CN NN`):\n" + "\n".join(left[:20]))


def test_a_planted_english_change_is_stale_and_stops_the_edition() -> None:
    source = SOURCES[1]  # chapter 02
    english, catalog = _nb(source), _catalog(source.parent.name)
    assert notebook_i18n.problems_of(english, catalog, LANG) == []
    planted = copy.deepcopy(english)
    cell = next(c for c in planted["cells"] if c["cell_type"] == "markdown" and c["id"] == "setup-md")
    cell["source"] = _text(cell).replace("Run this cell first.", "Run this cell first, and only once.")
    planted["cells"].append({"cell_type": "markdown", "id": "new-cell", "metadata": {}, "source": "A new paragraph."})
    left = notebook_i18n.problems_of(planted, catalog, LANG)
    assert left == ["untranslated: cell 'new-cell'",
                    "stale: cell 'setup-md' (its English changed since it was translated)"], left
    with pytest.raises(ReleaseError, match="not in sync with the English"):
        notebook_i18n.translate(planted, catalog, LANG, "ch02")
    # what the release writes needs no new translation: another number of points, a refilled block
    refilled = copy.deepcopy(english)
    for c in refilled["cells"]:
        c["source"] = re.sub(r"\(\d+ points?, graded by hand\)", "(7 points, graded by hand)", _text(c))
        c["source"] = c["source"].replace("What is graded: ", "What is graded: 99 points, ")
    assert notebook_i18n.problems_of(refilled, catalog, LANG) == []


@pytest.mark.parametrize("broken, found", [
    (lambda t: t.replace("### BEGIN SOLUTION\n", ""), "markers changed"),
    (lambda t: t.replace(HEADINGS[LANG][2], "（2 分）"), "the written question's points"),
    (lambda t: t.replace("$", "", 2), "markup lost"),
    (lambda t: t.replace("，", ",", 1), "half-width"),
])
def test_the_lint_finds_a_broken_translation(broken, found) -> None:
    catalog = _catalog(IDS[1])
    en_q, zh_q = catalog["question"]["en"], catalog["question"][LANG]
    en_a, zh_a = catalog["answer-sqrt-dk"]["en"], catalog["answer-sqrt-dk"][LANG]
    assert notebook_i18n.issues(en_q, zh_q, LANG) == [] and notebook_i18n.issues(en_a, zh_a, LANG) == []
    issues = notebook_i18n.issues(en_q, broken(zh_q), LANG) + notebook_i18n.issues(en_a, broken(zh_a), LANG)
    assert any(found in issue for issue in issues), issues


@pytest.mark.parametrize("name", IDS)
def test_each_edition_has_the_same_cells_ids_points_and_code(name: str) -> None:
    for part, english_path in (("source", LAYOUT.root / "solutions" / "source" / name / f"{name}.ipynb"),
                               ("release", LAYOUT.root / "exercises" / name / f"{name}.ipynb")):
        english = _nb(english_path)
        folder = LAYOUT.root / ("solutions" if part == "source" else "") / f"{'source' if part == 'source' else 'exercises'}_{LANG}"
        edition = _nb(folder / name / f"{name}.ipynb")
        assert edition["metadata"].get("language") == LANG
        assert len(edition["cells"]) == len(english["cells"])
        for en, zh in zip(english["cells"], edition["cells"]):
            answer = (en["metadata"].get("nbgrader") or {}).get("solution") and en["cell_type"] == "markdown"
            if answer and part == "release":  # each edition's placeholder, so nbgrader's checksum of it differs
                assert (_text(en).strip(), _text(zh).strip()) == (ANSWER_PLACEHOLDER["en"], ANSWER_PLACEHOLDER[LANG])
                en_meta, zh_meta = ({**m, "nbgrader": {k: v for k, v in m["nbgrader"].items() if k != "checksum"}}
                                    for m in (en["metadata"], zh["metadata"]))
                assert (zh["cell_type"], zh.get("id"), zh_meta) == (en["cell_type"], en.get("id"), en_meta)
                continue
            assert (zh["cell_type"], zh.get("id"), zh["metadata"]) == (en["cell_type"], en.get("id"), en["metadata"])
            if en["cell_type"] == "code" and not en["metadata"].get("nbgrader"):  # its words only (code_i18n.py)
                assert code_i18n.skeleton(_text(zh)) == code_i18n.skeleton(_text(en)), f"{part} {name} {en.get('id')}"
            elif en["cell_type"] == "code":
                assert _text(zh) == _text(en), f"{part} {name} cell {en.get('id')}: nbgrader's code cells are the same"
            elif re.search(r"[A-Za-z]{4}", _text(en)):
                assert re.search(r"[\u4e00-\u9fff]", _text(zh)), f"{part} {name} cell {en.get('id')} is not Chinese"


@pytest.mark.parametrize("name", IDS)
def test_each_edition_says_the_points_the_english_says(name: str) -> None:
    english = _text(_nb(LAYOUT.root / "exercises" / name / f"{name}.ipynb")["cells"][0])
    chinese = _text(_nb(LAYOUT.root / f"exercises_{LANG}" / name / f"{name}.ipynb")["cells"][0])
    total = re.search(r"What is graded: ([\d.]+) points? in all", english)
    items = re.findall(r"^- \*\*([\d.]+) points?\*\*", english, re.M)
    assert total and items, english
    assert re.search(rf"评分内容：共 {re.escape(total[1])} 分。", chinese), chinese
    assert re.findall(r"^- \*\*([\d.]+) 分\*\*", chinese, re.M) == items
    en_heads = [m for c in _nb(LAYOUT.root / "exercises" / name / f"{name}.ipynb")["cells"]
                for m in re.findall(r"\(([\d.]+) points?, graded by hand\)", _text(c))]
    zh_heads = [m for c in _nb(LAYOUT.root / f"exercises_{LANG}" / name / f"{name}.ipynb")["cells"]
                for m in re.findall(r"（([\d.]+) 分，人工评分）", _text(c))]
    assert zh_heads == en_heads and en_heads


@pytest.mark.parametrize("name", IDS)
def test_no_model_answer_reaches_the_chinese_release(name: str) -> None:
    released = (LAYOUT.root / f"exercises_{LANG}" / name / f"{name}.ipynb").read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in released and "参考答案" not in released
    for cid, entry in _catalog(name).items():
        if "### BEGIN SOLUTION" in entry[LANG]:
            answer = entry[LANG].split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0]
            sentence = max(re.split(r"[。\n]", answer), key=len)
            assert sentence and json.dumps(sentence, ensure_ascii=False)[1:-1] not in released, (name, cid)
