"""What `course submit` says before it packs: who you are, your public score, and what looks unfinished.

    learner_id(flag, root)        your id: --learner, else $COURSE_LEARNER, else the one saved in
                                  .course-learner, else asked once (and saved there)
    public_score(number)          the chapter's public checks on your course_lib: (earned, possible, failed)
    warnings(number, notebook)    stubs still raising NotImplementedError, written answers still empty
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from .layout import LAYOUT, modules_for
from .i18n import _

LEARNER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
ID_FILE = ".course-learner"
# nbgrader's placeholder for a written answer: its own (the English notebooks) and the Chinese edition's
PLACEHOLDERS = ("YOUR ANSWER HERE", "在此作答")
# the placeholder of each edition's written answers: nbgrader's ClearSolutions.text_stub (course release, nbgrader_config.py)
ANSWER_PLACEHOLDER = {"en": PLACEHOLDERS[0], "zh_CN": PLACEHOLDERS[1]}
PLACEHOLDER = PLACEHOLDERS[0]
# the hint a stub raises, in English or in Chinese (a tree released with --lang zh_CN): the function it names
STUB_MARK = re.compile(r"raise NotImplementedError\(\"(?:Chapter \d\d: implement (\S+)|第 \d\d 章：请在 \S+ 中实现 (\S+)（)")


class PreflightError(Exception):
    """Something the learner must fix before submitting; the message says how."""


def _valid(learner: str, source: str) -> str:
    learner = learner.strip()
    if not LEARNER_RE.fullmatch(learner):
        raise PreflightError(_("learner id {learner} ({source}): use letters, digits and . _ @ + - (at most 64), as "
                               "your instructor knows you").format(learner=repr(learner), source=source))
    return learner


def learner_id(flag: str | None, root: Path = LAYOUT.root, ask: bool | None = None) -> tuple[str, str]:
    """(your learner id, where it came from). A new id given by flag or typed in is saved for next time."""
    saved = root / ID_FILE
    if flag:
        learner = _valid(flag, "--learner")
        saved.write_text(learner + "\n", encoding="utf-8")
        return learner, _("--learner, saved in {file}").format(file=ID_FILE)
    if os.environ.get("COURSE_LEARNER"):
        return _valid(os.environ["COURSE_LEARNER"], "$COURSE_LEARNER"), "$COURSE_LEARNER"
    if saved.is_file():
        return _valid(saved.read_text(encoding="utf-8"), ID_FILE), _("saved in {file}").format(file=ID_FILE)
    if ask if ask is not None else sys.stdin.isatty():
        learner = _valid(input(_("Your learner id, as your instructor knows you (e.g. alice): ")), _("typed in"))
        saved.write_text(learner + "\n", encoding="utf-8")
        return learner, _("typed in, saved in {file}").format(file=ID_FILE)
    raise PreflightError(_("who is submitting? Say it once with `make submit CH=NN LEARNER=<your id>` (or `course "
                           "submit chNN --learner <your id>`); it is remembered in {file}").format(file=ID_FILE))


def public_score(number: str) -> tuple[float, float, int]:
    """(points earned, points possible, checks failed) of the chapter's public checks on your code."""
    from . import chapters
    from .checking import total
    from .loader import load_impl

    results, _failing = chapters.run_with_prerequisites(number, load_impl("learner"))
    earned, possible = total(results)
    return earned, possible, sum(r.status != "pass" for r in results)


def unfinished_stubs(number: str, root: Path = LAYOUT.root) -> list[str]:
    """'course_lib/attention.py: scaled_dot_product_attention' for each function still left as a stub."""
    found = []
    for module in modules_for(number):
        path = root / "course_lib" / module
        if path.is_file():
            found += [f"course_lib/{module}: {english or chinese}"
                      for english, chinese in STUB_MARK.findall(path.read_text(encoding="utf-8"))]
    return found


def empty_answers(notebook: Path) -> tuple[int, str]:
    """(how many cells of the notebook still hold a placeholder of PLACEHOLDERS instead of your answer, the
    placeholder the first of them holds, or the English one when none does)."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return 0, PLACEHOLDER
    found = []
    for cell in cells:
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        text = "".join(source) if isinstance(source, list) else str(source)
        found += [next(p for p in PLACEHOLDERS if p in text)] if any(p in text for p in PLACEHOLDERS) else []
    return len(found), (found[0] if found else PLACEHOLDER)


def warnings(number: str, notebook: Path | None, root: Path = LAYOUT.root) -> list[str]:
    out = [_("{stub} is still the stub (raises NotImplementedError)").format(stub=stub)
           for stub in unfinished_stubs(number, root)]
    if notebook is not None and (empty := empty_answers(notebook))[0]:
        out.append(_("{notebook}: {count} written answer(s) still read \"{placeholder}\"").format(
            notebook=notebook.name, count=empty[0], placeholder=empty[1]))
    return out
