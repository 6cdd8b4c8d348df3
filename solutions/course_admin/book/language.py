"""Sphinx extension: every page links to the same page in the other edition (editions.py builds both).

The English edition is ``_build/html/``, the Chinese one ``_build/html/zh/`` with the same page names; a page
``book/02_attention`` of the English links to ``zh/book/02_attention.html``, and back. The link is the first
thing in the page's article (``lang`` and ``hreflang`` set, so a screen reader reads it in its language),
and the page's head says where its translation is (``<link rel="alternate" hreflang>``). ``<html lang>``
is Sphinx's, from ``language``: ``en`` or ``zh-CN``. A Chinese page not yet translated (not in
catalogs.TRANSLATED) says so at its top, and its English content is marked ``lang="en"``. A phrase that a
page's code inserts into its prose is glued in each language (``glued_for``), and each edition shows its own.
"""
from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx

from . import catalogs

EDITIONS = {"en": ("zh", "zh-CN", "中文版"), "zh_CN": ("", "en", "English edition")}
SUBFOLDER = "zh"  # the Chinese edition's folder inside the English one


def other_edition(pagename: str, language: str) -> tuple[str, str, str]:
    """(relative URL of the same page in the other edition, its language tag, the link's text)."""
    depth = pagename.count("/")
    if language.startswith("zh"):
        return "../" * (depth + 1) + pagename + ".html", "en", EDITIONS["zh_CN"][2]
    return "../" * depth + f"{SUBFOLDER}/{pagename}.html", "zh-CN", EDITIONS["en"][2]


UNTRANSLATED = "本页尚未译成中文，下面是英文原文。"  # shown on a Chinese page whose catalog is not complete yet


def _switch(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if doctree is None or "body" not in context:
        return
    language = app.config.language or "en"
    href, tag, text = other_edition(pagename, language)
    link = (f'<p class="course-edition" style="text-align: right; margin: 0 0 0.5rem"><a href="{href}" '
            f'hreflang="{tag}" lang="{tag}" rel="alternate">{text}</a></p>\n')
    body = context["body"]
    if language.startswith("zh") and pagename.startswith("book/") and pagename not in catalogs.translated():
        body = f'<p class="course-untranslated"><em>{UNTRANSLATED}</em></p>\n<div lang="en">{body}</div>'
    context["body"] = link + body
    context["metatags"] = context.get("metatags", "") + f'\n<link rel="alternate" hreflang="{tag}" href="{href}" />'


def glued_for(name: str, language: str) -> str:
    """The glue name of ``name``'s value in ``language``: a page's code glues a phrase it inserts into prose
    twice, ``glue("verdict", "well below")`` and ``glue("verdict__zh_CN", "远低于", display=False)``; one
    execution serves both editions, and the Chinese one's ``{glue:text}`verdict``` shows the second."""
    return f"{name}__{language}"


_RENDERERS: dict[str, Any] = {}  # docname -> myst-nb's renderer of the page being read


def _glue_in_translations() -> None:
    """Let a translated paragraph's ``{glue:text}`` roles find the page's glued values. Sphinx parses each
    translation as a document of its own, which lacks myst-nb's renderer (where the glue data lives), so
    myst-nb would warn "No key ... found in glue data for this document". Its lookup is wrapped: a document
    with the renderer leaves it here under its page's name; one without (a translation) borrows its page's
    for the lookup. (This reaches into myst-nb 1.4's glue module; tests/book/test_editions.py shows it works.)"""
    from myst_nb.ext.glue import directives, roles, utils
    original = utils.retrieve_glue_data

    def in_language(document: Any, key: str) -> Any:
        """A value glued for this edition's language (``name__zh_CN``, see ``glued_for``) before the English."""
        env = getattr(document.settings, "env", None)
        language = getattr(getattr(env, "config", None), "language", None) or "en"
        if language != "en":
            try:
                return retrieve(document, glued_for(key, language))
            except utils.RetrievalError:
                pass
        return retrieve(document, key)

    def retrieve(document: Any, key: str) -> Any:
        env = getattr(document.settings, "env", None)
        if env is None or "nb_renderer" in document or env.docname not in _RENDERERS:
            if env is not None and "nb_renderer" in document:
                _RENDERERS[env.docname] = document["nb_renderer"]
            return original(document, key)
        document["nb_renderer"] = _RENDERERS[env.docname]  # only for this lookup: a doctree must stay picklable
        try:
            return original(document, key)
        finally:
            del document["nb_renderer"]
    roles.retrieve_glue_data = directives.retrieve_glue_data = in_language


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("html-page-context", _switch)
    _glue_in_translations()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
