"""The Chinese edition's catalogs (catalogs.py): in sync with the English, markup kept, typography and terms.

Planted catalogs show each problem is found: an English paragraph changed after its translation (stale), a
fuzzy entry, a missing translation, a lost inline code span and role, half-width punctuation, Chinese
touching Latin text, a glossary term rendered otherwise; messages with nothing to translate need nothing.
The real catalogs under book/locale are checked for what needs no build (markup, typography, terms);
whether they cover the current English is checked by `make book` (editions.py), which fails otherwise.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from course_admin.book import catalogs, editions, language

PAGE = "book/99_planted"


def write(path: Path, entries: dict[str, str], fuzzy: set[str] = frozenset()) -> None:
    cat = Catalog(locale="zh_CN")
    for english, chinese in entries.items():
        cat.add(english, chinese, flags=("fuzzy",) if english in fuzzy else ())
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        write_po(fh, cat)


@pytest.fixture
def planted(tmp_path: Path, monkeypatch) -> Path:
    """A page of three messages, translated in sync; returns the folder of the extracted English."""
    monkeypatch.setattr(catalogs, "CATALOGS", tmp_path / "locale")
    english = {"Attention is a weighted average.": "", "Call `attention(q, k, v)` here.": "", "81.0%": ""}
    write(tmp_path / "gettext" / f"{PAGE}.pot", english)
    write(catalogs.catalog(PAGE), {"Attention is a weighted average.": "注意力是一个加权平均。",
                                   "Call `attention(q, k, v)` here.": "在这里调用 `attention(q, k, v)`。"})
    return tmp_path / "gettext"


def test_a_catalog_in_sync_has_no_problem(planted: Path) -> None:
    assert catalogs.problems(PAGE, planted) == []                 # "81.0%" needs no translation


def test_a_changed_english_paragraph_is_caught(planted: Path) -> None:
    pot = catalogs.read(planted / f"{PAGE}.pot")
    changed = {str(m.id): "" for m in pot if m.id}
    del changed["Attention is a weighted average."]
    changed["Attention is a weighted average of the values."] = ""
    write(planted / f"{PAGE}.pot", changed)
    [problem] = catalogs.problems(PAGE, planted)
    assert "untranslated: 'Attention is a weighted average of the values.'" in problem
    assert catalogs.todo(PAGE, extracted=planted) == ["Attention is a weighted average of the values."]


def test_apply_against_an_extraction_without_the_outputs_says_so(planted: Path, capsys) -> None:
    """An extraction made with execution off lacks every executed output's messages (tables, printed lines):
    applying against it makes their translations obsolete, which `make book` then finds untranslated. It says so."""
    table = {f"row {i} of a printed table": f"打印出的表格第 {i} 行" for i in range(5)}
    write(catalogs.catalog(PAGE), {"Attention is a weighted average.": "注意力是一个加权平均。",
                                   "Call `attention(q, k, v)` here.": "在这里调用 `attention(q, k, v)`。", **table})
    catalogs.apply(PAGE, {}, planted)                             # the pot has none of the table's rows
    assert "5 translated messages of book/99_planted are not in" in capsys.readouterr().err
    catalogs.apply(PAGE, {}, planted)                             # a page whose English lost nothing: silent
    assert capsys.readouterr().err == ""


def test_fuzzy_missing_and_broken_translations_are_named(planted: Path) -> None:
    write(catalogs.catalog(PAGE), {"Attention is a weighted average.": "注意力是一个加权平均。",
                                   "Call `attention(q, k, v)` here.": "在这里调用 attention。"},
          fuzzy={"Attention is a weighted average."})
    found = "\n".join(catalogs.problems(PAGE, planted))
    assert "fuzzy" in found and "lost '`attention(q, k, v)`'" in found
    catalogs.catalog(PAGE).unlink()
    assert "no catalog" in catalogs.problems(PAGE, planted)[0]


@pytest.mark.parametrize("chinese, said", [
    ("注意力是加权平均,对吧", "half-width punctuation after Chinese"),
    ("使用PyTorch实现", "no space between Chinese and Latin"),
    ("共3个头", "no space between Chinese and Latin"),
    ("调用`f`即可", "no space between Chinese and Latin"),
    ("**参考答案。**普通文字", "bold not closed"),  # CommonMark: a closing ** after punctuation needs no letter after
])
def test_typography_of_chinese_technical_books(chinese: str, said: str) -> None:
    assert any(said in issue for issue in catalogs.typography(chinese))


def test_good_typography_passes() -> None:
    assert catalogs.typography("使用 PyTorch 的 `nn.Module`，共 3 个头；准确率为 82.0%。") == []
    assert catalogs.typography("**参考答案**。普通文字，**加粗。**") == []  # closed before the 。, or at the end


def test_glossary_terms_are_rendered_as_the_glossary_does() -> None:
    pairs = dict(catalogs.glossary())
    assert pairs["self-attention"] == ["自注意力"] and "交叉注意力" in pairs["cross-attention"]
    assert catalogs.terms("Self-attention mixes positions.", "自注意力混合各个位置。") == []
    assert catalogs.terms("Self-attention mixes positions.", "自我关注混合各个位置。") == [
        "glossary: 'self-attention' is 自注意力"]
    assert catalogs.terms("Call `self-attention` here.", "在这里调用 `self-attention`。") == []  # code is code
    # a one-word term counts in lower case only: capitalised it is the class (`Encoder`, often without backticks)
    assert catalogs.terms("The encoder stacks layers.", "Encoder 堆叠多层。") == ["glossary: 'encoder' is 编码器"]
    assert catalogs.terms("Encoder with norm_first=True ends with its own LayerNorm", "norm_first=True 的 Encoder 以"
                          "它自己的 LayerNorm 结束") == []
    # a displayed equation's \\text{} words are maths and stay as they are
    maths = "\\begin{aligned}\nx &= \\mathrm{CrossAttention}(x, m, m;\\ \\text{source padding mask})\n\\end{aligned}"
    assert catalogs.terms(maths, maths) == [] and catalogs.terms("a padding mask", "a padding mask") != []


@pytest.mark.parametrize("msgid, needed", [("Chapters", True), ("81.0%", False), ("finetune-quick-bigrams", False),
                                           ("LSTM", False), ("`course_lib/x.py`", False), ("test accuracy", True)])
def test_what_needs_translation(msgid: str, needed: bool) -> None:
    assert catalogs.needs_translation(msgid) is needed


def test_every_real_translation_keeps_markup_typography_and_terms() -> None:
    found = []
    for po in sorted(catalogs.CATALOGS.rglob("*.po")):
        for m in catalogs.read(po):
            if m.id and m.string and not m.fuzzy:
                english, chinese = str(m.id), str(m.string)
                issues = [f"lost {p!r}" for p in catalogs.markup_lost(english, chinese)]
                issues += catalogs.typography(chinese) + catalogs.terms(english, chinese, str(po))
                found += [f"{po.name}: {english[:50]!r}: {issue}" for issue in issues]
    assert found == []


def test_each_page_links_to_itself_in_the_other_edition() -> None:
    assert language.other_edition("book/02_attention", "en")[:2] == ("../zh/book/02_attention.html", "zh-CN")
    assert language.other_edition("book/02_attention", "zh_CN")[:2] == ("../../book/02_attention.html", "en")
    assert language.other_edition("index", "en")[0] == "zh/index.html"
    assert editions.ZH_HTML.relative_to(editions.BUILD / "html").as_posix() == language.SUBFOLDER
