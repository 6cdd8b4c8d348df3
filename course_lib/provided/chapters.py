"""Find a chapter's checks by its number: spec in tests/specs/chNN.py, references in tests/reference/chNN.pt."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from . import uses
from .checking import Result, judge, judge_source, run_probe
from .layout import LAYOUT, chapter_facts, chapter_number, prerequisites
from .loader import load_file


def available() -> list[str]:
    """Chapter numbers that have checks, e.g. ['02']."""
    return LAYOUT.chapters()


def normalise(chapter: str | int) -> str:
    """'ch02', '02', '2' and 2 all mean chapter '02', if that chapter has checks."""
    try:
        number = chapter_number(chapter)
    except ValueError:
        raise ValueError(f"not a chapter: {chapter!r}; write it as ch02 (chapters with checks: "
                         f"{', '.join('ch' + c for c in available())})") from None
    if number not in available():
        raise ValueError(f"chapter {number} has no checks yet; chapters with checks: "
                         f"{', '.join('ch' + c for c in available())}")
    return number


def load_spec(chapter: str | int) -> ModuleType:
    number = normalise(chapter)
    return load_file(f"course_spec_ch{number}", LAYOUT.spec(number))


def load_spec_part(chapter: str | int, part: str) -> ModuleType:
    """A part of a chapter's spec kept in a file of its own, tests/specs/chNN_<part>.py (a long spec's
    inputs, say): the grader copies it into the sandbox beside the spec."""
    number = normalise(chapter)
    return load_file(f"course_spec_ch{number}_{part}", LAYOUT.spec_part(number, part))


def reference_path(chapter: str | int) -> Path:
    return LAYOUT.outputs_file(normalise(chapter))


def load_reference_outputs(chapter: str | int) -> dict[str, Any]:
    """The saved reference outputs: {case name: {"inputs", "expected", "mistakes"}}."""
    path = reference_path(chapter)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; instructors regenerate it with `course refs`")
    return torch.load(path, weights_only=True)


def run_chapter(chapter: str | int, impl: Any, cases: list[str] | None = None) -> list[Result]:
    """Run the public cases of a chapter against ``impl`` and return one Result per case.

    A ready-made case (``Case.reads_source``) is judged from the source of ``impl``'s modules and the
    results of the other public cases, which are then run too (but only the ones asked for are returned).
    """
    number = normalise(chapter)
    spec = load_spec(number)
    refs = load_reference_outputs(number)
    wanted = [c for c in spec.CASES if cases is None or c.name in cases]
    run = spec.CASES if any(c.reads_source for c in wanted) else wanted
    results: dict[str, Result] = {}
    for case in run:
        if case.reads_source:
            continue
        if case.name not in refs:
            raise KeyError(f"no reference outputs for case {case.name!r} of ch{number}; run `course refs`")
        saved = refs[case.name]
        actual = run_probe(spec.PROBES, case, impl, saved["inputs"])
        results[case.name] = judge(number, case, actual, saved["inputs"], saved["expected"],
                                   saved["mistakes"], spec.MISTAKES, getattr(spec, "RAISES", None))
    others = list(results.values())
    for case in wanted:
        if case.reads_source:
            sources = {module: module_source(impl, module) for module, _ in case.ready_made}
            results[case.name] = judge_source(number, case, sources, others)
    return [results[c.name] for c in wanted]


def module_source(impl: Any, module: str) -> str | None:
    """The source of ``impl``'s chapter module ``module`` ("attention.py"), read without importing it;
    for a patched implementation (a known-wrong variant), its base's. None when there is no such file."""
    package = getattr(impl, "package", None)  # a PatchedImpl answers with its base's
    if not isinstance(package, str):
        return None
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = next((Path(f) / module for f in folders if (Path(f) / module).is_file()), None)
    return path.read_text(encoding="utf-8", errors="replace") if path else None


# ---------------------------------------------------------------- chapters that build on chapters
def prereq_note(number: str, failing: dict[str, tuple[int, int]]) -> str:
    """The sentence that heads a chapter's failed checks when an earlier chapter it uses fails its own.

    ``failing`` maps a prerequisite chapter to (checks failed, checks run); empty gives "".
    """
    if not failing:
        return ""
    parts = []
    for p, (bad, run) in sorted(failing.items()):
        files = ", ".join(chapter_facts(p).modules)
        parts.append(f"your chapter {p} ({files}), which fails {bad} of {run} check{'s' if run != 1 else ''}")
    return f"Chapter {number} uses {' and '.join(parts)}: fix those first."


def run_with_prerequisites(chapter: str | int, impl: Any, annotate: bool = True
                           ) -> tuple[list[Result], dict[str, tuple[int, int]]]:
    """The public cases of a chapter, with the failures of each earlier chapter it builds on *and* its code
    imports (uses.py) named.

    Returns the chapter's results (with ``annotate``, failed ones headed by ``prereq_note``) and
    {prerequisite: (checks failed, checks run)}.
    """
    number = normalise(chapter)
    failing = {}
    used = uses.used_chapters(number, lambda module: module_source(impl, module))
    for p in prerequisites(number):
        if p not in used:  # an earlier chapter this code does not import cannot be the cause
            continue
        done = run_chapter(p, impl)
        bad = sum(r.status != "pass" for r in done)
        if bad:
            failing[p] = (bad, len(done))
    results = run_chapter(number, impl)
    note = prereq_note(number, failing)
    if note and annotate:
        for r in results:
            if r.status != "pass":
                r.message = f"{note} [{r.message}]"
    return results, failing
