"""The figures of the Chinese edition: each edition shows its own drawing, with alt text in its language.

A page's code displays a figure with ``show(fig)`` (book/_code/figures.py): one output holding the English
drawing (``image/svg+xml``) and the Chinese one (``MIME["zh_CN"]``), drawn in the same execution. This module

* renders the Chinese drawing as an image (a MyST-NB mime renderer plugin, registered in pyproject.toml's
  ``myst_nb.mime_renderers`` entry points); the Chinese build ranks its type first (editions.py,
  ``nb_mime_priority_overrides``), the English one does not rank it at all, so each picks its own;
* gives that image the alt text of the page's figure catalog (``book/locale/zh_CN/figures/<page>.json``):
  MyST-NB takes a figure's alt text from the cell's metadata, which is English;
* checks the executed pages against the catalogs (``problems``): a text or alt text without its translation,
  a translation whose English no figure has any more, or one that breaks the book's typography, maths or
  glossary terms (catalogs.py), fails ``make book`` before the Chinese edition is
  built, named, as the pages' catalogs do (editions.py).

    .venv/bin/python -m course_admin.book.figures todo 02_attention   # {English: ""} still to translate
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from course_lib.provided.layout import LAYOUT
from course_lib.provided.loader import load_file

from . import catalogs
from . import terms as term_list

ROOT = LAYOUT.root
SEEN = ROOT / "_build" / "figures"  # per page: what its figures say, as the last build rendered them (record)
drawing = load_file("course_book_figures", ROOT / "book" / "_code" / "figures.py")
MIME, METADATA, catalog_path = drawing.MIME, drawing.METADATA, drawing.catalog_path
# what the course says to a learner, printed in each language by the same execution (book/_code/printed.py)
TEXT_MIME = load_file("course_book_printed", ROOT / "book" / "_code" / "printed.py").MIME


def priorities(lang: str) -> list[tuple[str, str, int]]:
    """The Chinese build's ``nb_mime_priority_overrides``: its own drawing and text before the English."""
    return [("html", MIME[lang], 1), ("html", TEXT_MIME[lang], 2)]


def load(page: str, lang: str = "zh_CN") -> dict[str, str]:
    path = catalog_path(page, lang)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


_SEEN: dict[str, dict[str, Any]] = {}  # this build's record of each page's figures, written as it grows


def record(page: str, said: dict[str, Any], alt: str | None, folder: Path | None = None) -> None:
    """Note one figure of ``page`` as the build renders it: its texts in each language, its alt text."""
    seen = _SEEN.setdefault(page, {"alts": []})
    for lang, found in said.items():
        mine = seen.setdefault(lang, {"texts": [], "untranslated": []})
        for key in ("texts", "untranslated"):
            mine[key] = sorted(set(mine[key]) | set(found.get(key, [])))
    if alt:
        seen["alts"] = sorted(set(seen["alts"]) | {" ".join(alt.split())})
    folder = folder or SEEN
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{page}.json").write_text(json.dumps(seen, ensure_ascii=False, indent=1), encoding="utf-8")


def wanted(seen: dict[str, Any], lang: str = "zh_CN") -> tuple[set[str], set[str], set[str]]:
    """(texts of the page's figures, their alt texts, texts drawn in English in the ``lang`` drawing)."""
    mine = seen.get(lang, {})
    return set(mine.get("texts", [])), set(seen.get("alts", [])), set(mine.get("untranslated", []))


def problems(page: str, seen: Path = SEEN, lang: str = "zh_CN") -> list[str]:
    """What keeps the page's figures from being shown in ``lang``; [] when they can be."""
    path = seen / f"{page}.json"
    if not path.is_file():
        return []
    texts, alts, untranslated = wanted(json.loads(path.read_text(encoding="utf-8")), lang)
    catalog, where = load(page, lang), LAYOUT.rel(catalog_path(page, lang))
    found = [f"{where}: figure text not translated: {t!r}" for t in sorted(texts) if not catalog.get(t)]
    found += [f"{where}: alt text not translated: {a[:70]!r}..." for a in sorted(alts) if not catalog.get(a)]
    found += [f"{where}: drawn before its translation was added (run make book again): {t!r}"
              for t in sorted(untranslated) if catalog.get(t)]
    found += [f"{where}: {e[:50]!r}: {issue}" for e, zh in catalog.items() if zh
              for issue in catalogs.markup_lost(e, zh) + catalogs.typography(zh)
              + catalogs.terms(e, zh, with_list=not term_list.pending(where))]
    found += [f"{where}: stale, no figure of the page says {e[:70]!r} any more" for e in catalog
              if e not in texts and e not in alts]
    return found


def pages(seen: Path = SEEN) -> list[str]:
    return sorted(p.stem for p in seen.glob("*.json"))


class EditionFigure:
    """MyST-NB mime renderer plugin: a drawing in another language, rendered as the SVG image it is, and a
    learner's report in another language (printed.py), rendered as the text it is."""

    mime_priority_overrides: list = []  # the Chinese build ranks it (editions.py); the English never shows it

    @staticmethod
    def handle_mime(renderer: Any, data: Any, inline: bool) -> list | None:
        from myst_nb.core.render import MimeData
        if data.mime_type in TEXT_MIME.values():  # a learner's report in another language: text, as printed
            return renderer.render_text_plain(MimeData(
                "text/plain", data.content, cell_metadata=data.cell_metadata, output_metadata={},
                cell_index=data.cell_index, output_index=data.output_index, line=data.line))
        lang = next((lang for lang, mime in MIME.items() if mime == data.mime_type), None)
        if lang is None:
            return None
        image = MimeData("image/svg+xml", data.content, cell_metadata=data.cell_metadata,
                         output_metadata={}, cell_index=data.cell_index, output_index=data.output_index,
                         line=data.line)
        found = renderer.render_image(image)
        said = data.output_metadata.get(METADATA, {})
        page = said.get("page")
        alt = (data.cell_metadata.get("mystnb", {}).get("image", {}) or {}).get("alt")
        if page:
            record(page, {k: v for k, v in said.items() if k in MIME}, str(alt) if alt else None)
        catalog = load(page, lang) if page else {}
        for node in found:
            if node.get("alt"):
                node["alt"] = catalog.get(" ".join(node["alt"].split()), node["alt"])
        return found


def todo_or_check(module: str, doc: str | None, argv: list[str] | None) -> argparse.Namespace:
    """The command line of a page-catalog module (this one, outputs.py): ``todo PAGE`` or ``check``."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["todo", "check"])
    parser.add_argument("page", nargs="?", help="a page's file name, e.g. 02_attention (todo)")
    args = parser.parse_args(argv)
    if args.action == "todo" and not args.page:
        parser.error("todo needs the page, e.g. 02_attention")
    return args


def main(argv: list[str] | None = None) -> int:
    args = todo_or_check("course_admin.book.figures", __doc__, argv)
    if args.action == "check":
        left = [p for page in pages() for p in problems(page)]
        print("\n".join(left) or "every figure of the executed pages translated")
        return 1 if left else 0
    path = SEEN / f"{args.page}.json"
    if not path.is_file():
        raise SystemExit(f"{LAYOUT.rel(path)} is not there: run make book first (it records the figures)")
    texts, alts, _ = wanted(json.loads(path.read_text(encoding="utf-8")))
    catalog = load(args.page)
    print(json.dumps({e: "" for e in sorted(texts) + sorted(alts) if not catalog.get(e)}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
