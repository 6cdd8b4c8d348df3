"""`course release --learner-tree DIR`: write the learners' course folder, a product of its own.

It holds what learners receive from this repository (the stubs, the provided helpers, the exercises,
the public tests and reference outputs) and, in place of the instructor's README.md, pyproject.toml and
Makefile, the learner's own from solutions/learner/: a README that speaks to learners (set-up in two
commands, the chapter loop, the capstone's commands with their measured times, where to ask; in another language,
its translation, the exercise notebooks of that language's edition, exercises_<lang>/, and the stubs with their
docstrings and messages in that language, stub_i18n.py), a package
without the instructor's tools, and `make check`, `make submit`, `make lab`, `make test`; and an
``AGENTS.md``, in English and Chinese, that tells coding assistants to teach and not to write the exercises.

The README's placeholders are filled here: ``{book}`` (the book's address, ``--book-url``, or that the
instructor gives it), ``{chapter_table}`` (from the syllabus; titles link to their pages when the address is
known, and each exercise has its Colab, Binder and JupyterHub links when _config.yml names the repository too, as
the publishing workflow sets it: the book's exercise buttons, book/launch_buttons.py) and ``{capstone_runs}`` (capstone_times.py's record).
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

from course_lib.provided import i18n
from course_lib.provided.layout import Layout
from course_lib.provided.syllabus import SYLLABUS

from ..book import launch_buttons
from . import capstone_times, stub_i18n
from .stubs import ReleaseError, make_stub

# What learners never receive: the instructor's material, the project's own CI, and the book's sources
# (the book executes the reference implementation; learners read the published book instead).
INSTRUCTOR_ONLY = ("solutions/", ".ci/", ".github/", "nbgrader_config.py", "book/", "_config.yml", "_toc.yml",
                   "exercises_")  # exercises_<lang>/: a tree in that language has them as its exercises/
# Files the learner's folder has in its own version (solutions/learner/<name>).
OWN_VERSION = ("README.md", "pyproject.toml", "Makefile", "AGENTS.md")  # AGENTS.md: the AI assistants' policy
# What `--lang` adds to the learner's pyproject.toml: the language i18n.py reads.
LANGUAGE_SETTING = ("\n[tool.course]\n# the language of what `course check`, check() and `make submit` say "
                    "(course_lib/provided/i18n.py; COURSE_LANG overrides it)\nlanguage = \"{lang}\"\n")
TABLE_WORDS = {"en": ("chapter", "you implement", "status", "**ready**", "coming", "open the exercise"),
               "zh_CN": ("章", "你要实现的内容", "状态", "**已就绪**", "即将推出", "在线打开练习")}


def learner_files(root: Path) -> list[str]:
    """Paths (relative, sorted) that learners receive: git's files outside INSTRUCTOR_ONLY."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as err:
        raise ReleaseError(f"--learner-tree needs a git checkout at {root} ({err})") from err
    return sorted(p for p in listed if p and not p.startswith(INSTRUCTOR_ONLY) and (root / p).is_file())


def page_url(book_url: str, page: str, lang: str = "en") -> str:
    """The address of a chapter's page in the published book (Jupyter Book: book/<page>.html; the Chinese
    edition's under zh/)."""
    return f"{book_url.rstrip('/')}/{'zh/' if lang != 'en' else ''}book/{page}.html"


def launch_settings(root: Path, lang: str = "en") -> SimpleNamespace | None:
    """The book's launch settings in ``root``/_config.yml (the publishing workflow sets them: publish/bookconfig.py),
    as launch_buttons reads them; None while the repository's URL is empty (the offline book, links nowhere)."""
    import yaml

    path = root / "_config.yml"
    config = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}
    sphinx = (config.get("sphinx") or {}).get("config") or {}
    if not (sphinx.get("course_repository_url") or "").strip():
        return None
    return SimpleNamespace(course_repository_url=sphinx["course_repository_url"].strip().rstrip("/"),
                           course_launch_branch=sphinx.get("course_launch_branch") or "gh-pages",
                           course_source_branch=sphinx.get("course_source_branch") or "main",
                           course_jupyterhub_url=sphinx.get("course_jupyterhub_url") or "", language=lang)


def exercise_launch(settings: SimpleNamespace, name: str) -> str:
    """The links that open exercise ``name`` (Colab, Binder, a JupyterHub), as the chapter's page has them."""
    path = f"{launch_buttons.version_prefix(settings)}_launch/exercises/{name}.ipynb"
    links = launch_buttons.links_to(settings.course_repository_url, settings.course_launch_branch,
                                    settings.course_jupyterhub_url, path)
    return " · ".join(f"[{link['text']}]({link['url']})" for link in links)


def chapter_table(root: Path, book_url: str | None = None, lang: str = "en") -> str:
    """The chapters as the learner's README lists them: number, title (a link to its page when the book's
    address is known; in Chinese, to the Chinese edition's), what to implement, ready or coming; with the book's
    address and its repository (_config.yml: ``launch_settings``), the links that open each exercise."""
    layout = Layout(root)
    words = TABLE_WORDS[lang]
    launch = launch_settings(root, lang) if book_url else None
    more = (f" {words[5]} |", "---|") if launch else ("", "")
    rows = [f"| NN | {words[0]} | {words[1]} | {words[2]} |{more[0]}", f"|---|---|---|---|{more[1]}"]
    for c in SYLLABUS:
        name = i18n.catalog(lang).get(c.title, c.title)
        title = f"[{name}]({page_url(book_url, c.page, lang)})" if book_url and c.ready(layout) else name
        row = f"| {c.number} | {title} | {c.implements} | {words[3] if c.ready(layout) else words[4]} |"
        exercise = layout.exercise_name(c.number)
        if launch:
            row += f" {exercise_launch(launch, exercise) if exercise and c.ready(layout) else ''} |"
        rows.append(row)
    return "\n".join(rows)


def book_line(book_url: str | None, lang: str = "en") -> str:
    """The README's line on where the book is: its site and, beside it (publish.yml's pdf/), the edition's PDF."""
    if lang != "en":
        return (f"本书的中文版在 <{book_url.rstrip('/')}/zh/>；下表链接了每一章的页面。离线阅读可下载"
                f"[全书的 PDF]({book_url.rstrip('/')}/pdf/transformers-from-scratch-zh_CN.pdf)。" if book_url
                else "本书在网上发布；网址由你的教师提供。")
    if book_url:
        return (f"The book is at <{book_url}>; each chapter's page is linked in the table below. To read it offline: "
                f"[the whole book as a PDF]({book_url.rstrip('/')}/pdf/transformers-from-scratch.pdf).")
    return "The book is online; your instructor gives you its address."


def translated_from(english: str) -> str:
    """The first line a translated template starts with: the English it was made from, by its digest, so that an
    English edit without its translation is caught (solutions/tests/release/test_learner_tree_zh.py)."""
    return f"<!-- translated from README.md {hashlib.sha256(english.encode()).hexdigest()[:16]} -->"


def template_of(root: Path, name: str, lang: str = "en") -> Path:
    """solutions/learner/<name>, or its translation <stem>.<lang><suffix> (README.zh_CN.md)."""
    folder = root / "solutions" / "learner"
    return folder / (name if lang == "en" or name != "README.md" else f"{Path(name).stem}.{lang}{Path(name).suffix}")


def own_version(root: Path, name: str, book_url: str | None = None, lang: str = "en") -> str:
    template = template_of(root, name, lang)
    if not template.is_file():
        raise ReleaseError(f"--learner-tree: the learner's {name} is missing ({template})")
    text = template.read_text(encoding="utf-8")
    if name == "pyproject.toml" and lang != "en":
        return text + LANGUAGE_SETTING.format(lang=lang)
    if name != "README.md":
        return text
    if lang != "en":
        first, _, text = text.partition("\n")
        english = (template.with_name(name)).read_text(encoding="utf-8")
        if first.strip() != translated_from(english):
            raise ReleaseError(f"--learner-tree --lang {lang}: {template.name} was translated from another README.md "
                               f"than the current one: translate the change, then make its first line "
                               f"{translated_from(english)}")
    try:
        runs = capstone_times.readme_lines(capstone_times.load(template.with_name(capstone_times.RECORD.name)), lang)
    except (FileNotFoundError, KeyError, ValueError) as err:
        raise ReleaseError(f"--learner-tree: {err}") from None
    return (text.replace("{book}", book_line(book_url, lang)).replace("{chapter_table}", chapter_table(root, book_url, lang))
            .replace("{capstone_runs}", runs))


def _sources(root: Path, files: list[str], lang: str) -> dict[str, Path]:
    """{path in the learner tree: the file it is copied from}: in another language than English, the exercise
    folders come from that language's edition (exercises_<lang>/, written by `course release`), and a README.md
    with a README.<lang>.md beside it (the capstone's) from that translation."""
    if lang == "en":
        return {rel: root / rel for rel in files}
    sources = {rel: root / rel for rel in files if not rel.startswith("exercises/")}
    sources.update({rel: path.with_name(f"README.{lang}.md") for rel, path in sources.items()  # the capstone's README
                    if path.name == "README.md" and path.with_name(f"README.{lang}.md").is_file()})
    for folder in sorted({rel.split("/")[1] for rel in files if rel.startswith("exercises/") and rel.count("/") > 1}):
        edition = root / f"exercises_{lang}" / folder
        if not edition.is_dir():
            raise ReleaseError(f"--learner-tree --lang {lang}: exercises/{folder} has no {lang} edition ({edition}): "
                               "translate its notebook (python -m course_admin.release.notebook_i18n), then run "
                               "`course release`")
        sources.update({f"exercises/{folder}/{p.relative_to(edition).as_posix()}": p
                        for p in sorted(edition.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
                        and ".ipynb_checkpoints" not in p.parts})
    return sources


def translated_stubs(root: Path, lang: str) -> dict[str, str]:
    """{course_lib/<module>.py: its stub in ``lang``}, made from the same solution modules as the English stubs
    (stub_i18n.py), and the package's docstring; nothing in English. Raises ReleaseError when a text has no
    translation."""
    if lang == "en":
        return {}
    layout = Layout(root)
    stubs = {f"course_lib/{solution.name}": make_stub(layout, solution, lang) for solution in layout.reference_modules()}
    tr, missing = stub_i18n.translator(layout, lang)
    package = stub_i18n.localise((root / stub_i18n.PACKAGE).read_text(encoding="utf-8"), stub_i18n.PACKAGE, tr)
    if missing:
        raise ReleaseError(f"--learner-tree --lang {lang}: {stub_i18n.PACKAGE} has no translation of "
                           f"{missing[0][:60]!r} in {layout.rel(stub_i18n.catalog_path(layout, lang))}")
    return {**stubs, stub_i18n.PACKAGE: package}


def export_learner_tree(root: Path, dest: Path, book_url: str | None = None, lang: str = "en") -> list[str]:
    """Write the learner's course folder into the new folder ``dest``, in ``lang`` (its README, its exercise
    notebooks, its stubs' docstrings and messages, and the language of what the course says to the learner:
    pyproject's ``[tool.course] language``); return its files."""
    if dest.exists() and any(dest.iterdir()):
        raise ReleaseError(f"--learner-tree: {dest} exists and is not empty; give a new folder")
    own = {name: own_version(root, name, book_url, lang) for name in OWN_VERSION}  # raises before anything is written
    own.update(translated_stubs(root, lang))
    sources = _sources(root, [rel for rel in learner_files(root) if rel not in OWN_VERSION], lang)
    for rel, path in sources.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    for name, text in own.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        with open(dest / name, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return sorted(set(sources) | set(own))
