"""The book's two editions from one source: English in ``_build/html/``, Simplified Chinese in ``_build/html/zh/``.

``make book`` builds the English edition (Jupyter Book, every page executed or taken from the execution
cache), then runs this module, which

1. extracts the English messages of every page with Sphinx's gettext builder into ``_build/gettext``;
2. checks the Chinese catalogs of the translated pages (``book/locale/zh_CN/TRANSLATED``) against them
   (catalogs.py): a message of the English without a translation, a fuzzy one, a translation that lost
   markup or breaks the typography fails the build, named, so an English change cannot land without its
   translation;
3. checks the figures of the executed pages against their catalogs (figures.py), and the lines their code
   prints (outputs.py): a figure's text or alt text, or a printed line, without its translation fails the
   build the same way;
4. builds the Chinese edition with the same configuration, ``language = "zh_CN"`` and the catalogs of
   ``book/locale``, sharing the English build's execution cache: no page runs a second time.

Each page of either edition links to the same page of the other (language.py). Run alone:

    .venv/bin/python -m course_admin.book.editions [--no-check]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from course_lib.provided.layout import LAYOUT

from . import build, catalogs, figures, outputs

ROOT = LAYOUT.root
BUILD = ROOT / "_build"
ZH_HTML = BUILD / "html" / "zh"


def _sphinx(builder: str, out: Path, doctrees: Path, overrides: dict) -> int:
    return build.run_sphinx(builder, out, doctrees, {"nb_execution_cache_path": str(BUILD / ".jupyter_cache"),
                                                 **overrides}, quiet=True)


def extract(out: Path = catalogs.EXTRACTED) -> int:
    """The English messages of every page, one ``.pot`` per page (``gettext_compact`` off)."""
    return _sphinx("gettext", out, BUILD / ".doctrees-gettext", {"gettext_compact": False})


# What _config.yml and the theme say in English, said in Chinese: the book's title and author (each page's tab
# and header), and the fold of a hidden code cell ("Show code cell source"; myst-nb puts "source", "outputs" or
# "content" where {type} is, so the Chinese names none)
CHINESE = {"project": "从零实现 Transformer", "html_title": "从零实现 Transformer",
           "author": "《从零实现 Transformer》作者团队",
           "nb_code_prompt_show": "显示代码单元", "nb_code_prompt_hide": "隐藏代码单元"}


def chinese_baseurl(config: Path = ROOT / "_config.yml") -> str:
    """The Chinese edition's base URL: the site's (``html: baseurl`` of _config.yml, which the publishing workflow
    sets: course_admin/publish/bookconfig.py) and ``zh/``, so that its pages' canonical links name themselves, not
    their English twins; "" for the offline book, as the English edition's."""
    import yaml

    base = ((yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("html") or {}).get("baseurl") or ""
    return base.rstrip("/") + "/zh/" if base else ""


def build_chinese(out: Path = ZH_HTML) -> int:
    """The Chinese edition: the same sources, the catalogs of ``book/locale``; built in ``_build/zh/html`` (whose
    parent takes the build's scratch, ``jupyter_execute/``), then copied to ``out``."""
    built = BUILD / "zh" / "html"
    code = _sphinx("html", built, BUILD / ".doctrees-zh", {**CHINESE, "html_baseurl": chinese_baseurl(),
                                                            "language": catalogs.LANGUAGE, "gettext_compact": False,
                                                            "locale_dirs": [str(catalogs.LOCALE)],
                                                            # each figure's Chinese drawing, not the English
                                                            "nb_mime_priority_overrides":
                                                                figures.priorities(catalogs.LANGUAGE)})
    if code == 0:
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(built, out)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.book.editions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-check", action="store_true", help="build the Chinese edition even if out of sync")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if extract() != 0:
        print("editions: extracting the English messages failed (above)", file=sys.stderr)
        return 1
    done = catalogs.translated()
    problems = [p for page in catalogs.pages() if page in done for p in catalogs.problems(page)]
    problems += [f"{page}: listed in {catalogs.TRANSLATED.name} but not a page of the book"
                 for page in done if page not in catalogs.pages()]
    problems += [p for page in figures.pages() if f"book/{page}" in done for p in figures.problems(page)]
    problems += [p for page in outputs.pages() if f"book/{page}" in done for p in outputs.problems(page)]
    waiting = [page for page in catalogs.pages() if page not in done]
    if problems and not args.no_check:
        print("\n".join(problems[:40]), file=sys.stderr)
        print(f"editions: the Chinese edition is out of sync with the English ({len(problems)} problem(s) above): "
              "translate them (python -m course_admin.book.catalogs todo PAGE, then apply; a figure's: python -m "
              "course_admin.book.figures todo PAGE; a printed line's: python -m course_admin.book.outputs todo PAGE; "
              "the appendix for contributors says how)", file=sys.stderr)
        return 1
    if build_chinese() != 0:
        print("editions: building the Chinese edition failed (above)", file=sys.stderr)
        return 1
    print(f"editions: messages extracted, the {len(done)} translated pages' catalogs in sync, Chinese edition at "
          f"{ZH_HTML / 'index.html'} ({time.perf_counter() - start:.0f} s)"
          + (f"; shown in English there, not yet translated: {', '.join(waiting)}" if waiting else ""))
    left = {page: n for page, n in sorted(outputs.LEFT.items()) if n}
    if left:  # data the page prints (names, shapes), or a library's log: no template of its prints (outputs.py)
        print(f"editions: printed lines with words shown as printed (data, or no print of the page's own): "
              + ", ".join(f"{page.rsplit('/', 1)[-1]} {n}" for page, n in left.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
