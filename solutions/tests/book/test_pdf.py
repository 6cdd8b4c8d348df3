"""The PDF of each edition (course_admin/publish/pdf.py) read back with poppler's tools: every page of the book
starts where the outline says, with its title (pdftotext); the table of contents gives each title its page
number; every page carries its number; each page with a figure has an image there (pdfimages); every font is
embedded, the Chinese edition's CJK font among them (pdffonts).

The PDFs are _build/pdf/ (make pdf) when they are newer than the built book, else they are printed here from it
(the built book: $COURSE_BOOK_HTML, else _build/html; skipped without it unless $COURSE_REQUIRE_BOOK is set, as
after `make book` in .ci/run). A planted two-page book shows that each check finds what it looks for.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from course_admin.book import cjk_font
from course_admin.publish import pdf

from .built_book import BOOK, need, need_browser

pytestmark = [pytest.mark.book, pytest.mark.slow]  # Chromium prints every page of both editions


def _run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout


def page_texts(path: Path) -> list[str]:
    """The text of each page (pdftotext, lines as laid out; pages end with a form feed), its whitespace removed."""
    text = _run("pdftotext", "-layout", "-enc", "UTF-8", str(path), "-")
    return [re.sub(r"\s+", "", page) for page in text.split("\f")[:-1]]


def image_pages(path: Path) -> set[int]:
    """The pages (from 1) that show an image (pdfimages -list; an image's soft mask is not one)."""
    rows = [line.split() for line in _run("pdfimages", "-list", str(path)).splitlines()[2:]]
    return {int(row[0]) for row in rows if row[2] == "image"}


def fonts(path: Path) -> dict[str, bool]:
    """{font name: embedded} (pdffonts)."""
    lines = _run("pdffonts", str(path)).splitlines()[2:]
    return {line.split()[0]: line.split()[-5] == "yes" for line in lines}


def starts(path: Path) -> dict[str, int]:
    """{outline title: its page (from 1)}: the bookmarks of the pages, not of the parts."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    found: dict[str, int] = {}

    def walk(items: list, depth: int) -> None:
        for i, item in enumerate(items):
            if isinstance(item, list):
                walk(item, depth + 1)
            elif not (i + 1 < len(items) and isinstance(items[i + 1], list)):  # a part has its pages under it
                found[str(item.title)] = reader.get_destination_page_number(item) + 1
    walk(reader.outline, 0)
    return found


def raster_figure(page: Path) -> bool:
    """Whether the page shows a figure that a PDF holds as an image: a PNG or JPEG, or an SVG drawing with a picture
    in it (a heatmap). An SVG of lines and text only is printed as vectors, which pdfimages does not list."""
    for src in re.findall(r'<img[^>]*?src="([^"]*_images/[^"]+)"', page.read_text(encoding="utf-8")):
        target = page.parent / unquote(src)
        if target.suffix.lower() in (".png", ".jpg", ".jpeg", ".gif") or (
                target.suffix.lower() == ".svg" and "<image" in target.read_text(encoding="utf-8")):
            return True
    return False


def problems(path: Path, book: list[pdf.Page]) -> list[str]:
    """What the PDF of ``book`` lacks: a page's title on its first page, its line in the table of contents, a page
    number, a figure of a page whose HTML has one."""
    texts, where, shown = page_texts(path), starts(path), image_pages(path)
    found = []
    for page in book:
        title = re.sub(r"\s+", "", page.title)
        if page.title not in where:
            found.append(f"{page.title}: not in the outline")
            continue
        first = where[page.title]
        if title not in texts[first - 1]:
            found.append(f"{page.title}: not on its first page ({first})")
        if f"{title}{first}" not in texts[0]:
            found.append(f"{page.title}: not in the table of contents with page {first}")
        end = min([n for n in where.values() if n > first], default=len(texts) + 1)
        if raster_figure(page.path) and not shown & set(range(first, end)):
            found.append(f"{page.title}: a figure in its HTML, no image on its pages {first}-{end - 1}")
    found += [f"page {n}: no page number" for n, text in enumerate(texts, 1) if not text.endswith(f"{n}/{len(texts)}")]
    return found


# the book's CJK font as Chromium names it in a PDF: a subset of its @font-face family, spaces left out
CJK_FONT = "+" + cjk_font.FAMILY.replace(" ", "")


def need_poppler() -> None:
    need(all(shutil.which(tool) for tool in ("pdftotext", "pdfimages", "pdffonts")),
         "no pdftotext, pdfimages or pdffonts (apt-get install poppler-utils)")


def png(size: int = 8) -> bytes:
    """A grey square as PNG bytes."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + b"\x80\x40\x20" * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


# a folded code cell as myst-nb writes it (its code fades in when unfolded), and a box with a shadow as the theme's
FOLDED_STYLE = "@keyframes fade { from { opacity: 0; } to { opacity: 1; } } .fade { animation: fade 30s; }"
FOLDED = ('<details class="hide"><summary>Show code</summary>'
          '<div class="fade"><pre>folded_code_line</pre></div></details>')
SHADOW_STYLE = ".admonition { box-shadow: 0 3px 8px rgba(0, 0, 0, 0.3) !important; }"
SHADOW = '<div class="admonition">注意</div>'
PLANTED = """<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><style>{style}</style></head><body>
<nav class="bd-sidebar-primary"><span class="caption-text">Part One</span>NAVIGATION</nav>
<h1>{title}<a class="headerlink" href="#x">#</a></h1><p>{body}</p></body></html>"""


def test_a_planted_book(tmp_path: Path) -> None:
    need_browser()
    need_poppler()
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "fig.png").write_bytes(png())
    style = (f'@font-face {{ font-family: "Course CJK"; src: url("{cjk_font.FONT.as_uri()}"); }} '
             'body { font-family: "Course CJK"; } ' + SHADOW_STYLE)
    (tmp_path / "a.html").write_text(PLANTED.format(lang="en", style=FOLDED_STYLE, title="Alpha page", body=(
        '<img src="_images/fig.png" style="width:40mm" alt="a figure"> ' * 3) + FOLDED), encoding="utf-8")
    (tmp_path / "b.html").write_text(PLANTED.format(lang="zh-CN", style=style, title="注意力 Beta",
                                                    body=SHADOW + "我爱你" * 900), encoding="utf-8")
    (tmp_path / "_toc.yml").write_text("root: a\nparts:\n  - caption: P\n    chapters:\n      - file: b\n",
                                       encoding="utf-8")
    book = pdf.pages(tmp_path, tmp_path / "_toc.yml")
    assert [(p.title, p.part) for p in book] == [("Alpha page", None), ("注意力 Beta", "Part One")]
    assert pdf.pages(tmp_path, tmp_path / "_toc.yml", {"Part One": "第一部分"})[1].part == "第一部分"
    out = tmp_path / "book.pdf"
    done = pdf.build(book, out, "Planted", "Contents", "zh-CN", cjk_font.FONT)
    assert done["pages"] == len(page_texts(out)) >= 3 and done["bytes"] == out.stat().st_size
    assert problems(out, book) == []
    text = "".join(page_texts(out))
    assert "NAVIGATION" not in text  # the theme's navigation is not printed
    assert "folded_code_line" in text and "Showcode" not in text  # a folded cell: its code shown, not its fold
    assert image_pages(out) == {2}  # the figure; not the shadow of Beta's box (Chromium prints one as an image)
    assert any(embedded and name.endswith(CJK_FONT) for name, embedded in fonts(out).items())
    # each check finds what is missing
    gone = pdf.Page(tmp_path / "b.html", "Gamma", None)
    assert problems(out, [gone]) == ["Gamma: not in the outline"]
    figure_on_b = [book[0], pdf.Page(book[1].path, book[1].title, None)]
    (tmp_path / "b.html").write_text('<img src="_images/fig.png">', encoding="utf-8")
    assert problems(out, figure_on_b) == [
        f"注意力 Beta: a figure in its HTML, no image on its pages 3-{done['pages']}"]
    short = tmp_path / "short.pdf"
    from pypdf import PdfReader, PdfWriter
    writer = PdfWriter()
    writer.append(PdfReader(out), pages=[0, 1])
    writer.write(short)
    assert any("no page number" in p for p in problems(short, book[:1]))
    # a formula MathJax did not render stops the PDF
    (tmp_path / "c.html").write_text(PLANTED.format(lang="en", style="", title="Math",
                                                    body='<span class="math">x</span>'), encoding="utf-8")
    with pytest.raises(pdf.PdfError, match="1 formula"):
        pdf.build([pdf.Page(tmp_path / "c.html", "Math", None)], tmp_path / "c.pdf", "Planted", "Contents", "en")


def _fresh(edition: str) -> Path | None:
    """_build/pdf's PDF of ``edition`` when it is newer than every page of the built book it was printed from."""
    name, folder = pdf.EDITIONS[edition][:2]
    made = BOOK.parent / "pdf" / name
    html = BOOK / folder if folder else BOOK
    if made.is_file() and made.stat().st_mtime > max(p.stat().st_mtime for p in html.rglob("*.html")):
        return made
    return None


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    need((BOOK / "index.html").is_file() and (BOOK / "zh" / "index.html").is_file(),
         f"no built book at {BOOK} (make book)")
    need_browser()
    need_poppler()
    out = tmp_path_factory.mktemp("pdf")
    return {edition: _fresh(edition) or pdf.build_edition(edition, BOOK, out)["path"] for edition in pdf.EDITIONS}


@pytest.mark.parametrize("edition", sorted(pdf.EDITIONS))
def test_each_edition(built: dict[str, Path], edition: str) -> None:
    folder = pdf.EDITIONS[edition][1]
    book = pdf.pages(BOOK / folder if folder else BOOK)
    assert len(book) >= 14 and all(p.title for p in book) and len({p.title for p in book}) == len(book)
    assert any(raster_figure(page.path) for page in book)  # the figure check below checks something
    assert problems(built[edition], book) == []
    embedded = fonts(built[edition])
    assert embedded and all(embedded.values()), embedded
    if edition == "zh_CN":  # Chinese in the book's own font, embedded (a subset: "ABCDEF+CourseCJK")
        assert any(font.endswith(CJK_FONT) for font in embedded), embedded
