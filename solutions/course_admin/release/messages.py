"""What the course says to learners, in every language: the messages of ``course_lib/provided/i18n.py``, extracted
and held to their translations.

A message is every string literal given to ``_``, ``N_`` or ``CheckFailure`` in ``course_lib/provided/`` and
``tests/specs/`` (found in the source, so an f-string there is an error: its words cannot be looked up), and the
text the specs hold as data: each chapter's ``TITLE``, its ``MISTAKES``, its cases' names and hints, and what
each hidden case checks (its ``about``). A translation
catalog, ``course_lib/provided/locale/<lang>.json``, maps each English message to its translation; the English is
the key, so an English message that changes has no translation (and its old entry is stale) until a translator
writes one. ``problems`` names them all, and what a translation breaks: a ``{field}`` lost or added, inline code
or maths lost, the Chinese typography and the glossary's terms (the rules of the book's own catalogs, catalogs.py).

    python -m course_admin.release.messages todo zh_CN > todo.json     # the English messages still to translate
    python -m course_admin.release.messages lint zh_CN done.json       # what is wrong with translations, before
    python -m course_admin.release.messages apply zh_CN done.json      # merged into the catalog (stale ones dropped)
    python -m course_admin.release.messages check zh_CN                # what `make test` fails on
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import string
import sys
from pathlib import Path

from course_lib.provided import i18n
from course_lib.provided.layout import LAYOUT, Layout
from course_lib.provided.loader import load_file

from ..book import catalogs

MARKERS = ("_", "N_", "CheckFailure", "tr", "said", "SubmissionError")  # tr: a translator passed in (checking._describe_exception)
SOURCES = ("course_lib/provided/**/*.py", "tests/specs/*.py",  # and the grader's words that reach learners:
           "solutions/course_admin/grading/verdict.py", "solutions/course_admin/grading/sandboxed.py",
           "solutions/course_admin/grading/batch.py", "solutions/course_admin/grading/trained.py",
           "solutions/course_admin/records/report.py", "solutions/course_admin/records/rows.py",
           "solutions/course_admin/exports/gradescope_results.py",
           "solutions/course_admin/exports/hub_feedback.py", "solutions/course_admin/exports/gradescope.py",
           "solutions/course_admin/exports/gradescope_upload.py", "solutions/course_admin/grading/grade.py",
           "solutions/course_admin/intake/*.py")


class MessageError(ValueError):
    """A message that cannot be extracted (an f-string given to ``_``)."""


def _literals(path: Path, root: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MARKERS
                and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.JoinedStr):
            raise MessageError(f"{path.relative_to(root)}:{node.lineno}: an f-string given to {node.func.id}() "
                               "cannot be translated: write a template with fields, _('... {x}').format(x=...)")
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
            found.append((node.lineno, node.col_offset, arg.value))
    return [text for *_, text in sorted(found)]


def _data(layout: Layout) -> list[str]:
    """The specs' text kept as data: titles, known mistakes, hints."""
    from course_lib.provided import chapters
    found = []
    for number in layout.chapters():
        spec = chapters.load_spec(number)
        found.append(spec.TITLE)
        found += list(getattr(spec, "MISTAKES", {}).values())
        for case in spec.CASES:  # a case's name: the gradebook's key, shown through i18n.check_name
            found += [case.name, case.hint, case.hint_if_raises]
        hidden = layout.hidden_file(number)  # what a hidden case checks, said on its row (grading/verdict.py)
        if hidden.is_file():
            found += [case.about.strip() for case in load_file(f"course_hidden_ch{number}", hidden).CASES]
    return found


def extract(root: Path = LAYOUT.root) -> list[str]:
    """Every message, once, in the order met (sources by path, then the specs' data)."""
    layout = Layout(root)
    marked = [t for pattern in SOURCES for path in sorted(root.glob(pattern)) if "__pycache__" not in path.parts
              for t in _literals(path, root)]
    data = [t for t in _data(layout) if t and catalogs.needs_translation(t)]  # a title "LSTM" stays as it is
    return list(dict.fromkeys([t for t in marked if re.search(r"[A-Za-z]", t)] + data))


def path_of(lang: str) -> Path:
    return i18n.LOCALE / f"{i18n.normalise(lang)}.json"


def load(lang: str) -> dict[str, str]:
    path = path_of(lang)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def fields(text: str) -> list[str]:
    """The ``{field}`` names of a template, sorted (``{{`` is no field)."""
    try:
        return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)
    except ValueError as err:
        return [f"(unparsable: {err})"]


def issues(english: str, translated: str) -> list[str]:
    """What ``translated`` breaks of ``english``: fields, markup, typography, terms."""
    found = []
    if fields(english) != fields(translated):
        found.append(f"fields {fields(translated)}, expected {fields(english)}")
    found += [f"markup lost: {piece!r}" for piece in catalogs.markup_lost(english, translated)]
    return found + catalogs.typography(translated) + catalogs.terms(english, translated)


def problems(lang: str, root: Path = LAYOUT.root) -> list[str]:
    """Everything that keeps ``lang``'s catalog from being in sync with the current English messages."""
    if i18n.normalise(lang) == "en":
        return []
    wanted, done = extract(root), load(lang)
    found = [f"untranslated: {m!r}" for m in wanted if not done.get(m)]
    found += [f"stale (its English is gone): {m!r}" for m in done if m not in wanted]
    found += [f"{m[:50]!r}: {issue}" for m in wanted if done.get(m) for issue in issues(m, done[m])]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.release.messages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["todo", "lint", "apply", "check"])
    parser.add_argument("lang", help="the language of the catalog, e.g. zh_CN")
    parser.add_argument("json", nargs="?", type=Path, help="translations {English: translation} (lint, apply)")
    args = parser.parse_args(argv)
    try:
        wanted, done = extract(), load(args.lang)
    except MessageError as err:
        print(err, file=sys.stderr)
        return 2
    if args.action == "todo":
        print(json.dumps([m for m in wanted if not done.get(m)], ensure_ascii=False, indent=1))
        return 0
    if args.action == "check":
        left = problems(args.lang)
        print("\n".join(left) or f"{args.lang}: every message translated and in sync")
        return 1 if left else 0
    if args.json is None:
        parser.error(f"{args.action} needs the JSON file of translations")
    given = json.loads(args.json.read_text(encoding="utf-8"))
    left = [f"not a current message: {m!r}" for m in given if m not in wanted]
    left += [f"{m[:50]!r}: {issue}" for m, t in given.items() if m in wanted for issue in issues(m, t)]
    if args.action == "lint":
        print("\n".join(left) or "clean")
        return 1 if left else 0
    merged = {m: given.get(m) or done[m] for m in wanted if given.get(m) or done.get(m)}
    path_of(args.lang).parent.mkdir(parents=True, exist_ok=True)
    path_of(args.lang).write_text(json.dumps(merged, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{LAYOUT.rel(path_of(args.lang))}: {len(merged)} of {len(wanted)} messages translated"
          + (f"; not applied: {len(left)} problem(s)\n" + "\n".join(left) if left else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
