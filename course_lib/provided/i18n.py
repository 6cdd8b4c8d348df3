"""The language of what the course says to a learner: `course check`, `check()`, `make submit` and the grader's
feedback, in English or in Simplified Chinese.

A message is written in English where it is made, marked with ``_``, its variable parts as ``str.format`` fields:

    _("{name}: shape {got}, expected {want}").format(name=key, got=..., want=...)

``_`` returns the message in the current language: its translation from ``locale/zh_CN.json`` (English message
-> Chinese, the English being the key, so a changed English message has no translation until one is written for
it), or the English when there is none. Text that is data (a spec's ``MISTAKES``, a case's hints and its name)
is translated where it is shown, by the same ``_`` (a check's name by ``check_name``, so that the grade table keeps
the English). ``course_admin.release.messages`` extracts every message and a
test fails on one without its translation, on a translation of an English message that is gone, and on one that
loses a field, inline code or a glossary term.

The language: ``COURSE_LANG`` if set (``en`` or ``zh_CN``), else ``[tool.course] language`` in the tree's
pyproject.toml (``course release --learner-tree DIR --lang zh_CN`` writes it), else English. The grader sets
``COURSE_LANG`` from ``course grade --lang`` for itself and its sandboxes.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

LANGUAGES = ("en", "zh_CN")
LOCALE = Path(__file__).with_name("locale")
_SETTING = re.compile(r'^\[tool\.course\][^\[]*?^language\s*=\s*"([\w-]+)"', re.MULTILINE | re.DOTALL)


def normalise(name: str) -> str:
    """'zh', 'zh_CN', 'zh-CN' and 'zh-Hans' all mean 'zh_CN'; 'en' and '' mean English; anything else raises."""
    key = name.strip().replace("-", "_").lower()
    if key in ("", "en", "en_us", "en_gb", "c", "posix"):
        return "en"
    if key in ("zh", "zh_cn", "zh_hans", "zh_hans_cn"):
        return "zh_CN"
    raise ValueError(f"unknown language {name!r}: the course speaks {' and '.join(LANGUAGES)}")


@lru_cache(maxsize=4)
def _tree_language(pyproject: Path) -> str:
    try:
        found = _SETTING.search(pyproject.read_text(encoding="utf-8"))
    except OSError:
        return "en"
    return normalise(found[1]) if found else "en"


def language() -> str:
    """The current language: ``COURSE_LANG``, else the tree's pyproject.toml, else ``en``."""
    if os.environ.get("COURSE_LANG"):
        return normalise(os.environ["COURSE_LANG"])
    return _tree_language(Path(__file__).resolve().parents[2] / "pyproject.toml")


@lru_cache(maxsize=4)
def catalog(lang: str) -> dict[str, str]:
    """{English message: translation} of ``lang`` ({} for English, or when the file is missing)."""
    path = LOCALE / f"{lang}.json"
    if lang == "en" or not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _(message: str) -> str:
    """``message`` in the current language; the English itself where no translation exists."""
    if not message:
        return message
    return catalog(language()).get(message) or message


def N_(message: str) -> str:
    """Marks a message for extraction, untranslated (translate it with ``_`` where it is shown)."""
    return message


HIDDEN_CASE = N_("hidden case {number}")  # a hidden case's name: its number alone (grading/plan.py)
STATUSES = (N_("pass"), N_("fail"), N_("missing"), N_("error"), N_("warning"), N_("needs manual grading"))


def _pattern(template: str) -> re.Pattern[str]:
    """``"hidden case {number}"`` -> a regex whose groups are the fields, to read a name made from it."""
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)))


def check_name(name: str, templates: tuple[str, ...] = ()) -> str:
    """A check's name as a learner reads it, in the current language: a spec's case name (data: the English
    stays the key of the gradebook), or a name made from a template with fields (``HIDDEN_CASE`` and
    ``templates``), its fields kept."""
    if catalog(language()).get(name):
        return _(name)
    for template in (HIDDEN_CASE, *templates):
        found = _pattern(template).fullmatch(name)
        if found:
            return _(template).format(**found.groupdict())
    return name


class Said(str):
    """A message in the learner's language that keeps its English, ``english``: what a grade table keys a row by
    (a warning's), and what the instructor's log says. Made by ``said``."""

    english: str = ""


def said(template: str, **fields: object) -> Said:
    """``_(template).format(**fields)``, remembering ``template.format(**fields)`` as its ``english``."""
    out = Said(_(template).format(**fields) if fields else _(template))
    out.english = template.format(**fields) if fields else template
    return out
