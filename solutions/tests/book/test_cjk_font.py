"""The book's CJK font (solutions/course_admin/book/cjk_font.py): it holds every Chinese character of the book's sources, and
a page whose figure has Chinese labels builds with warnings as errors only with the extension (without it,
matplotlib's "Glyph missing from font(s) DejaVu Sans" on stderr fails the build). The browser test renders
the pages' Chinese (test_browser.py).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from course_admin.book import cjk_font
from course_lib.provided.layout import REPO_ROOT

from .test_launch_buttons import build

FIGURE = ("import matplotlib.pyplot as plt\n"
          "fig, ax = plt.subplots(figsize=(3, 2))\nax.bar([0, 1, 2], [1, 2, 3])\n"
          "ax.set_xticks([0, 1, 2], ['我', '爱', '你'])\nax.set_title('注意力')\nplt.show()")


def test_the_font_holds_the_books_characters() -> None:
    lacking = "".join(sorted(cjk_font.book_characters(None) - cjk_font.font_characters()))
    assert not lacking, f"book/_static/fonts lacks {lacking}: run `.venv/bin/python -m course_admin.book.cjk_font --html _build/html`"
    assert (cjk_font.FONT.parent / "OFL.txt").is_file()
    assert f'url("fonts/{cjk_font.FONT.name}")' in (REPO_ROOT / "book" / "_static" / "cjk.css").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_figure_with_chinese_labels(tmp_path: Path) -> None:
    html = build(tmp_path / "with", {}, ("cjk_font",), FIGURE)
    page = (html / "book" / "02_attention.html").read_text(encoding="utf-8")
    assert "_static/cjk.css" in page and (html / "_static" / "fonts" / cjk_font.FONT.name).is_file()
    assert "<img" in page  # the figure was drawn
    with pytest.raises(AssertionError, match="stderr was found in the cell outputs"):  # matplotlib: Glyph missing
        build(tmp_path / "without", {}, (), FIGURE)
