"""Find a chapter's checks by its number: spec in tests/specs/chNN.py, references in tests/reference/chNN.pt."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from types import ModuleType
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from . import diagnosis, uses
from .checking import Result, judge, judge_source, run_probe
from .i18n import _
from .layout import LAYOUT, chapter_facts, chapter_number, modules_for, prerequisites
from .loader import load_file


def available() -> list[str]:
    """Chapter numbers that have checks, e.g. ['02']."""
    return LAYOUT.chapters()


def normalise(chapter: str | int) -> str:
    """'ch02', '02', '2' and 2 all mean chapter '02', if that chapter has checks."""
    try:
        number = chapter_number(chapter)
    except ValueError:
        raise ValueError(_("not a chapter: {chapter}; write it as ch02 (chapters with checks: {available})").format(
            chapter=repr(chapter), available=", ".join("ch" + c for c in available()))) from None
    if number not in available():
        raise ValueError(_("chapter {number} has no checks yet; chapters with checks: {available}").format(
            number=number, available=", ".join("ch" + c for c in available())))
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


class _Copies(Mapping):
    """A chapter's saved outputs, each case's read as a copy of its own (a probe that writes into its inputs changes
    nothing a later case or caller reads)."""

    def __init__(self, saved: dict[str, Any]) -> None:
        self._saved = saved

    def __getitem__(self, case: str) -> Any:
        return copy.deepcopy(self._saved[case])

    def __iter__(self) -> Iterator[str]:
        return iter(self._saved)

    def __len__(self) -> int:
        return len(self._saved)


# Each file is read once a process (unpickling one is half a second, and every case of a chapter asks for it), kept
# with the size and time of the file it was read from, so that `course refs` is seen at once.
_READ: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def load_reference_outputs(chapter: str | int) -> Mapping[str, Any]:
    """The saved reference outputs: {case name: {"inputs", "expected", "mistakes"}}, each case a fresh copy."""
    path = reference_path(chapter)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; instructors regenerate it with `course refs`")
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    if path not in _READ or _READ[path][0] != key:
        _READ[path] = (key, torch.load(path, weights_only=True))
    return _Copies(_READ[path][1])


def run_chapter(chapter: str | int, impl: Any, cases: list[str] | None = None) -> list[Result]:
    """Run the public cases of a chapter against ``impl`` and return one Result per case.

    A ready-made case (``Case.reads_source``) is judged from the source of ``impl``'s modules and the
    results of the other public cases, which are then run too (but only the ones asked for are returned).
    Once every case asked for is judged, the report's own evidence revises the messages (diagnosis.py): a known
    mistake a passed case rules out is no longer named, and a failure a mistake named on another case explains
    says so.
    """
    return _run_chapter(chapter, impl, cases)[0]


def _run_chapter(chapter: str | int, impl: Any, cases: list[str] | None = None, trace: bool = False
                 ) -> tuple[list[Result], dict[str, frozenset[str]]]:
    """``run_chapter``'s results and, with ``trace``, the chapters whose modules each case's probe ran on
    ``impl`` ({case: chapters}; a ready-made case runs none; {} when ``impl``'s files cannot be found)."""
    number = normalise(chapter)
    spec = load_spec(number)
    refs = load_reference_outputs(number)
    wanted = [c for c in spec.CASES if cases is None or c.name in cases]
    run = spec.CASES if any(c.reads_source for c in wanted) else wanted
    owner = _owner(impl, number) if trace else None
    results: dict[str, Result] = {}
    runs: dict[str, frozenset[str]] = {}
    seen: list[tuple[Any, dict[str, Any], Any]] = []
    for case in run:
        if case.reads_source:
            runs[case.name] = frozenset()
            continue
        if case.name not in refs:
            raise KeyError(f"no reference outputs for case {case.name!r} of ch{number}; run `course refs`")
        saved = refs[case.name]
        probe = lambda: run_probe(spec.PROBES, case, impl, saved["inputs"])  # noqa: E731
        actual, runs[case.name] = diagnosis.traced(probe, owner) if owner else (probe(), frozenset())
        results[case.name] = judge(number, case, actual, saved["inputs"], saved["expected"],
                                   saved["mistakes"], spec.MISTAKES, getattr(spec, "RAISES", None))
        seen.append((case, saved, actual))
    _revise(number, spec, seen, results)
    others = list(results.values())
    for case in wanted:
        if case.reads_source:
            sources = {module: module_source(impl, module) for module, _ in case.ready_made}
            results[case.name] = judge_source(number, case, sources, others)
    return [results[c.name] for c in wanted], (runs if owner else {})


def _owner(impl: Any, number: str) -> Any:
    """``diagnosis.module_owners`` of ``impl``'s package folder, its modules of the chapter imported first (an
    import is not a run); None when the folder cannot be found."""
    folders = _package_folders(impl)
    if not folders:
        return None
    for module in modules_for(number):
        try:
            getattr(impl, module.removesuffix(".py"))
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - a module that does not import: its cases say so
            pass
    return diagnosis.module_owners(folders[0])


_FAILS: dict[tuple[str, int, str], frozenset[str]] = {}


def _fails(number: str, case: Any, saved: dict[str, Any]) -> frozenset[str]:
    """``diagnosis.failing_mistakes`` of one case's saved outputs, once per process and reference file."""
    path = reference_path(number)
    key = (str(path), path.stat().st_mtime_ns, case.name)
    if key not in _FAILS:
        _FAILS[key] = diagnosis.failing_mistakes(number, case, saved["inputs"], saved["expected"], saved["mistakes"])
    return _FAILS[key]


def _revise(number: str, spec: ModuleType, seen: list[tuple[Any, dict[str, Any], Any]],
            results: dict[str, Result]) -> None:
    """The report-wide rules of diagnosis.py on the judged cases ``seen`` ((case, saved, outputs)), in place."""
    if not any(results[c.name].status != "pass" and results[c.name].mistakes for c, _, _ in seen):
        return  # nothing named: nothing to rule out, nothing to explain by

    def report() -> list[diagnosis.Judged]:
        return [diagnosis.Judged(c.name, results[c.name].status == "pass", tuple(results[c.name].mistakes),
                                 not isinstance(actual, BaseException), _fails(number, c, saved))
                for c, saved, actual in seen]

    ruled = diagnosis.ruled_out(report())
    raises = getattr(spec, "RAISES", None) or {}
    for case, saved, actual in seen:
        if results[case.name].status != "pass" and ruled & set(results[case.name].mistakes):
            results[case.name] = judge(number, case, actual, saved["inputs"], saved["expected"],
                                       {n: w for n, w in saved["mistakes"].items() if n not in ruled}, spec.MISTAKES,
                                       {n: p for n, p in raises.items() if n not in ruled})
    judged = report()
    for i, k in diagnosis.explainers(judged).items():
        r = results[judged[i].label]
        r.message = diagnosis.explained(r.message, judged[k].label)


def module_source(impl: Any, module: str) -> str | None:
    """The source of ``impl``'s chapter module ``module`` ("attention.py"), read without importing it;
    for a patched implementation (a known-wrong variant), its base's. None when there is no such file."""
    path = next((f / module for f in _package_folders(impl) if (f / module).is_file()), None)
    return path.read_text(encoding="utf-8", errors="replace") if path else None


# ---------------------------------------------------------------- chapters that build on chapters
def prereq_note(number: str, failing: dict[str, tuple[int, int]], ran: frozenset[str] | None = None) -> str:
    """The sentence that heads a chapter's failed check when an earlier chapter it uses fails its own.

    ``failing`` maps a prerequisite chapter to (checks failed, checks run); ``ran``: the chapters whose code the
    check's computation runs (diagnosis.traced), None when not known: only those of ``failing`` are named.
    Nothing to name gives "".
    """
    failing = {p: v for p, v in failing.items() if ran is None or p in ran}
    if not failing:
        return ""
    parts = []
    for p, (bad, run) in sorted(failing.items()):
        files = ", ".join(chapter_facts(p).modules)
        parts.append((_("your chapter {chapter} ({files}), which fails {bad} of {run} checks") if run != 1 else
                      _("your chapter {chapter} ({files}), which fails {bad} of {run} check")).format(
                          chapter=p, files=files, bad=bad, run=run))
    return _("Chapter {number} uses {parts}: fix those first.").format(number=number, parts=_(" and ").join(parts))


def failing_prerequisites(prereqs: list[str], used: set[str],
                          results_of: Callable[[str], list[Any]]) -> dict[str, tuple[int, int]]:
    """{prerequisite: (checks failed, checks run)} of the ``prereqs`` the learner's code imports (``used``:
    an earlier chapter it does not import cannot be the cause) that fail their own checks (``results_of``:
    a chapter's results, each with a ``status``)."""
    failing = {}
    for p in (p for p in prereqs if p in used):
        done = results_of(p)
        bad = sum(r.status != "pass" for r in done)
        if bad:
            failing[p] = (bad, len(done))
    return failing


def run_with_prerequisites(chapter: str | int, impl: Any, annotate: bool = True
                           ) -> tuple[list[Result], dict[str, tuple[int, int]]]:
    """The public cases of a chapter, with the failures of each earlier chapter it builds on *and* its code
    imports (uses.py) named on the failed cases whose computation runs that chapter's code.

    Returns the chapter's results (with ``annotate``, each failed one headed by its ``prereq_note``: when an
    earlier chapter fails, the probes run traced, on the learner's own code, to see which chapters each runs) and
    {prerequisite: (checks failed, checks run)}.
    """
    number = normalise(chapter)
    used = uses.used_chapters(number, lambda module: module_source(impl, module))
    failing = failing_prerequisites(prerequisites(number), used, lambda p: run_chapter(p, impl))
    results, runs = _run_chapter(number, impl, trace=bool(failing and annotate))
    for r in results if annotate else []:
        note = prereq_note(number, failing, runs.get(r.case)) if r.status != "pass" else ""
        if note:
            r.message = f"{note} [{r.message}]"
    return results, failing


def _package_folders(impl: Any) -> list[Path]:
    """The folders of ``impl``'s package (a PatchedImpl answers with its base's); [] when there is none."""
    package = getattr(impl, "package", None)
    if not isinstance(package, str):
        return []
    spec = importlib.util.find_spec(package)
    return [Path(f) for f in (spec.submodule_search_locations or [])] if spec else []
