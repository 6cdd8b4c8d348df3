"""Chinese text on a machine without CJK fonts: a subset web font shipped with the book, and the same font
for matplotlib's figures.

The font is ``book/_static/fonts/course-cjk.ttf``: Noto Sans SC (SIL Open Font License 1.1, its text in
``book/_static/fonts/OFL.txt``) from the npm package @fontsource/noto-sans-sc, subset with fontTools to the
characters the book uses (its sources and its built pages, where the capstone prints real reviews) and the
3,755 most common Chinese characters (GB 2312 level 1), so that a review the capstone page prints after a
change rarely needs a new font (about 1 MB). As a Sphinx extension this module

  * adds ``cjk.css``: an @font-face "Course CJK" limited (unicode-range) to CJK characters and punctuation,
    first in the theme's text and code font stacks, so Chinese is drawn with it and nothing else is;
  * makes the pages' kernels register the font with matplotlib (an IPython startup file in a folder of the
    build, named by $IPYTHONDIR for the kernels this build starts) and add it to ``font.family`` after the
    usual sans-serif, so matplotlib falls back to it for a figure's Chinese label instead of drawing boxes.

The browser test (solutions/tests/book/test_browser.py) renders every page's Chinese and fails on a character
the font lacks. Then subset again from the built book (``npm`` fetches the package):

    .venv/bin/python -m course_admin.book.cjk_font --html _build/html
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from course_lib.provided.layout import REPO_ROOT

ROOT = REPO_ROOT
STATIC = ROOT / "book" / "_static"
FONT = STATIC / "fonts" / "course-cjk.ttf"  # TrueType: browsers and matplotlib (no WOFF in its FreeType)
FAMILY = "Course CJK"
PACKAGE = "@fontsource/noto-sans-sc@5.3.0"
MEMBER = "package/files/noto-sans-sc-chinese-simplified-400-normal.woff"
# CJK punctuation, unified ideographs, full-width forms: what the web font (and only it) draws
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
UNICODE_RANGE = "U+3000-303F, U+3400-4DBF, U+4E00-9FFF, U+FF00-FFEF"
STARTUP = '''# Written by solutions/course_admin/book/cjk_font.py: the book's CJK font for matplotlib in every page's kernel.
try:
    import matplotlib as _mpl
    from matplotlib import font_manager as _fm
    _fm.fontManager.addfont({font!r})
    _mpl.rcParams["font.family"] = [_f for _f in _mpl.rcParams["font.family"] if _f != {family!r}] + [{family!r}]
except Exception as _err:  # the figures then lack Chinese glyphs, and matplotlib says so
    print(f"cjk_font: {{_err}}")
'''


def characters(*texts: str) -> set[str]:
    """The CJK characters in ``texts``."""
    return {c for text in texts for c in CJK.findall(text)}


def book_characters(html: Path | None) -> set[str]:
    """Every CJK character of the book's sources and, given the built HTML, of its pages (cell outputs too)."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "book").glob("*.md"))]
    if html is not None:
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(html.rglob("*.html"))]
    return characters(*texts)


def common_characters() -> set[str]:
    """The 3,755 characters of GB 2312 level 1 (rows 16 to 55), the most common in Simplified Chinese."""
    found = set()
    for row in range(0xB0, 0xD8):
        for cell in range(0xA1, 0xFF):
            try:
                found.add(bytes([row, cell]).decode("gb2312"))
            except UnicodeDecodeError:
                pass
    return found


def fetch_source(folder: Path) -> Path:
    """The full Simplified Chinese font of the npm package, unpacked into ``folder``."""
    subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=folder, check=True, capture_output=True)
    (tgz,) = folder.glob("*.tgz")
    with tarfile.open(tgz) as tar:
        tar.extractall(folder, members=[tar.getmember(MEMBER), tar.getmember("package/LICENSE")], filter="data")
    return folder / MEMBER


def subset(source: Path, chars: set[str], target: Path = FONT) -> int:
    """Write the subset of ``source`` holding ``chars`` to ``target`` (TrueType); return how many it holds."""
    from fontTools import subset as ft_subset
    from fontTools.ttLib import TTFont

    font = TTFont(source)
    cmap = font.getBestCmap()
    missing = sorted(c for c in chars if ord(c) not in cmap)
    if missing:
        print(f"cjk_font: the source font lacks {len(missing)} character(s): {''.join(missing[:40])}", file=sys.stderr)
    options = ft_subset.Options()
    options.flavor, options.layout_features, options.name_IDs = None, ["*"], ["*"]
    options.notdef_outline = True
    sub = ft_subset.Subsetter(options)
    sub.populate(unicodes=[ord(c) for c in chars if ord(c) in cmap])
    sub.subset(font)
    for record in font["name"].names:  # a subset is another font: its own family name (the OFL asks as much)
        if record.nameID in (1, 4, 16):
            record.string = FAMILY
        elif record.nameID == 6:
            record.string = FAMILY.replace(" ", "")
    target.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = None
    font.save(target)
    return len(font.getBestCmap())


def font_characters(font: Path = FONT) -> set[str]:
    """The characters the shipped font draws."""
    from fontTools.ttLib import TTFont

    return {chr(u) for u in TTFont(font).getBestCmap()}


def css() -> str:
    return (f'@font-face {{ font-family: "{FAMILY}"; src: url("fonts/{FONT.name}") format("truetype"); '
            f"font-display: block; unicode-range: {UNICODE_RANGE}; }}\n"
            f':root {{ --pst-font-family-base: "{FAMILY}", var(--pst-font-family-base-system); '
            f'--pst-font-family-heading: "{FAMILY}", var(--pst-font-family-base-system); '
            f'--pst-font-family-monospace: "{FAMILY}", var(--pst-font-family-monospace-system); }}\n')


# ---------------------------------------------------------------- Sphinx
def _static(app: Any, config: Any) -> None:
    config.html_static_path.append(str(STATIC))


def _kernels(app: Any) -> None:
    """Every kernel this build starts reads an IPython startup file registering the font with matplotlib."""
    folder = Path(app.outdir).parent / "ipython"
    startup = folder / "profile_default" / "startup" / "00-course-cjk-font.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STARTUP.format(font=str(FONT), family=FAMILY), encoding="utf-8")
    os.environ["IPYTHONDIR"] = str(folder)


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", _static)
    app.connect("builder-inited", _kernels)
    app.add_css_file("cjk.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, help="the built book (_build/html): its pages' characters too")
    parser.add_argument("--source", type=Path, help=f"the full font (default: fetched with npm, {PACKAGE})")
    parser.add_argument("--book-only", action="store_true", help="only the book's characters, not GB 2312 level 1")
    args = parser.parse_args(argv)
    chars = book_characters(args.html) | (set() if args.book_only else common_characters())
    with tempfile.TemporaryDirectory() as tmp:
        source = args.source or fetch_source(Path(tmp))
        held = subset(source, chars)
        if args.source is None:
            (STATIC / "fonts" / "OFL.txt").write_bytes((Path(tmp) / "package" / "LICENSE").read_bytes())
    (STATIC / "cjk.css").write_text(css(), encoding="utf-8")
    print(f"cjk_font: {FONT} holds {held} characters ({FONT.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
