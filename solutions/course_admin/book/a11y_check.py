"""The built book checked for accessibility with axe-core, the engine the book's themes (pydata-sphinx-theme,
sphinx-book-theme) test their own pages with: headless Chromium (browser_check.chromium) opens every page in each
view of ``VIEWS`` (each width of browser_check.VIEWPORTS, and the desktop in the theme's dark colours), WORKERS
pages at a time, waits for MathJax and the fonts, opens every ``<details>`` (the hidden code cells a reader shows) and
waits for its fade-in to end, injects ``axe.min.js`` and runs every rule axe runs by default (in the views that
run some, those of ``ONLY``). Used by solutions/tests/book/test_a11y.py.

Colour contrast, most of axe's time (about 4 ms a text: 12 of the 15 s axe took on page 08, whose code cells
have 2,400 coloured tokens), is checked on one text of each group of texts alike: the same colour, font size and weight,
text shadow, blending and filter, opacity (its own times its ancestors') and backdrop colour (the nearest
background behind it; a text over a background image is a group of its own). Texts alike have the same contrast
unless something else is drawn over their backdrop, which axe leaves "incomplete", unreported, either way. A line
of the report names the text checked and how many more are alike ("(and 12 more alike)"): fixing its colour
fixes them.

Reported, one line each (rule id, impact, the node's CSS selector, what axe says is wrong): every node of a
violation whose impact is "serious" or "critical", and, whatever its impact, every node of the rules named in
``ALWAYS``, which axe rates "moderate": heading-order (a skipped heading level breaks a screen reader's outline
of the page) and region (content outside every landmark is skipped by a reader who moves between them). Besides axe's rules, one of the course's own: ``alt-is-file-name``, an image whose alt text
is its file name (Sphinx writes the image's path as the alt text of a cell's figure that has none, and axe
takes any alt text). Not reported: the other "minor" and "moderate" findings, and axe's "incomplete" ones
(what it could not decide, such as contrast over an image).

axe-core is the npm package pinned in the Makefile's ``install`` target, installed into ``.a11y/`` (``$AXE_JS``
names another copy of ``axe.min.js``).
"""
from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from course_lib.provided.layout import REPO_ROOT

from . import browser_check

AXE_VERSION = "4.10.3"  # the same pin as the Makefile's
# Each width of browser_check.VIEWPORTS in the theme's light colours, and the desktop in its dark ones (the
# theme follows the reader's system setting)
VIEWS = {**{label: (size, "light") for label, size in browser_check.VIEWPORTS.items()},
         "desktop dark": (browser_check.VIEWPORTS["desktop"], "dark")}
# The views that run some rules, not every rule: the dark colours are the same page in the same layout, its
# CSS's colours changed, so the colour rules and the images (a theme may show a drawing in dark colours only).
COLOUR = ["color-contrast", "link-in-text-block"]
IMAGES = ["image-alt", "role-img-alt", "svg-img-alt", "object-alt", "input-image-alt", "area-alt"]
ONLY = {"desktop dark": COLOUR + IMAGES}
# pages checked at once, each in its own renderer process: the cores, shared out between the pytest-xdist workers
# (make test-book's two workers each check one edition in one view at a time: one page each). Measured: an edition
# in its three views took 352-400 s so; two pages at once were no faster.
WORKERS = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
IMPACTS = ("serious", "critical")
ALWAYS = ("heading-order", "region")

SETTLE = r"""async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  document.querySelectorAll('details').forEach(d => { d.open = true; });  // "show code": what a reader opens
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  await Promise.all(document.getAnimations().map(a => a.finished));  // a fade-in measured half-way is no colour
}"""

RUN = r"""async ([impacts, always, how]) => {
  // how: {only: the rules (else every rule)}
  const FILE = /^\S*\.(svg|png|jpe?g|gif|webp)$/i;
  const where = (img, src) => img.id ? `#${img.id}`
    : `${img.parentElement.closest('[id]') ? '#' + img.parentElement.closest('[id]').id + ' ' : ''}img[src="${src}"]`;
  const options = {resultTypes: ['violations']};
  let violations = [];
  const others = how.only ? {runOnly: {type: 'rule', values: how.only.filter(r => r !== 'color-contrast')}}
    : {rules: {'color-contrast': {enabled: false}}};
  violations = (await axe.run(document, {...options, ...others})).violations;
  const alike = new Map();  // each text that colour contrast checks: how many more are alike (SAMPLE)
  if (!how.only || how.only.includes('color-contrast')) {
    const groups = new Map();
    let unique = 0;
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const el = walker.currentNode.parentElement;
      if (!walker.currentNode.nodeValue.trim() || !el || alike.has(el)) continue;
      const shown = el.getClientRects().length && el.checkVisibility({opacityProperty: true, visibilityProperty: true});
      if (!shown) continue;
      let opacity = 1, backdrop = null;
      for (let e = el; e; e = e.parentElement) {
        const s = getComputedStyle(e);
        opacity *= parseFloat(s.opacity);
        if (!backdrop && (s.backgroundColor !== 'rgba(0, 0, 0, 0)' || s.backgroundImage !== 'none')) backdrop = s;
      }
      const s = getComputedStyle(el);
      const behind = !backdrop ? 'canvas'
        : backdrop.backgroundImage !== 'none' ? `image ${unique++}` : backdrop.backgroundColor;
      const key = [s.color, s.fontSize, s.fontWeight, s.textShadow, s.mixBlendMode, s.filter, opacity, behind]
        .join('|');
      if (groups.has(key)) { alike.set(groups.get(key), alike.get(groups.get(key)) + 1); continue; }
      groups.set(key, el);
      alike.set(el, 0);
    }
    const sample = [...groups.values()];
    if (sample.length) {
      violations = violations.concat((await axe.run({include: sample},
        {...options, runOnly: {type: 'rule', values: ['color-contrast']}})).violations);
    }
  }
  const found = [];
  for (const rule of violations) {
    for (const node of rule.nodes) {
      const impact = node.impact || rule.impact;
      if (!impacts.includes(impact) && !always.includes(rule.id)) continue;
      const first = typeof node.target[0] === 'string' ? document.querySelector(node.target[0]) : null;
      const more = rule.id === 'color-contrast' ? alike.get(first) || 0 : 0;
      const target = node.target.flat().join(' >> ') + (more ? ` (and ${more} more alike)` : '');
      found.push({rule: rule.id, impact, target,
                  why: (node.failureSummary || rule.help).replace(/\s+/g, ' ').trim().slice(0, 240)});
    }
  }
  // axe takes any alt text; a file name says nothing
  for (const img of document.querySelectorAll('img[alt]')) {
    const alt = img.getAttribute('alt').trim(), src = img.getAttribute('src') || '';
    if (alt && (alt === src || alt === src.split('/').pop() || FILE.test(alt))) {
      found.push({rule: 'alt-is-file-name', impact: 'serious', target: where(img, src),
                  why: `the image's alt text is its file name (${alt.slice(0, 60)}): say what it shows`});
    }
  }
  return found;
}"""


def axe_js() -> Path | None:
    """axe-core's ``axe.min.js`` ($AXE_JS, else the Makefile's copy in .a11y/), or None when absent."""
    path = Path(os.environ.get("AXE_JS") or REPO_ROOT / ".a11y" / "node_modules" / "axe-core" / "axe.min.js")
    return path if path.is_file() else None


def installed_version(script: Path) -> str:
    """The version of the axe-core package ``script`` comes from (its package.json), or "" when unknown."""
    meta = script.parent / "package.json"
    return json.loads(meta.read_text(encoding="utf-8")).get("version", "") if meta.is_file() else ""


def describe(hit: dict) -> str:
    """One violation as a line of the report."""
    return f"{hit['rule']} ({hit['impact']}) at {hit['target']}: {hit['why']}"


async def _local_only(route) -> None:
    """Let a page load only local files (the book loads nothing from the internet)."""
    if route.request.url.startswith(("file:", "data:", "blob:", "about:")):
        await route.continue_()
    else:
        await route.abort()


async def _check_view(browser, label: str, html: Path, paths: list[Path], script: Path) -> dict[str, list[str]]:
    """The reported violations of ``paths`` in one view of VIEWS, WORKERS pages at a time."""
    (width, height), scheme = VIEWS[label]
    context = await browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    todo, found = list(paths), {}

    async def worker() -> None:
        page = await context.new_page()
        await page.route("**/*", _local_only)
        while todo:
            path = todo.pop(0)
            await page.goto(path.as_uri(), wait_until="load")
            await page.evaluate(SETTLE)
            await page.add_script_tag(path=str(script))
            hits = await page.evaluate(RUN, [list(IMPACTS), list(ALWAYS), {"only": ONLY.get(label)}])
            found[f"{path.relative_to(html).as_posix()} [{label}]"] = [describe(h) for h in hits]

    try:
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
    finally:
        await context.close()
    return found


async def _check_all(html: Path, paths: list[Path], script: Path, views: list[str]) -> dict[str, list[str]]:
    from playwright.async_api import async_playwright

    found: dict[str, list[str]] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=browser_check.chromium(),
                                           args=browser_check.CHROMIUM_FLAGS)
        try:
            for label in views:
                found |= await _check_view(browser, label, html, paths, script)
        finally:
            await browser.close()
    return dict(sorted(found.items()))


def check_pages(html: Path, only: list[Path] | None = None, views: list[str] | None = None) -> dict[str, list[str]]:
    """{"page [view]": the reported violations} for every page of ``html`` (or ``only``) in each view of VIEWS
    (or of ``views``, labels of VIEWS: a test may check one view a worker); a redirect page (index.html) is left
    out."""
    unknown = sorted(set(views or ()) - set(VIEWS))
    if unknown:
        raise ValueError(f"no such view {unknown}: the views are {sorted(VIEWS)}")
    script = axe_js()
    if script is None:
        raise FileNotFoundError("axe-core is not installed (make install: npm install --prefix .a11y axe-core)")
    html = html.resolve()
    paths = [p.resolve() for p in (only or browser_check.pages(html)) if not browser_check.redirect_of(p)]
    return asyncio.run(_check_all(html, paths, script, list(views or VIEWS)))
