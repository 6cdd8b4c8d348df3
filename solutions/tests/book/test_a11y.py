"""The built book's accessibility as axe-core sees it (a11y_check.py): no page, at desktop or at phone width or in
the dark colours, has a violation of impact "serious" or "critical", nor a skipped heading level (heading-order)
or content outside every landmark (region). The dark colours run the colour and image rules (a11y_check.ONLY),
the other views every rule.

Planted pages, which need no built book (only Chromium, playwright and axe-core), show that a missing alt text, a
low-contrast colour, a skipped heading level, a scrollable region no keyboard can reach and a line outside every
landmark are each reported under its axe rule id in the views that check it, and in no other (the contrast of a
hidden code cell's text too, once shown, and only once its fade-in has ended: dark text measured half-way would
read as low contrast), as is a figure whose alt text is its file name (alt-is-file-name); that a text the phone's
width alone greys is reported at that width; that texts alike are reported once, with their count; and that the
same page with each fixed is reported clean. The axe-core in use is the version the Makefile pins.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_admin.book import a11y_check, browser_check
from course_lib.provided.layout import REPO_ROOT

from .built_book import BOOK, need, need_browser

pytestmark = [pytest.mark.book, pytest.mark.slow]  # every page of both editions in Chromium: minutes

PIXEL = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
         "RU5ErkJggg==")
PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{name}</title>
<style>details[open] .fade {{ animation: fade 0.5s; }}
@keyframes fade {{ from {{ opacity: 0; }} to {{ opacity: 1; }} }}{narrow}</style>
</head><body>
<header><p id="banner" style="color: {banner}; background: #ffffff">The course's name</p></header>
<main><article><h1>A planted page</h1>
<img id="picture" src="{pixel}" width="40" height="40"{alt}>
<figure id="figure"><img id="plot" src="{pixel}" width="40" height="40" alt="{plot_alt}"></figure>
<p id="sentence" style="color: {colour}; background: #ffffff">A sentence a reader must be able to read.</p>
<p id="narrowed">A sentence that a narrow screen greys.</p>
<details><summary>Show code</summary><p id="hidden" style="color: {colour}">print("hidden until shown")</p>
<p style="color: {colour}">print("a second line like it")</p>
<p class="fade" style="color: #333333">print("fades in when shown")</p></details>
<{heading} id="section">A section</{heading}>
<div id="output" style="overflow: auto; width: 120px; height: 40px"{tabindex}><p style="width: 600px">{text}</p></div>
</article></main>{outside}</body></html>"""
TEXT = "A line of output far wider than its box, which a reader scrolls to read the end of. " * 3
PLANTED = PAGE.format(name="planted", pixel=PIXEL, alt="", plot_alt="../_images/0f3a9c.svg", colour="#b0b0b0",
                      banner="#aaaaaa", heading="h3", tabindex="", text=TEXT, narrow="",
                      outside='<p id="outside">A line outside every landmark.</p>')
GOOD = PAGE.format(name="good", pixel=PIXEL, alt=' alt="a black square"', plot_alt="another black square",
                   colour="#333333", banner="#333333", heading="h2", tabindex=' tabindex="0"', text=TEXT, outside="",
                   narrow="")
# the good page, but a text low in contrast below 500 px only
NARROW = GOOD.replace("<title>good", "<title>narrow").replace(
    "{ opacity: 1; } }", "{ opacity: 1; } }\n@media (max-width: 500px) { #narrowed { color: #b0b0b0; } }")
# a planted text's contrast is reported with the count of the texts alike (the same colours, size and backdrop;
# a11y_check: one of each group is checked): the hidden cell's two lines are one group
EXPECTED = [("image-alt", "#picture"), ("alt-is-file-name", "#plot"), ("color-contrast", "#banner"),
            ("color-contrast", "#sentence"), ("color-contrast", r"#hidden \(and 1 more alike\)"),
            ("heading-order", "#section"), ("scrollable-region-focusable", "#output"), ("region", "#outside")]


def expected_in(view: str) -> list[tuple[str, str]]:
    """What the planted page reports in ``view`` (a11y_check.ONLY: what a view that runs some rules checks)."""
    if view in a11y_check.ONLY:
        return [(rule, target) for rule, target in EXPECTED if rule in a11y_check.ONLY[view] + ["alt-is-file-name"]]
    return EXPECTED


def reported(lines: list[str], rule: str, target: str) -> bool:
    return any(re.match(rf"{rule} \((serious|critical|moderate)\) at {target}:", line) for line in lines)


@pytest.fixture(scope="module")
def axe_ready() -> None:
    need_browser()
    need(a11y_check.axe_js() is not None, "no axe-core (make install: npm install --prefix .a11y axe-core)")


def test_axe_is_the_pinned_version(axe_ready: None) -> None:
    assert a11y_check.installed_version(a11y_check.axe_js()) == a11y_check.AXE_VERSION
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert f"AXE_VERSION := {a11y_check.AXE_VERSION}\n" in makefile


def test_each_planted_problem_is_found(tmp_path: Path, axe_ready: None) -> None:
    for name, page in (("planted", PLANTED), ("good", GOOD), ("narrow", NARROW)):
        (tmp_path / f"{name}.html").write_text(page, encoding="utf-8")
    found = a11y_check.check_pages(tmp_path)
    pages = ("planted", "good", "narrow")
    assert set(found) == {f"{page}.html [{view}]" for page in pages for view in a11y_check.VIEWS}
    for view in a11y_check.VIEWS:
        planted, narrow = found[f"planted.html [{view}]"], found[f"narrow.html [{view}]"]
        for rule, target in EXPECTED:
            assert reported(planted, rule, target) == ((rule, target) in expected_in(view)), \
                f"{rule} on {target} {'not ' * ((rule, target) in expected_in(view))}reported in the {view} view:\n" \
                + "\n".join(planted)
        assert found[f"good.html [{view}]"] == [], found[f"good.html [{view}]"]
        phone = a11y_check.VIEWS[view][0] == browser_check.VIEWPORTS["phone"]  # the only width that greys it
        assert narrow == ([line for line in narrow if line.startswith("color-contrast (serious) at #narrowed:")]
                          if phone else []) and (len(narrow) == 1) == phone, (view, narrow)


# Each edition in each view a test of its own (six of about a minute, rather than two of five minutes and a half:
# make test-book's two workers share them and the browser test out evenly, each in an xdist group of its own, for
# under --dist loadgroup a file's tests otherwise share one worker): together, every page of the built book in
# every view.
@pytest.mark.parametrize("edition, view", [
    pytest.param(edition, view, marks=pytest.mark.xdist_group(f"a11y_{edition}_{view.replace(' ', '_')}"))
    for edition in ("en", "zh") for view in a11y_check.VIEWS])
def test_every_page_of_the_built_book(axe_ready: None, edition: str, view: str) -> None:
    need((BOOK / "index.html").is_file(), f"no built book at {BOOK} (make book)")
    pages = [p for p in browser_check.pages(BOOK) if (p.relative_to(BOOK).parts[0] == "zh") == (edition == "zh")]
    found = a11y_check.check_pages(BOOK, only=pages, views=[view])
    assert len(found) >= 14 and all(key.endswith(f" [{view}]") for key in found), sorted(found)  # chapters, appendices
    report = "\n".join(f"{page}: {line}" for page, lines in found.items() for line in lines)
    assert not report, f"accessibility violations in the built book:\n{report}"


def test_an_unknown_view_is_named() -> None:
    with pytest.raises(ValueError, match="no such view \\['tablet'\\]"):
        a11y_check.check_pages(BOOK, views=["tablet"])
