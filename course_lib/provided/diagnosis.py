"""What a chapter's report says once every case of it is judged: messages that blame the right thing.

``judge`` (checking.py) explains one case from its own outputs. Three things need the whole report, and are
the same for `course check` (chapters.py) and for `course grade` (grading/diagnose.py):

* **Which chapter a case runs.** A failed case is headed "fix chapter NN first" only when its computation runs
  chapter NN's code: the chapters whose modules a probe executes (``traced``, a ``sys.setprofile`` hook that
  records the course modules whose functions are called, imports excluded). `course grade` traces the
  *reference* once, in its own process, when it prepares a chapter's expected values (learner code runs in a
  sandbox and is never traced); `course check` traces the learner's own code, in the learner's own process,
  only when an earlier chapter it uses fails (the reference is not there to trace, and the learner's code is
  what ran).
* **A diagnosis its own evidence rules out** (``ruled_out``): a known mistake M whose stored outputs would fail a
  case the same submission *passes* is not what the submission does; it is dropped from every failed case's
  message (the case is judged again without it: another name, or the plain message with the case's hint).
* **One mistake, many failures** (``explainers``): a failed case that names no mistake of its own, whose failure
  every mistake named on another failed case would also cause (their stored outputs fail it too), says
  "Explained by the mistake named in '<case>': fix that first." before what differs, instead of "values differ"
  alone. A case that names a mistake keeps its message (it names the one thing to fix itself), and an exception
  is never explained so: it says what it says.

``failing_mistakes`` gives, for one case, the known mistakes whose stored outputs fail it: the evidence of the
last two points, computed from the spec's own data (the grader stores it with the prepared chapter).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from torch import Tensor

from .cases import Case, Outputs
from .checking import judge
from .i18n import N_, _, check_name
from .layout import LAYOUT, chapter_facts

T = TypeVar("T")
EXPLAINED = N_("Explained by the mistake named in '{case}': fix that first.")


# ---------------------------------------------------------------- which chapters a probe runs
def module_owners(folder: Path | str) -> Callable[[str], str | None]:
    """A code object's file name -> the chapter whose module it is, for the chapter modules in ``folder`` (a
    package: course_lib, course_ref); None for any other file."""
    files = {}
    for number in LAYOUT.chapters():
        for module in chapter_facts(number).modules:
            files[os.path.normcase(os.path.realpath(Path(folder) / module))] = number
    cache: dict[str, str | None] = {}

    def owner(filename: str) -> str | None:
        if filename not in cache:
            cache[filename] = files.get(os.path.normcase(os.path.realpath(filename)))
        return cache[filename]
    return owner


def traced(call: Callable[[], T], owner: Callable[[str], str | None]) -> tuple[T, frozenset[str]]:
    """``call()``, and the chapters (``owner`` of each file) whose functions it called. Module bodies (an import
    running) are not counted: importing a module is not running its code. The profile hook in place before is
    put back, whatever ``call`` does."""
    seen: set[str] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name != "<module>":
            found = owner(frame.f_code.co_filename)
            if found:
                seen.add(found)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(previous)
    return result, frozenset(seen)


# ---------------------------------------------------------------- the evidence of a case
def failing_mistakes(chapter: str, case: Case, inputs: dict[str, Tensor], expected: Outputs,
                     mistakes: Mapping[str, Outputs]) -> frozenset[str]:
    """The known mistakes whose stored outputs on this case fail it (judged as a learner's outputs would be)."""
    return frozenset(name for name, wrong in mistakes.items()
                     if judge(chapter, case, wrong, inputs, expected, {}, {}).status != "pass")


@dataclass(frozen=True)
class Judged:
    """One judged case of a report, as the report-wide rules see it."""

    label: str                  # the name the report shows ("hidden case 3" for a hidden one)
    passed: bool
    names: tuple[str, ...]      # the known mistakes its message names
    explainable: bool           # failed on its outputs (not an exception, not stopped): a mistake may explain it
    fails: frozenset[str]       # the known mistakes whose stored outputs fail it (``failing_mistakes``)


def ruled_out(report: Sequence[Judged]) -> frozenset[str]:
    """The known mistakes some passed case of the report excludes: their stored outputs would fail it."""
    return frozenset().union(*(j.fails for j in report if j.passed))


def explainers(report: Sequence[Judged]) -> dict[int, int]:
    """{index of a failed case: index of the failed case whose named mistakes explain it} (module docstring).

    The case explained names no mistake of its own and failed on its outputs; the explaining one is the first
    failed case whose every named mistake would fail it too. A case that names a mistake keeps its own message:
    it already says the one thing to fix."""
    out: dict[int, int] = {}
    for i, j in enumerate(report):
        if j.passed or j.names or not j.explainable:
            continue
        k = next((k for k, a in enumerate(report) if not a.passed and a.names and set(a.names) <= j.fails), None)
        if k is not None:
            out[i] = k
    return out


def explained(message: str, label: str) -> str:
    """``message`` of a case explained by the mistake named in case ``label``: that line first, then what differs,
    in the learner's language (the case's name too, as the report shows it: i18n.check_name)."""
    line = _(EXPLAINED).format(case=check_name(label))
    return f"{line} [{message}]" if message else line
