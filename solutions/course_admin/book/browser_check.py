"""The built book as a reader's browser shows it: headless Chromium (Debian's, driven by Playwright) opens each
page and reports what a reader would see wrong. Used by test_browser.py.

Per page: a console error or an uncaught exception; a request that leaves the machine (the book loads nothing
from the internet: it is refused and reported); a formula MathJax did not render (a ``.math`` element with
no ``mjx-container``, or an ``mjx-merror``); an image that did not load; a cell with an error output; Chinese
drawn with no glyph (each character is drawn on a canvas in the font the page gives it: a missing glyph is a
blank or the same box for different characters); and, read from the HTML here, every internal link and
resource (file and ``#anchor``) that does not exist. A screenshot of the whole page at desktop and at phone
width goes into ``shots``.
"""
from __future__ import annotations

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORTS = {"desktop": (1280, 900), "phone": (390, 844)}
SKIP = ("_static", "_sources", "_images", "_launch", "_sphinx_design_static")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)

INSPECT = r"""async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  const short = (t) => t.replace(/\s+/g, ' ').trim().slice(0, 80);
  const math = [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container'));
  const out = {
    math: math.map(e => short(e.textContent)),
    merror: [...document.querySelectorAll('mjx-merror')].map(e => short(e.textContent)),
    images: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    errors: [...document.querySelectorAll('.output.traceback, .output.error')].map(e => short(e.textContent)),
    cjk: [],
  };
  const re = /[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]/g;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Map();
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.parentElement || !node.parentElement.getClientRects().length) continue;  // not displayed
    for (const c of node.textContent.match(re) || []) {
      if (!seen.has(c)) seen.set(c, getComputedStyle(node.parentElement).fontFamily);
    }
  }
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 48;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const drawn = new Map();
  for (const [c, family] of seen) {
    await document.fonts.load(`32px ${family}`, c);
    ctx.clearRect(0, 0, 48, 48);
    ctx.font = `32px ${family}`;
    ctx.fillText(c, 4, 36);
    const px = ctx.getImageData(0, 0, 48, 48).data;
    let ink = 0, sig = 0;
    for (let i = 3; i < px.length; i += 4) { ink += px[i] > 0; sig = (sig * 31 + px[i]) % 1000000007; }
    if (!ink) { out.cjk.push(`${c} draws nothing`); continue; }
    if (drawn.has(sig) && c.match(/[\u3400-\u9fff]/) && drawn.get(sig).match(/[\u3400-\u9fff]/)) {
      out.cjk.push(`${c} and ${drawn.get(sig)} draw the same box (no glyph)`);
    }
    drawn.set(sig, c);
  }
  out.cjkCount = seen.size;
  return out;
}"""


class _Refs(HTMLParser):
    """The ids of a page and the local targets of its links and resources."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[str] = []
        self.redirect = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "meta" and (found.get("http-equiv") or "").lower() == "refresh":  # index.html: a redirect
            self.redirect = (found.get("content") or "").partition("url=")[2].strip()
            self.refs.append(self.redirect)
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if value and ((name == "href" and tag in ("a", "link")) or (name == "src" and tag in ("img", "script"))):
                self.refs.append(value)


def pages(html: Path) -> list[Path]:
    """Every page of the built book (not the theme's and Sphinx's own folders)."""
    return sorted(p for p in html.rglob("*.html") if not set(p.relative_to(html).parts) & set(SKIP))


def redirect_of(page: Path) -> str:
    """Where a redirect page (index.html) sends the reader; "" for a real page."""
    refs = _Refs()
    refs.feed(page.read_text(encoding="utf-8", errors="replace"))
    return refs.redirect


def broken_links(html: Path, page: Path, cache: dict[Path, _Refs]) -> list[str]:
    """The page's internal links and resources whose file, or whose #anchor in it, does not exist."""
    def parsed(path: Path) -> _Refs:
        if path not in cache:
            refs = _Refs()
            refs.feed(path.read_text(encoding="utf-8", errors="replace"))
            cache[path] = refs
        return cache[path]

    problems = []
    for ref in parsed(page).refs:
        if EXTERNAL.match(ref) or ref.startswith("//"):
            continue
        parts = urlsplit(ref)
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            problems.append(f"broken link {ref!r}: {target} does not exist")
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in parsed(target).ids:
            problems.append(f"broken link {ref!r}: no id {parts.fragment!r} in {target.name}")
    return problems


def _watch(page: Any, problems: list[str]) -> None:
    """Record the page's console errors and uncaught exceptions; refuse, and record, any request that
    would leave the machine."""
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text[:200]}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught exception: {str(e)[:200]}"))

    def route(r: Any, _request: Any = None) -> None:
        if r.request.url.startswith(("file:", "data:", "blob:", "about:")):
            r.continue_()
        else:
            problems.append(f"loads from the internet: {r.request.url[:120]}")
            r.abort()
    page.route("**/*", route)


def chromium() -> str | None:
    """Debian's Chromium ($CHROMIUM or on the PATH), or None."""
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def check_pages(html: Path, shots: Path | None, only: list[Path] | None = None) -> dict[str, list[str]]:
    """{page: problems} for every page of ``html`` (or ``only``); screenshots into ``shots`` when given."""
    from playwright.sync_api import sync_playwright

    found: dict[str, list[str]] = {}
    cache: dict[Path, _Refs] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            for path in only or pages(html):
                name = path.relative_to(html).as_posix()
                problems = broken_links(html, path, cache)
                if cache[path].redirect:  # only a link to the real page, checked above
                    found[name] = problems
                    continue
                context = browser.new_context(viewport=dict(zip(("width", "height"), VIEWPORTS["desktop"])))
                page = context.new_page()
                _watch(page, problems)
                page.goto(path.as_uri(), wait_until="load")
                seen = page.evaluate(INSPECT)
                problems += [f"formula not rendered: {m}" for m in seen["math"]]
                problems += [f"MathJax error: {m}" for m in seen["merror"]]
                problems += [f"image not loaded: {src}" for src in seen["images"]]
                problems += [f"cell with an error output: {e}" for e in seen["errors"]]
                problems += [f"Chinese not rendered: {c}" for c in seen["cjk"]]
                if shots is not None:
                    for label, (width, height) in VIEWPORTS.items():
                        page.set_viewport_size({"width": width, "height": height})
                        target = shots / f"{name.removesuffix('.html').replace('/', '__')}-{label}.jpg"
                        target.parent.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=str(target), full_page=True, type="jpeg", quality=60)
                context.close()
                found[name] = problems
        finally:
            browser.close()
    return found
