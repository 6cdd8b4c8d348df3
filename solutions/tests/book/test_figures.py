"""The book's figures in both editions (book/_code/figures.py draws, course_admin/book/figures.py checks).

A figure's words are drawn in Chinese from the page's catalog in the same execution as the English; the check
names a text or alt text left untranslated and a translation no figure uses any more, so an English label
cannot change without its translation. Drawn with ``svg.fonttype: none`` here, so the SVG shows its words.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402

from course_admin.book import cjk_font, figures  # noqa: E402

drawing = figures.drawing
PAGE = "99_planted"


@pytest.fixture
def locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(drawing, "LOCALE", tmp_path)
    monkeypatch.setitem(matplotlib.rcParams, "svg.fonttype", "none")  # words as <text>, to be read back
    from matplotlib import font_manager
    font_manager.fontManager.addfont(str(cjk_font.FONT))  # as the book's kernels do (cjk_font.STARTUP)
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["sans-serif", cjk_font.FAMILY])
    return tmp_path


def write(locale: Path, catalog: dict[str, str]) -> None:
    path = locale / "zh_CN" / "figures" / f"{PAGE}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(catalog, ensure_ascii=False), encoding="utf-8")


def planted_figure() -> plt.Figure:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="$d_k$ (theory)")
    ax.set_title("The variance grows")
    ax.set_xlabel("$d_k$")                             # maths alone: nothing to translate
    ax.set_xticks([0, 1], labels=["key", "query"])     # worded ticks: redrawn from their formatter
    ax.legend()
    return fig


def test_each_text_is_drawn_in_chinese_and_the_english_is_kept(locale: Path) -> None:
    write(locale, {"The variance grows": "方差随之增长", "key": "键", "query": "查询"})
    fig = planted_figure()
    data, metadata = drawing.Figures(PAGE).bundle(fig)
    english, chinese = data["image/svg+xml"], data[drawing.MIME["zh_CN"]]
    assert "方差随之增长" in chinese and "查询" in chinese and "The variance grows" not in chinese
    assert "The variance grows" in english and "query" in english and "查询" not in english
    said = metadata[drawing.METADATA]["zh_CN"]
    assert said["texts"] == ["$d_k$ (theory)", "The variance grows", "key", "query"]
    assert said["untranslated"] == ["$d_k$ (theory)"]     # the one the catalog lacks, drawn in English
    assert fig.axes[0].get_title() == "The variance grows"  # the figure itself is left in English
    plt.close(fig)


def executed(locale: Path, said: dict, alt: str = "A chart of the variance.") -> Path:
    """The record the build keeps of a page's figures (figures.record, as the plugin calls it)."""
    folder = locale / "seen"
    figures._SEEN.pop(PAGE, None)
    figures.record(PAGE, {"zh_CN": said}, alt, folder)
    figures._SEEN.pop(PAGE, None)
    return folder


def test_an_untranslated_text_or_alt_and_a_stale_entry_are_named(locale: Path) -> None:
    folder = executed(locale, {"texts": ["The variance grows", "heads", "key"], "untranslated": ["heads", "key"]})
    write(locale, {"The variance grows": "方差随之增长", "The old title": "旧标题", "key": "共3个键"})
    found = "\n".join(figures.problems(PAGE, folder))
    assert "figure text not translated: 'heads'" in found and "not translated: 'The variance grows'" not in found
    assert "'key': no space between Chinese and Latin text, digits or code" in found  # the typography of the book
    assert "alt text not translated: 'A chart of the variance.'" in found
    assert "stale, no figure of the page says 'The old title'" in found
    write(locale, {"The variance grows": "方差随之增长", "heads": "头", "key": "键", "A chart of the variance.": "方差图。"})
    left = figures.problems(PAGE, folder)  # complete now, but the page ran before: its drawing is English
    assert [p.split(": ", 1)[1] for p in left] == [f"drawn before its translation was added (run make book again): {t!r}"
                                                  for t in ("heads", "key")]
    executed(locale, {"texts": ["The variance grows", "heads", "key"], "untranslated": []})
    assert figures.problems(PAGE, folder) == []


@pytest.mark.parametrize("text, wanted", [("$d_k$", False), ("0.5", False), (r"$10^{2}$", False),
                                          ("$d_k$ (theory)", True), ("heads", True)])
def test_only_words_outside_maths_are_translated(text: str, wanted: bool) -> None:
    assert drawing.wants_translation(text) is wanted


def test_every_figure_of_the_book_goes_through_show() -> None:
    """plt.show() would draw English only: the Chinese edition would show it with English words."""
    book = figures.ROOT / "book"
    assert [p.name for p in book.glob("*.md") if "\nplt.show()" in p.read_text(encoding="utf-8")] == []


def test_chinese_beside_maths_is_drawn_with_the_cjk_font(locale: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Outside $...$ matplotlib's maths layout has one font and no fallback: drawn as translated, the Chinese
    of '点积的方差随 $d_k$ 增长' would be boxes (it logs a missing glyph per character); drawn through
    mixed_with_maths, every glyph is found, and the English drawing keeps its own font."""
    assert drawing.CJK_FAMILY == cjk_font.FAMILY
    assert drawing.mixed_with_maths("点积的方差随 $d_k$ 增长") == r"点积的方差随$\ d_k\ $增长"
    assert drawing.mixed_with_maths("The variance grows with $d_k$") is None   # no Chinese: as it is
    assert drawing.mixed_with_maths("方差随之增长") is None                       # no maths: plain fallback works

    fig, ax = plt.subplots()
    ax.set_title("点积的方差随 $d_k$ 增长")
    with caplog.at_level("WARNING", logger="matplotlib.mathtext"):
        drawing._svg(fig)
    assert "does not have a glyph" in caplog.text, "the planted raw text should lack its glyphs"
    plt.close(fig)

    caplog.clear()
    write(locale, {"The variance grows with $d_k$": "点积的方差随 $d_k$ 增长"})
    fig, ax = plt.subplots()
    title = ax.set_title("The variance grows with $d_k$")
    family = title.get_fontfamily()
    ax.plot([1, 2], [1, 2], label="The variance grows with $d_k$")
    ax.legend()  # a legend measures "lp" in each text's font: with the CJK font alone, both are missing
    with caplog.at_level("WARNING", logger="matplotlib.mathtext"), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        data, _ = drawing.Figures(PAGE).bundle(fig)
    assert "does not have a glyph" not in caplog.text
    assert [str(w.message) for w in warned if "missing from font" in str(w.message)] == []
    assert "点积的方差随" in data[drawing.MIME["zh_CN"]] and "点积" not in data["image/svg+xml"]
    assert title.get_text() == "The variance grows with $d_k$" and title.get_fontfamily() == family
    plt.close(fig)


def test_a_learners_report_is_shown_in_each_language_from_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """book/_code/printed.py: the report runs once per language (COURSE_LANG, read by course_lib's i18n each time
    it translates), both land in one output, and the caller's COURSE_LANG is left as it was."""
    from course_lib.provided import i18n
    from course_lib.provided.layout import LAYOUT
    from course_lib.provided.loader import load_file
    printed = load_file("course_book_printed", LAYOUT.root / "book" / "_code" / "printed.py")
    assert printed.MIME == figures.TEXT_MIME and figures.priorities("zh_CN")[1] == ("html", printed.MIME["zh_CN"], 2)
    message = "The mask is ignored: masked keys still receive weight."
    monkeypatch.setenv("COURSE_LANG", "en")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda bundle, raw: shown.append(bundle))
    printed.in_each_language(lambda: print(i18n._(message)))
    assert shown == [{"text/plain": message + "\n", printed.MIME["zh_CN"]: i18n.catalog("zh_CN")[message] + "\n"}]
    assert "掩码" in shown[0][printed.MIME["zh_CN"]]
    assert i18n.language() == "en"
