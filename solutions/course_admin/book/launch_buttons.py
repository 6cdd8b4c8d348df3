"""Sphinx extension: launch buttons (Colab, Binder, a JupyterHub through nbgitpuller) on every page that
is a notebook, from ONE setting, the course's repository URL (``course_repository_url`` in _config.yml's
``sphinx: config:``). Empty, the default: no button and no launch notebook, so the offline book stays
offline and links nowhere.

Given a repository (say https://github.com/ORG/REPO), each executed page gets, beside the book:

  _launch/<page>.ipynb   the page's notebook, outputs cleared, with a first cell that installs the course
                         in the runtime that opens it (clones the repository, ``pip install -e``, puts it on
                         sys.path, and works from its book/ folder as the build does); a page of
                         ``course_gpu_pages`` (the capstone) asks Colab for a GPU runtime in its metadata
  buttons                Colab and Binder open that notebook from the branch the book is published to
                         (``course_launch_branch``, gh-pages: where `ghp-import -n -p -f _build/html`
                         puts it); JupyterHub, only with ``course_jupyterhub_url``, pulls that branch
                         with nbgitpuller and opens it

Colab opens notebooks from GitHub only: for another host, Binder and the hub remain.

Two fixes to what every page carries, found by solutions/tests/book/test_browser.py (the page's scripts, as the
buttons are): sphinx-thebe's inline configuration script (``const THEBE_JS_URL = ...``) reached each page twice,
and the second ``const`` threw "Identifier 'THEBE_JS_URL' has already been declared", so a page keeps one copy of
any inline script it would carry twice; and Jupyter Book leaves the theme's ``default_mode`` (html_context) empty,
so the theme's script logged "Got invalid theme mode" on every page: it is "auto", what the theme fell back to.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

CLONE = "transformers-from-scratch"
MARK = "course sources digest"  # course_sources.py's hidden cell: nothing to launch
INSTALL = '''# Opened from the book's launch button: install the course into this runtime first (once).
import os, subprocess, sys
COURSE = {clone!r}
if not os.path.isdir(COURSE):
    subprocess.run(["git", "clone", "--depth", "1", "--branch", {branch!r}, {url!r}, COURSE], check=True)
subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-e", COURSE], check=True)
sys.path[:0] = [os.path.abspath(COURSE), os.path.abspath(os.path.join(COURSE, "solutions"))]
os.chdir(os.path.join(COURSE, "book"))'''


def _default_gpu_pages() -> list[str]:
    """The capstone's page (a chapter whose title starts with "Capstone"), as a Sphinx docname."""
    try:
        from course_lib.provided.syllabus import SYLLABUS
    except ImportError:
        return []
    return [f"book/{c.page}" for c in SYLLABUS if c.title.lower().startswith("capstone")]


def repo_parts(url: str) -> tuple[str | None, str | None]:
    """(org, repo) of a GitHub URL; (None, None) for another host."""
    url = url.strip().rstrip("/").removesuffix(".git")
    if "github.com/" not in url:
        return None, None
    parts = url.split("github.com/", 1)[1].split("/")
    return (parts[0], parts[1]) if len(parts) >= 2 and parts[0] and parts[1] else (None, None)


def launch_links(config: Any, pagename: str) -> list[dict[str, str]]:
    """The header buttons of one page (theme's format), [] when no repository is configured."""
    url = (config.course_repository_url or "").strip().rstrip("/")
    if not url:
        return []
    branch = config.course_launch_branch
    path = f"_launch/{Path(pagename).name}.ipynb"
    org, repo = repo_parts(url)
    links = []
    if org:
        links.append({"type": "link", "text": "Colab", "tooltip": "Launch on Colab", "label": "launch-colab",
                      "icon": "_static/images/logo_colab.png",
                      "url": f"https://colab.research.google.com/github/{org}/{repo}/blob/{branch}/{path}"})
        binder = f"https://mybinder.org/v2/gh/{org}/{repo}/{branch}"
    else:
        binder = f"https://mybinder.org/v2/git/{quote(url, safe='')}/{branch}"
    links.append({"type": "link", "text": "Binder", "tooltip": "Launch on Binder", "label": "launch-binder",
                  "icon": "_static/images/logo_binder.svg", "url": f"{binder}?urlpath=lab/tree/{path}"})
    hub = (config.course_jupyterhub_url or "").strip().rstrip("/")
    if hub:
        folder = (repo or url.rsplit("/", 1)[-1]).removesuffix(".git")
        query = urlencode({"repo": url, "branch": branch, "urlpath": f"lab/tree/{folder}/{path}"}, safe="/")
        links.append({"type": "link", "text": "JupyterHub", "tooltip": "Launch on JupyterHub",
                      "label": "launch-jupyterhub", "icon": "_static/images/logo_jupyterhub.svg",
                      "url": f"{hub}/hub/user-redirect/git-pull?{query}"})
    return links


def launch_notebook(notebook: dict, config: Any, pagename: str) -> dict:
    """The page's notebook as launched: outputs cleared, the digest cell gone, the install cell first."""
    nb = copy.deepcopy(notebook)
    cells = [c for c in nb.get("cells", []) if MARK not in "".join(c.get("source", ""))]
    for cell in cells:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    install = INSTALL.format(clone=CLONE, branch=config.course_source_branch,
                             url=config.course_repository_url.strip().rstrip("/"))
    first = {"cell_type": "code", "execution_count": None, "id": "install-course",
             "metadata": {"tags": ["launch-install"]}, "outputs": [], "source": install}
    nb["cells"] = [first] + cells
    if pagename in config.course_gpu_pages:
        nb.setdefault("metadata", {})["accelerator"] = "GPU"
        nb["metadata"]["colab"] = {"gpuType": "T4", "provenance": []}
    return nb


def _on_page(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    links = launch_links(app.config, pagename)
    if not links or "kernelspec" not in app.env.metadata.get(pagename, {}):
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    target = Path(app.outdir) / "_launch" / f"{Path(pagename).name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(launch_notebook(notebook, app.config, pagename), indent=1, ensure_ascii=False)
                      + "\n", encoding="utf-8")
    context.setdefault("header_buttons", []).append(
        {"type": "group", "tooltip": "Launch this page as a notebook", "icon": "fas fa-rocket",
         "buttons": links, "label": "launch-buttons"})


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
    app.add_config_value("course_repository_url", "", "html")
    app.add_config_value("course_launch_branch", "gh-pages", "html")
    app.add_config_value("course_source_branch", "main", "html")
    app.add_config_value("course_jupyterhub_url", "", "html")
    app.add_config_value("course_gpu_pages", _default_gpu_pages(), "html")
    app.connect("html-page-context", _on_page, priority=502)
    app.connect("config-inited", _theme_mode)
    app.connect("html-page-context", _one_of_each_script, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
