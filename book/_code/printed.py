"""What the course says to a learner, shown on a page in both editions' languages from one execution.

The course speaks to learners in English or in Chinese (course_lib/provided/i18n.py reads ``COURSE_LANG``
each time it translates). A page that shows what a learner sees (the grading appendix's reports) cannot
print it once: the page runs once for both editions. ``in_each_language(report)`` runs ``report`` once per
language, captures what it prints, and displays both in one output: the English as ``text/plain``, the
Chinese as ``MIME["zh_CN"]``; each edition's build picks its own (solutions/course_admin/book/figures.py renders
the Chinese in the Chinese build, as it does a figure's Chinese drawing).

    in_each_language(lambda: print(table(chapters.run_chapter("02", ref))))
"""
from __future__ import annotations

import contextlib
import io
import os
from typing import Any, Callable
from unittest import mock

MIME = {"zh_CN": "text/x.course-zh-cn+plain"}  # the Chinese text's type in the output's bundle


def said_in(language: str, report: Callable[[], Any]) -> str:
    """What ``report`` prints with the course speaking ``language`` (``COURSE_LANG`` restored after)."""
    out = io.StringIO()
    with mock.patch.dict(os.environ, {"COURSE_LANG": language}), contextlib.redirect_stdout(out):
        report()
    return out.getvalue()


def in_each_language(report: Callable[[], Any]) -> None:
    """Display what ``report`` prints, in English and in each other edition's language."""
    from IPython.display import display
    bundle = {"text/plain": said_in("en", report), **{mime: said_in(lang, report) for lang, mime in MIME.items()}}
    display(bundle, raw=True)
