"""`course release --learner-tree DIR`: write the learners' course folder, a product of its own.

It holds what learners receive from this repository (the stubs, the provided helpers, the exercises,
the public tests and reference outputs) and, in place of the instructor's README.md, pyproject.toml and
Makefile, the learner's own from solutions/learner/: a README that speaks to learners (set-up in two
commands, the chapter loop, the capstone's commands with their measured times, where to ask), a package
without the instructor's tools, and `make check`, `make submit`, `make lab`, `make test`; and an
``AGENTS.md``, in English and Chinese, that tells coding assistants to teach and not to write the exercises.

The README's placeholders are filled here: ``{book}`` (the book's address, ``--book-url``, or that the
instructor gives it), ``{chapter_table}`` (from the syllabus; titles link to their pages when the address is
known) and ``{capstone_runs}`` (capstone_times.py's record).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from course_lib.provided.layout import Layout
from course_lib.provided.syllabus import SYLLABUS

from . import capstone_times
from .stubs import ReleaseError

# What learners never receive: the instructor's material, the project's own CI, and the book's sources
# (the book executes the reference implementation; learners read the published book instead).
INSTRUCTOR_ONLY = ("solutions/", ".ci/", "nbgrader_config.py", "book/", "_config.yml", "_toc.yml")
# Files the learner's folder has in its own version (solutions/learner/<name>).
OWN_VERSION = ("README.md", "pyproject.toml", "Makefile", "AGENTS.md")  # AGENTS.md: the AI assistants' policy


def learner_files(root: Path) -> list[str]:
    """Paths (relative, sorted) that learners receive: git's files outside INSTRUCTOR_ONLY."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as err:
        raise ReleaseError(f"--learner-tree needs a git checkout at {root} ({err})") from err
    return sorted(p for p in listed if p and not p.startswith(INSTRUCTOR_ONLY) and (root / p).is_file())


def page_url(book_url: str, page: str) -> str:
    """The address of a chapter's page in the published book (Jupyter Book: book/<page>.html)."""
    return f"{book_url.rstrip('/')}/book/{page}.html"


def chapter_table(root: Path, book_url: str | None = None) -> str:
    """The chapters as the learner's README lists them: number, title (a link to its page when the book's
    address is known), what to implement, ready or coming."""
    layout = Layout(root)
    rows = ["| NN | chapter | you implement | status |", "|---|---|---|---|"]
    for c in SYLLABUS:
        title = f"[{c.title}]({page_url(book_url, c.page)})" if book_url and c.ready(layout) else c.title
        rows.append(f"| {c.number} | {title} | {c.implements} | {'**ready**' if c.ready(layout) else 'coming'} |")
    return "\n".join(rows)


def book_line(book_url: str | None) -> str:
    if book_url:
        return f"The book is at <{book_url}>; each chapter's page is linked in the table below."
    return "The book is online; your instructor gives you its address."


def own_version(root: Path, name: str, book_url: str | None = None) -> str:
    template = root / "solutions" / "learner" / name
    if not template.is_file():
        raise ReleaseError(f"--learner-tree: the learner's {name} is missing ({template})")
    text = template.read_text(encoding="utf-8")
    if name != "README.md":
        return text
    try:
        runs = capstone_times.readme_lines(capstone_times.load(template.with_name(capstone_times.RECORD.name)))
    except (FileNotFoundError, KeyError, ValueError) as err:
        raise ReleaseError(f"--learner-tree: {err}") from None
    return (text.replace("{book}", book_line(book_url)).replace("{chapter_table}", chapter_table(root, book_url))
            .replace("{capstone_runs}", runs))


def export_learner_tree(root: Path, dest: Path, book_url: str | None = None) -> list[str]:
    """Write the learner's course folder into the new folder ``dest``; return its files (relative)."""
    if dest.exists() and any(dest.iterdir()):
        raise ReleaseError(f"--learner-tree: {dest} exists and is not empty; give a new folder")
    own = {name: own_version(root, name, book_url) for name in OWN_VERSION}  # raises before anything is written
    files = [rel for rel in learner_files(root) if rel not in OWN_VERSION]
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    for name in OWN_VERSION:
        (dest / name).write_text(own[name], encoding="utf-8")
    return sorted(files + list(OWN_VERSION))
