"""A PDF of each edition of the book, printed from the built HTML: no page is executed again.

``make book`` builds both editions (every page executed once, or taken from the execution cache); this module
prints what it built, so the PDFs show the same outputs, figures and formulas as the site:

  * each page of ``_toc.yml`` (the root page, the chapters, the appendices) is opened in headless Chromium (Debian's,
    driven by Playwright, as the browser test does), MathJax and the fonts awaited, the theme's navigation hidden,
    folded content opened, and printed to A4;
  * a front page (the book's title and a table of contents: each page's title with its page number, taken from
    the printed page counts) is printed the same way;
  * pypdf joins them, stamps every page with its number (a blank document of as many pages, printed by Chromium
    with a ``footerTemplate``: page numbers run through the whole book, as the table of contents gives them),
    adds the outline (bookmarks: the parts and their pages), the title and the language, and turns each link to
    another page of the book into a link inside the PDF (a link to a local file would lead nowhere elsewhere).

The Chinese edition's pages draw Chinese with the book's own font (``_static/fonts/course-cjk.ttf``, cjk.css),
which Chromium embeds (``pdffonts``). solutions/tests/book/test_pdf.py reads the PDFs back (pdftotext, pdfimages).
Here, not in course_admin/book/ (at its twelve modules), as what publish.yml publishes beside the site; it imports
nothing of course_admin (publish/'s rule) and runs after ``make install`` (Playwright, pypdf: the dev extra).

    .venv/bin/python -m course_admin.publish.pdf [--html _build/html] [--out _build/pdf] [--edition en|zh_CN]
"""
from __future__ import annotations

import argparse
import html as html_lib
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from course_lib.provided.layout import REPO_ROOT

from ..book.browser_check import CHROMIUM_FLAGS, chromium  # the browser the book's checks use


HTML = REPO_ROOT / "_build" / "html"
OUT = REPO_ROOT / "_build" / "pdf"
TOC = REPO_ROOT / "_toc.yml"
# edition -> (file name, folder inside the built html, <html lang>, the book's title, "Contents")
EDITIONS = {"en": ("transformers-from-scratch.pdf", "", "en", "Transformers from Scratch", "Contents"),
            "zh_CN": ("transformers-from-scratch-zh_CN.pdf", "zh", "zh-CN", "从零实现 Transformer", "目录")}
# The parts' captions where the edition's navigation shows them in English (the Chinese sidebar does, today)
CAPTIONS = {"zh_CN": {"Chapters": "章节", "Appendices": "附录"}}
MARGIN = {"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"}
FORMAT = "A4"

# What the reader of paper has no use for (the theme's navigation, the link to the other edition, the version
# switch of the published site) is hidden; what a click unfolds in the browser is shown.
PRINT_CSS = """
.bd-header, .bd-header-announcement, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-article,
.bd-footer-content, .prev-next-area, .header-article, .header-article-items, .skip-link, #pst-back-to-top,
.course-edition, .course-versions, .headerlink, .copybtn, .toggle-details__summary, .search-button-field {
  display: none !important; }
.bd-container, .bd-container__inner, .bd-page-width, .bd-main, .bd-content, .bd-article-container, .bd-article {
  max-width: 100% !important; margin-left: 0 !important; margin-right: 0 !important; padding-left: 0 !important;
  padding-right: 0 !important; }
/* no shadow (Chromium prints each as an image), no animation (a folded cell's code fades in: printed at 0 opacity);
   :not(#id) outranks the theme's classes, !important as theirs */
:not(#course-pdf) { box-shadow: none !important; text-shadow: none !important; animation: none !important;
  transition: none !important; }
details.hide > summary { display: none !important; }  /* "Hide code cell source": nothing to click on paper */
html, body { background: #fff !important; }
pre, code, .pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
table { max-width: 100%; } td, th { overflow-wrap: anywhere; }
img { max-width: 100% !important; }
figure, img, .cell_output { break-inside: avoid; }
"""
READY = r"""async () => {
  for (const img of document.images) { img.loading = 'eager'; }
  for (const d of document.querySelectorAll('details')) { d.open = true; }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  await Promise.all([...document.images].map(i => i.complete ? null :
    new Promise(done => { i.addEventListener('load', done); i.addEventListener('error', done); })));
  for (const m of document.querySelectorAll('mjx-container[display="true"]')) {  // a wide formula: smaller, not cut
    if (m.scrollWidth > m.clientWidth + 1) { m.style.fontSize = `${Math.floor(100 * m.clientWidth / m.scrollWidth)}%`; }
  }
  const math = [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')).length;
  return {math: math, merror: document.querySelectorAll('mjx-merror').length};
}"""
# Debian's Chromium as the browser test drives it (course_admin/book/browser_check.py, which this folder may not
# import: publish/'s docstring)
FOOTER = ('<div style="width:100%;text-align:center;font-size:9px;color:#555;font-family:sans-serif">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


class PdfError(RuntimeError):
    """The PDF cannot be made: no built book, a page missing, a formula MathJax did not render."""


@dataclass
class Page:
    """One page of the book in the order of ``_toc.yml``: its built HTML, its title (its ``<h1>``), its part."""

    path: Path
    title: str
    part: str | None


def toc_entries(toc: Path = TOC) -> list[tuple[int | None, str]]:
    """(part index or None for the root, docname) for each page of ``_toc.yml``, in order."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    entries: list[tuple[int | None, str]] = [(None, data["root"])]
    for index, part in enumerate(data.get("parts", [])):
        entries += [(index, chapter["file"]) for chapter in part.get("chapters", [])]
    return entries


def heading(page: Path) -> str:
    """The text of the page's first ``<h1>`` (its permalink sign left out)."""
    text = page.read_text(encoding="utf-8")
    found = re.search(r"<h1[^>]*>(.*?)</h1>", text, re.DOTALL)
    if not found:
        raise PdfError(f"{page}: no <h1>, so no title for the table of contents")
    inner = re.sub(r'<a class="headerlink".*?</a>', "", found.group(1), flags=re.DOTALL)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", "", inner)).split())


def part_captions(root_page: Path) -> list[str]:
    """The parts' captions as the edition's navigation shows them (``Chapters``, ``Appendices``, in its language)."""
    text = root_page.read_text(encoding="utf-8")
    return [" ".join(html_lib.unescape(c).split()) for c in re.findall(r'class="caption-text">([^<]*)<', text)]


def pages(edition_html: Path, toc: Path = TOC, captions: dict[str, str] | None = None) -> list[Page]:
    """Every page of the edition built in ``edition_html``, in the table of contents' order; ``captions`` names a
    part in the edition's language where its navigation does not."""
    entries = toc_entries(toc)
    paths = [edition_html / f"{docname}.html" for _, docname in entries]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise PdfError(f"not built: {', '.join(missing)} (make book)")
    shown = [(captions or {}).get(caption, caption) for caption in part_captions(paths[0])]
    return [Page(path, heading(path), None if part is None else (shown[part] if part < len(shown) else None))
            for (part, _), path in zip(entries, paths)]


def front_html(title: str, contents: str, rows: list[tuple[Page, int]], font: Path | None, lang: str) -> str:
    """The front page: the title and the table of contents (each page's title, its page number)."""
    face = f'@font-face {{ font-family: "Course CJK"; src: url("{font.as_uri()}"); }}' if font else ""
    items, part = [], object()
    for page, number in rows:
        if page.part != part and page.part:
            items.append(f'<li class="part">{html_lib.escape(page.part)}</li>')
        part = page.part
        items.append(f'<li><span>{html_lib.escape(page.title)}</span><span class="n">{number}</span></li>')
    return (f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{html_lib.escape(title)}</title>'
            f'<style>{face} body {{ font-family: "Course CJK", sans-serif; margin: 0; }}'
            ' h1 { font-size: 28pt; margin: 30mm 0 18mm; } h2 { font-size: 16pt; }'
            ' ul { list-style: none; padding: 0; }'
            ' li { display: flex; justify-content: space-between; align-items: baseline;'
            ' border-bottom: 1px dotted #999; padding: 2mm 0; font-size: 11pt; }'
            ' li.part { font-weight: bold; border: 0; margin-top: 5mm; }</style></head><body>'
            f'<h1>{html_lib.escape(title)}</h1><h2>{html_lib.escape(contents)}</h2><ul>{"".join(items)}</ul>'
            '</body></html>')


def _print(context: Any, url: str, target: Path, css: str = PRINT_CSS, **options: Any) -> None:
    """Open ``url``, wait for its formulas, fonts and images, print it to ``target``."""
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        if css:
            page.add_style_tag(content=css)
        seen = page.evaluate(READY)
        if seen["math"] or seen["merror"]:
            raise PdfError(f"{url}: {seen['math']} formula(s) not rendered, {seen['merror']} MathJax error(s)")
        options.setdefault("print_background", True)
        page.pdf(path=str(target), format=FORMAT, margin=MARGIN, **options)
    finally:
        page.close()


def _internal_links(writer: Any, starts: dict[Path, int]) -> int:
    """Each link to a local file: to a page of the book, a link to its first page in the PDF; else removed.
    Returns how many were rewritten."""
    from pypdf.generic import ArrayObject, NameObject

    count = 0
    for page in writer.pages:
        annots = page.get("/Annots")
        if not annots:
            continue
        kept = ArrayObject()
        for ref in annots.get_object():
            annot = ref.get_object()
            action = annot["/A"].get_object() if "/A" in annot else {}
            uri = str(action.get("/URI", ""))
            if not uri.startswith("file:"):
                kept.append(ref)
                continue
            target = Path(unquote(urlsplit(uri).path)).resolve()
            if target in starts:
                del annot[NameObject("/A")]
                annot[NameObject("/Dest")] = ArrayObject([writer.pages[starts[target]].indirect_reference,
                                                          NameObject("/Fit")])
                kept.append(ref)
                count += 1
        page[NameObject("/Annots")] = kept
    return count


def _stamp_and_join(work: Path, book: list[Page]) -> tuple[Any, dict[Path, int]]:
    """The front page and the printed pages joined, each stamped with its number, with the outline (a part's
    pages under it); returns the writer and where each page of the book starts (0-based)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(str(work / "front.pdf"), import_outline=False)
    starts: dict[Path, int] = {}
    parts: dict[str, Any] = {}
    for index, page in enumerate(book):
        start = starts[page.path.resolve()] = len(writer.pages)
        writer.append(str(work / f"{index:03}.pdf"), import_outline=False)
        if page.part and page.part not in parts:
            parts[page.part] = writer.add_outline_item(title=page.part, page_number=start)
        writer.add_outline_item(title=page.title, page_number=start, parent=parts.get(page.part or ""))
    stamps = PdfReader(work / "numbers.pdf").pages
    if len(stamps) != len(writer.pages):
        raise PdfError(f"{len(stamps)} page numbers printed for {len(writer.pages)} pages")
    for page_object, stamp in zip(writer.pages, stamps):
        page_object.merge_page(stamp)
        page_object.compress_content_streams()  # merging leaves the page's drawing uncompressed
    return writer, starts


def build(book: list[Page], out: Path, title: str, contents: str, lang: str, font: Path | None = None) -> dict:
    """Print ``book`` (its pages in order) to one PDF at ``out``; returns its pages, size, seconds and the links
    between its pages."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader
    from pypdf.generic import NameObject, TextStringObject

    start = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as pw:
        work = Path(scratch)
        browser = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context()
            # nothing leaves the machine (the book loads nothing from the internet)
            context.route("**/*", lambda r, _q=None: r.continue_() if r.request.url.startswith(
                ("file:", "data:", "blob:", "about:")) else r.abort())
            counts = []
            for index, page in enumerate(book):
                _print(context, page.path.as_uri(), work / f"{index:03}.pdf")
                counts.append(len(PdfReader(work / f"{index:03}.pdf").pages))
            front, first = work / "front.html", 1
            for _ in range(3):  # the front's own length sets where the pages start: print it until it agrees
                numbers = [first + 1 + sum(counts[:i]) for i in range(len(book))]
                front.write_text(front_html(title, contents, list(zip(book, numbers)), font, lang), encoding="utf-8")
                _print(context, front.as_uri(), work / "front.pdf", css="")
                printed, first = first, len(PdfReader(work / "front.pdf").pages)
                if printed == first:
                    break
            else:
                raise PdfError("the table of contents does not settle on a length")
            total = first + sum(counts)
            blank = work / "numbers.html"  # as many blank pages as the book, each with its number at its foot
            blank.write_text("<!DOCTYPE html><html><body><div>&nbsp;</div>"
                             + '<div style="break-before: page">&nbsp;</div>' * (total - 1) + "</body></html>",
                             encoding="utf-8")
            _print(context, blank.as_uri(), work / "numbers.pdf", css="", display_header_footer=True,
                   header_template="<span></span>", footer_template=FOOTER, print_background=False)
        finally:
            browser.close()
        writer, starts = _stamp_and_join(work, book)
    links = _internal_links(writer, starts)
    writer.add_metadata({"/Title": title, "/Creator": "course_admin.publish.pdf (Chromium, pypdf)"})
    writer.root_object[NameObject("/Lang")] = TextStringObject(lang)
    writer.page_mode = "/UseOutlines"
    writer.compress_identical_objects(remove_duplicates=True, remove_unreferenced=True)
    with out.open("wb") as handle:
        writer.write(handle)
    return {"pages": total, "bytes": out.stat().st_size, "seconds": time.perf_counter() - start, "links": links}


def build_edition(edition: str, html: Path = HTML, out: Path = OUT) -> dict:
    """The PDF of one edition (``en`` or ``zh_CN``) of the book built in ``html``; see ``build``."""
    name, folder, lang, title, contents = EDITIONS[edition]
    edition_html = html / folder if folder else html
    font = edition_html / "_static" / "fonts" / "course-cjk.ttf"
    book = pages(edition_html, captions=CAPTIONS.get(edition))
    return {"path": out / name, **build(book, out / name, title, contents, lang, font if font.is_file() else None)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.publish.pdf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, default=HTML, help="the built book (make book): %(default)s")
    parser.add_argument("--out", type=Path, default=OUT, help="where the PDFs go: %(default)s")
    parser.add_argument("--edition", choices=sorted(EDITIONS), action="append", help="one edition (default: both)")
    args = parser.parse_args(argv)
    if chromium() is None:
        print("pdf: no Chromium (apt-get install chromium, or set $CHROMIUM)", file=sys.stderr)
        return 1
    for edition in args.edition or list(EDITIONS):
        try:
            done = build_edition(edition, args.html, args.out)
        except PdfError as error:
            print(f"pdf: {error}", file=sys.stderr)
            return 1
        print(f"pdf: {done['path']}: {done['pages']} pages, {done['bytes'] / 1e6:.1f} MB, {done['seconds']:.0f} s "
              f"({done['links']} links between pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
