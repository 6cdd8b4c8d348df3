"""The built book's two editions (editions.py, language.py): every page in English and in Chinese.

Each page of ``_build/html`` says ``<html lang="en">`` and links to the same page of ``_build/html/zh``, which
says ``lang="zh-CN"``, links back, and is Chinese (its title translated) when catalogs.TRANSLATED lists it,
else says it is not translated yet; the shipped CJK font has a glyph for every character of the Chinese
edition. The browser test (test_browser.py) opens the pages of both.

Needs the built book ($COURSE_BOOK_HTML, else _build/html); skipped without it unless $COURSE_REQUIRE_BOOK.
"""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from course_admin.book import browser_check, catalogs, cjk_font, language, outputs
from course_lib.provided.layout import REPO_ROOT

pytestmark = [pytest.mark.book]

BOOK = Path(os.environ.get("COURSE_BOOK_HTML") or REPO_ROOT / "_build" / "html")
ZH = BOOK / language.SUBFOLDER
REQUIRED = bool(os.environ.get("COURSE_REQUIRE_BOOK"))
LANG = re.compile(r'<html lang="([^"]+)"')
SWITCH = re.compile(r'<p class="course-edition"[^>]*><a href="([^"]+)" hreflang="([^"]+)"')
TITLE = re.compile(r"<h1>(.*?)<", re.S)


@pytest.fixture(scope="module")
def editions() -> tuple[list[Path], list[Path]]:
    if not (BOOK / "index.html").is_file() or not (ZH / "index.html").is_file():
        if REQUIRED:
            pytest.fail(f"no built book with its Chinese edition at {BOOK} ($COURSE_REQUIRE_BOOK is set)")
        pytest.skip("no built book (make book)")
    english = [p for p in browser_check.pages(BOOK) if ZH not in p.parents and not browser_check.redirect_of(p)]
    chinese = [p for p in browser_check.pages(ZH) if not browser_check.redirect_of(p)]
    return english, chinese


def test_every_page_has_its_twin_in_the_other_edition(editions) -> None:
    english, chinese = editions
    assert {p.relative_to(BOOK) for p in english} == {p.relative_to(ZH) for p in chinese}
    for page, tag, other in [(p, "en", "zh-CN") for p in english] + [(p, "zh-CN", "en") for p in chinese]:
        html = page.read_text(encoding="utf-8")
        assert LANG.search(html)[1] == tag, page
        if "genindex" in page.name or "search" in page.name:
            continue
        href, hreflang = SWITCH.search(html).groups()
        assert hreflang == other and (page.parent / href).resolve().is_file(), (page, href)


def test_the_translated_pages_are_chinese_and_the_others_say_they_are_not(editions) -> None:
    _, chinese = editions
    done = set(catalogs.translated())
    assert done, "no page is translated yet"
    for page in chinese:
        html = page.read_text(encoding="utf-8")
        name = page.relative_to(ZH).with_suffix("").as_posix()
        if not name.startswith("book/"):
            continue
        title = TITLE.search(html)[1]
        if name in done:
            assert cjk_font.CJK.search(title) and language.UNTRANSLATED not in html, name
        else:                                                    # shown as it is, partly English, said so
            assert language.UNTRANSLATED in html, name


def test_the_shipped_font_draws_every_character_of_the_chinese_edition(editions) -> None:
    _, chinese = editions
    used = cjk_font.characters(*(p.read_text(encoding="utf-8") for p in chinese))
    missing = sorted(used - cjk_font.font_characters())
    assert len(used) > 300 and missing == [], "".join(missing[:80])


def test_a_phrase_the_code_inserts_is_in_each_editions_language(editions) -> None:
    """Chapter 03 glues "the same" (English) and "相同" (``p_all_same__zh_CN``): one execution, each edition its own
    phrase (language.glued_for); a page without a Chinese twin of a glued phrase would show the English."""
    english = (BOOK / "book" / "03_multihead_attention.html").read_text(encoding="utf-8")
    chinese = (ZH / "book" / "03_multihead_attention.html").read_text(encoding="utf-8")
    same = re.search(r"64 heads are (?:<[^>]+>)*(the same|different)", english)
    assert same, "chapter 03's English sentence with p_all_same moved"
    after = re.sub(r"<[^>]+>", "", chinese.split("64 个头", 1)[1])[:80]
    assert {"the same": "完全相同", "different": "并不相同"}[same[1]] in after
    assert "the same" not in re.sub(r"<[^>]+>", "", chinese.split("64 个头", 1)[1])[:80]


def test_the_chinese_edition_says_the_theme_and_config_words_in_chinese(editions) -> None:
    """editions.CHINESE: the book's title and author, and the fold of a hidden code cell, in Chinese; the English
    edition keeps its own."""
    english, chinese = editions
    folds = [p for p in chinese if "代码单元" in p.read_text(encoding="utf-8")]
    assert folds, "no Chinese page folds a code cell"
    for page in chinese:
        text = page.read_text(encoding="utf-8")
        assert "Show code cell" not in text and "Hide code cell" not in text, page
        assert "<title>" not in text or "从零实现 Transformer" in text.split("<title>", 1)[1].split("</title>")[0], page
    assert any("Show code cell" in p.read_text(encoding="utf-8") for p in english)


IMG = re.compile(r'<img[^>]*?src="([^"]+\.svg)"[^>]*?alt="([^"]*)"|<img[^>]*?alt="([^"]*)"[^>]*?src="([^"]+\.svg)"')


def _figures(page: Path) -> list[tuple[str, str]]:
    return [(m[1] or m[4], m[2] or m[3]) for m in IMG.finditer(page.read_text(encoding="utf-8"))]


def test_each_edition_shows_its_own_drawing_of_every_figure_with_alt_text_in_its_language(editions) -> None:
    """figures.py: the Chinese page's figures are the Chinese drawings (other files), their alt text Chinese."""
    english, _ = editions
    seen = 0
    for page in english:
        name = page.relative_to(BOOK)
        if not name.as_posix().startswith("book/") or name.with_suffix("").as_posix() not in catalogs.translated():
            continue
        en, zh = _figures(page), _figures(ZH / name)
        assert len(en) == len(zh), name
        for (en_src, en_alt), (zh_src, zh_alt) in zip(en, zh):
            assert Path(en_src).name != Path(zh_src).name, f"{name}: the Chinese edition shows the English drawing"
            assert en_alt and not cjk_font.CJK.search(en_alt), (name, en_alt)
            assert cjk_font.CJK.search(zh_alt), f"{name}: alt text not in Chinese: {zh_alt[:60]!r}"
        seen += len(en)
    assert seen >= 20, f"only {seen} figures found in the built pages"


STREAM = re.compile(r'<div class="output stream[^"]*">\s*<div class="highlight"><pre>(.*?)</pre>', re.S)


def _printed(page: Path) -> list[str]:
    """The text of each printed output of a built page (highlighting markup removed)."""
    return [html.unescape(re.sub(r"<[^>]+>", "", found)) for found in STREAM.findall(page.read_text(encoding="utf-8"))]


def test_what_the_code_prints_is_in_each_editions_language(editions) -> None:
    """outputs.py: a translated page's printed outputs are the English ones with every line its prints write
    translated by the page's catalog; the English edition's are left as the code printed them."""
    translated = 0
    for name in outputs.pages():
        if f"book/{name}" not in catalogs.translated():
            continue
        english, chinese = _printed(BOOK / "book" / f"{name}.html"), _printed(ZH / "book" / f"{name}.html")
        assert len(english) == len(chinese), name
        lines = outputs.Lines(outputs.load(name))
        for en, zh in zip(english, chinese):
            assert not cjk_font.CJK.search(en) or name in ("04_positional_encoding", "08_capstone"), (name, en[:80])
            assert zh == lines.text(en)[0], (name, en[:200], zh[:200])
            translated += zh != en
    assert translated >= 50, f"only {translated} printed outputs differ between the editions"
    chinese = "\n".join(_printed(ZH / "book" / "02_attention.html"))
    assert "与 PyTorch 的最大差异：" in chinese and "largest difference from PyTorch" not in chinese


SHOWN = re.compile(r'<div class="output text_plain[^"]*">\s*<div class="highlight"><pre>(.*?)</pre>', re.S)


def test_what_the_course_says_to_a_learner_is_shown_in_each_editions_language(editions) -> None:
    """book/_code/printed.py: the grading appendix runs its reports once per language; the English edition shows
    the English, the Chinese one the grader's own Chinese (course_lib's catalog), the page's words translated by
    its outputs catalog."""
    def shown(page: Path) -> str:
        found = SHOWN.findall(page.read_text(encoding="utf-8"))
        return "\n".join(html.unescape(re.sub(r"<[^>]+>", "", t)) for t in found)
    english, chinese = (shown(root / "book" / "appendix_grading.html") for root in (BOOK, ZH))
    assert "The mask is ignored: masked keys still receive weight." in english
    assert not cjk_font.CJK.search(english)
    assert "掩码被忽略了：被掩码的键仍然得到了权重。" in chinese and "The mask is ignored" not in chinese
    assert "== 忘了掩码：" in chinese and "== forgets the mask:" in english
