"""Sphinx extension: every page links to the same page in the other edition (editions.py builds both).

The English edition is ``_build/html/``, the Chinese one ``_build/html/zh/`` with the same page names; a page
``book/02_attention`` of the English links to ``zh/book/02_attention.html``, and back. The link is the first
thing in the page's article (``lang`` and ``hreflang`` set, so a screen reader reads it in its language),
and the page's head says where its translation is (``<link rel="alternate" hreflang>``). ``<html lang>``
is Sphinx's, from ``language``: ``en`` or ``zh-CN``.
"""
from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

EDITIONS = {"en": ("zh", "zh-CN", "中文版"), "zh_CN": ("", "en", "English edition")}
SUBFOLDER = "zh"  # the Chinese edition's folder inside the English one


def other_edition(pagename: str, language: str) -> tuple[str, str, str]:
    """(relative URL of the same page in the other edition, its language tag, the link's text)."""
    depth = pagename.count("/")
    if language.startswith("zh"):
        return "../" * (depth + 1) + pagename + ".html", "en", EDITIONS["zh_CN"][2]
    return "../" * depth + f"{SUBFOLDER}/{pagename}.html", "zh-CN", EDITIONS["en"][2]


def _switch(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if doctree is None or "body" not in context:
        return
    href, tag, text = other_edition(pagename, app.config.language or "en")
    link = (f'<p class="course-edition" style="text-align: right; margin: 0 0 0.5rem"><a href="{href}" hreflang="{tag}" lang="{tag}" rel="alternate">'
            f"{text}</a></p>\n")
    context["body"] = link + context["body"]
    context["metatags"] = context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{tag}" href="{href}" />'


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("html-page-context", _switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
