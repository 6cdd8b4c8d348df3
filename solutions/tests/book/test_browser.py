"""The built book in a browser (browser_check.py): every page opens in headless Chromium with no console
error, no request to the internet, every formula rendered, every image loaded, every internal link and
anchor there, no cell with an error output, and its Chinese drawn by the book's own font; a screenshot of
each page at desktop and phone width is saved under the build folder (_build/screenshots/).

The built book is $COURSE_BOOK_HTML, else _build/html. Without it (before `make book`) the test of the
book is skipped, unless $COURSE_REQUIRE_BOOK is set, as .ci/run sets it after `make book`. A planted page
shows that each kind of problem is found.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from course_admin.book import browser_check, cjk_font

from .built_book import BOOK, need as _need, need_browser

pytestmark = [pytest.mark.book, pytest.mark.slow]  # every page of both editions in Chromium: minutes


def _no_system_cjk_font() -> bool:
    try:
        listed = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return True
    return not listed.strip()


@pytest.fixture(scope="module")
def browser_ready() -> None:
    need_browser()


PLANTED = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>{style}</style>
<script>console.error("planted console error");</script></head><body>
<p>A formula: <span class="math">\\(x^2\\)</span></p>
<img src="missing.png" alt="planted"><img src="https://example.com/planted.png" alt="planted">
<a href="nowhere.html">gone</a> <a href="#no-such-anchor">anchor</a> <a href="#here" id="here">here</a>
<div class="output traceback">ZeroDivisionError: planted</div>
<p class="zh">我爱你，你爱我</p></body></html>"""
GOOD = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>{style}</style></head><body>
<p class="zh">我爱你，你爱我。注意力</p><a href="#top" id="top">top</a></body></html>"""
FONT_FACE = ('@font-face {{ font-family: "Course CJK"; src: url("{font}"); unicode-range: U+3000-303F, '
             'U+4E00-9FFF, U+FF00-FFEF; }} .zh {{ font-family: "Course CJK", monospace; }}')


def test_each_problem_is_found(tmp_path: Path, browser_ready: None) -> None:
    (tmp_path / "planted.html").write_text(PLANTED.format(style=".zh { font-family: monospace; }"), encoding="utf-8")
    (tmp_path / "good.html").write_text(GOOD.format(style=FONT_FACE.format(font=cjk_font.FONT.as_uri())),
                                        encoding="utf-8")
    found = browser_check.check_pages(tmp_path, tmp_path / "shots")
    planted = "\n".join(found["planted.html"])
    for expected in ("console error: planted console error", "formula not rendered: \\(x^2\\)",
                     "image not loaded: missing.png", "loads from the internet: https://example.com/planted.png",
                     "broken link 'nowhere.html'", "no id 'no-such-anchor'", "cell with an error output: ZeroDivision"):
        assert expected in planted, f"{expected!r} not found in:\n{planted}"
    if _no_system_cjk_font():  # here Chinese in a font without it is boxes, which the check must see
        assert "Chinese not rendered" in planted, planted
    assert found["good.html"] == [], found["good.html"]
    assert {p.name for p in (tmp_path / "shots").iterdir()} == {
        f"{page}-{size}.jpg" for page in ("planted", "good") for size in ("desktop", "phone")}


# Each edition a test of its own, in an xdist group of its own (make test-book's two workers share them with the
# accessibility tests evenly): together, every page of the built book.
@pytest.mark.parametrize("edition", [pytest.param(e, marks=pytest.mark.xdist_group(f"browser_{e}")) for e in ("en", "zh")])
def test_every_page_of_the_built_book(browser_ready: None, edition: str) -> None:
    _need((BOOK / "index.html").is_file(), f"no built book at {BOOK} (make book)")
    shots = BOOK.parent / "screenshots"
    pages = [p for p in browser_check.pages(BOOK) if (p.relative_to(BOOK).parts[0] == "zh") == (edition == "zh")]
    found = browser_check.check_pages(BOOK, shots, only=pages)
    assert len(found) >= 14, sorted(found)  # the chapters and the appendices at least
    report = "\n".join(f"{page}: {problem}" for page, problems in found.items() for problem in problems)
    assert not report, f"problems in the built book:\n{report}"
    for page in (p for p in found if not browser_check.redirect_of(BOOK / p)):
        stem = page.removesuffix(".html").replace("/", "__")
        assert all((shots / f"{stem}-{size}.jpg").is_file() for size in browser_check.VIEWPORTS)
    used = cjk_font.characters(*(p.read_text(encoding="utf-8") for p in pages))
    lacking = "".join(sorted(used - cjk_font.font_characters()))
    assert not lacking, (f"the book's font lacks {lacking}: run `.venv/bin/python -m course_admin.book.cjk_font --html "
                         f"{BOOK}` and commit book/_static/fonts/")
