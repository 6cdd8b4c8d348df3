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
                         with nbgitpuller and opens it; a tag's pages open the tag's notebooks (<tag>/ on that
                         branch), the Chinese edition's its own (zh/)

A chapter's page also gets, when the site's base URL (``html: baseurl``) is set too, as the publishing workflow
sets both (course_admin/publish/bookconfig.py), the same three buttons for its **exercise**:

  _launch/exercises/chNN_<name>.ipynb   the exercise notebook as released (exercises/, or exercises_zh_CN/ in the
                         Chinese edition), after a first cell that puts the learners' course folder on the learner's
                         Drive (Colab) or in their home folder (Binder, a JupyterHub), unpacked the first time from
                         the zip the workflow publishes beside the site (``ARTIFACT``: the learner tree, never
                         solutions/; course_admin/publish/learner.py), makes its course_lib importable and runs
                         ``hosted.ready(NN)`` (course_lib/provided/hosted.py: the chapter's checks; ``hosted.submit``
                         hands in). The exercise notebooks stay as `course release` writes them: the cell is added
                         here, on the copy the site publishes.

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


def version_prefix(config: Any) -> str:
    """Where this version sits on the site branch: main at its root, a tag (``course_source_branch``) in its folder;
    the Chinese edition under zh/ there (course_admin/publish/site.py)."""
    ref = (config.course_source_branch or "main").strip()
    zh = (getattr(config, "language", None) or "en") not in ("en", "")
    return ("" if ref == "main" else f"{ref}/") + ("zh/" if zh else "")


def links_to(url: str, branch: str, hub: str, path: str) -> list[dict[str, str]]:
    """Colab, Binder and (with a hub) JupyterHub links that open the notebook at ``path`` of ``branch`` of the
    repository at ``url`` (theme's button format)."""
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
    hub = (hub or "").strip().rstrip("/")
    if hub:
        folder = (repo or url.rsplit("/", 1)[-1]).removesuffix(".git")
        query = urlencode({"repo": url, "branch": branch, "urlpath": f"lab/tree/{folder}/{path}"}, safe="/")
        links.append({"type": "link", "text": "JupyterHub", "tooltip": "Launch on JupyterHub",
                      "label": "launch-jupyterhub", "icon": "_static/images/logo_jupyterhub.svg",
                      "url": f"{hub}/hub/user-redirect/git-pull?{query}"})
    return links


def launch_links(config: Any, pagename: str) -> list[dict[str, str]]:
    """The header buttons of one page (theme's format), [] when no repository is configured."""
    url = (config.course_repository_url or "").strip().rstrip("/")
    if not url:
        return []
    path = f"{version_prefix(config)}_launch/{Path(pagename).name}.ipynb"
    return links_to(url, config.course_launch_branch, config.course_jupyterhub_url, path)


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


# The learners' course folder as the publishing workflow puts it beside the site (course_admin/publish/learner.py
# writes it there; solutions/tests/publish/test_learner.py holds the two names together), and the folder a launched
# exercise unpacks it into.
ARTIFACT = "learner/transformers-from-scratch-learner{suffix}.zip"
FOLDER = "transformers-from-scratch"
EXERCISE_INSTALL = {"en": (
    "Run this cell first, in every new session: it sets up your course folder (the first time only, from the\n"
    "# course's published copy: never over your work) and runs the chapter's checks on your code",
    "Colab: the folder lives on your Google Drive, so your work survives a disconnect",
    "Binder, a JupyterHub: your home folder",
    "course_lib importable in this runtime, as `pip install -e` would make it"),
    "zh_CN": (
    "每次新开会话时先运行这个单元：它准备好你的课程文件夹（只在第一次从课程发布的副本解压，\n"
    "# 绝不覆盖你的成果），然后对你的代码运行本章的检查",
    "Colab：文件夹放在你的 Google 云端硬盘上，断开连接后你的成果仍在",
    "Binder、JupyterHub：放在你的主目录",
    "让本运行环境能导入 course_lib，效果同 `pip install -e`")}
EXERCISE_CELL = '''# {head}
import os, site, sysconfig, urllib.request, zipfile
ARTIFACT = {artifact}
try:  # {colab}
    from google.colab import drive
    drive.mount("/content/drive")
    HOME = "/content/drive/MyDrive"
except ImportError:  # {home}
    HOME = os.path.expanduser("~")
COURSE = os.path.join(HOME, {folder})
if not os.path.isfile(os.path.join(COURSE, "pyproject.toml")):
    with zipfile.ZipFile(urllib.request.urlretrieve(ARTIFACT)[0]) as archive:
        archive.extractall(COURSE)
PACKAGES = sysconfig.get_paths()["purelib"]  # {installed}
if not os.access(PACKAGES, os.W_OK):
    PACKAGES = site.getusersitepackages()
    os.makedirs(PACKAGES, exist_ok=True)
with open(os.path.join(PACKAGES, "transformers-from-scratch-learner.pth"), "w") as pth:
    pth.write(COURSE + "\\n")
site.addsitedir(PACKAGES)
os.chdir(COURSE)
from course_lib.provided import hosted
hosted.ready({number})'''


def version_base(config: Any) -> str:
    """This version's base URL on the site, where the workflow publishes learner/ and pdf/: the edition's
    ``html_baseurl`` less the Chinese edition's ``zh/`` (course_admin/book/editions.py bases that edition there)."""
    base = (config.html_baseurl or "").strip().rstrip("/")
    zh = (getattr(config, "language", None) or "en") not in ("en", "")
    return (base.removesuffix("/zh") if zh else base) + "/"


def artifact_url(base_url: str, lang: str = "en") -> str:
    """Where the learners' course folder of ``lang`` is published, beside the site at ``base_url`` (this version's)."""
    return f"{base_url.rstrip('/')}/{ARTIFACT.format(suffix='' if lang == 'en' else f'-{lang}')}"


def exercise_notebook(notebook: dict, artifact: str, number: str, lang: str = "en") -> dict:
    """A chapter's exercise notebook as launched: the cell that sets up the course folder from ``artifact`` (a URL;
    ``file:`` works too) first, the notebook as released after it."""
    head, colab, home, installed = EXERCISE_INSTALL[lang]
    source = EXERCISE_CELL.format(head=head, artifact=json.dumps(artifact), colab=colab, home=home,
                                  folder=json.dumps(FOLDER), installed=installed, number=json.dumps(number))
    nb = copy.deepcopy(notebook)
    nb["cells"] = [{"cell_type": "code", "execution_count": None, "id": "launch-setup",
                    "metadata": {"tags": ["launch-setup"]}, "outputs": [], "source": source}] + nb["cells"]
    return nb


def exercise_of(pagename: str, lang: str) -> tuple[str, Path] | None:
    """(chapter number, its released exercise notebook in ``lang``) of a chapter's page; None for another page."""
    try:
        from course_lib.provided.layout import LAYOUT
        from course_lib.provided.syllabus import SYLLABUS
    except ImportError:
        return None
    for chapter in SYLLABUS:
        name = LAYOUT.exercise_name(chapter.number) if chapter.page == Path(pagename).name else None
        if name:
            folder = LAYOUT.root / ("exercises" if lang == "en" else f"exercises_{lang}")
            return (chapter.number, folder / name / f"{name}.ipynb") if (folder / name).is_dir() else None
    return None


def exercise_links(config: Any, pagename: str) -> tuple[list[dict[str, str]], dict | None, str]:
    """The buttons that open a chapter page's exercise, its launch notebook and that notebook's file name; ([], None,
    "") without a repository, a base URL (where the course folder is published) or an exercise."""
    url = (config.course_repository_url or "").strip().rstrip("/")
    lang = "en" if (getattr(config, "language", None) or "en") == "en" else "zh_CN"
    found = exercise_of(pagename, lang) if url and (config.html_baseurl or "").strip() else None
    if found is None or not found[1].is_file():
        return [], None, ""
    number, released = found
    notebook = exercise_notebook(json.loads(released.read_text(encoding="utf-8")),
                                 artifact_url(version_base(config), lang), number, lang)
    path = f"{version_prefix(config)}_launch/exercises/{released.name}"
    return links_to(url, config.course_launch_branch, config.course_jupyterhub_url, path), notebook, released.name


def _on_exercise(app: Any, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    links, notebook, name = exercise_links(app.config, pagename)
    if not links or notebook is None:
        return
    target = Path(app.outdir) / "_launch" / "exercises" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    zh = (getattr(app.config, "language", None) or "en") != "en"
    buttons = [dict(link, text=f"{link['text']}: {'练习' if zh else 'exercise'}", label=f"{link['label']}-exercise")
               for link in links]
    context.setdefault("header_buttons", []).append(
        {"type": "group", "tooltip": "在线打开本章的练习" if zh else "Open this chapter's exercise notebook",
         "icon": "fas fa-pen-to-square", "buttons": buttons, "label": "launch-exercise"})


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
    app.connect("html-page-context", _on_exercise, priority=503)
    app.connect("config-inited", _theme_mode)
    app.connect("html-page-context", _one_of_each_script, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
