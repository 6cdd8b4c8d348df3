"""Sphinx extension: two errors every page threw in the browser (found by solutions/tests/book/test_browser.py).

* sphinx-thebe's inline configuration script (``const THEBE_JS_URL = ...``) reached each page twice, and
  the second ``const`` threw "Identifier 'THEBE_JS_URL' has already been declared": a page keeps one copy
  of any inline script it would carry twice.
* Jupyter Book leaves the theme's ``default_mode`` (html_context) empty, and the theme's script logged "Got invalid theme
  mode" on every page: it is "auto", which is what the theme then fell back to anyway.
"""
from __future__ import annotations

from typing import Any


def _theme_mode(app: Any, config: Any) -> None:
    context = config.html_context  # the theme reads default_mode from the page context, not its options
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def _one_of_each_script(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body") if not isinstance(script, str) else None
        key = ("body", body) if body else ("file", str(script))
        if body and key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", _theme_mode)
    app.connect("html-page-context", _one_of_each_script, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
