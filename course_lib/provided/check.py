"""`course check chNN` (or `make check CH=NN`): run a chapter's public checks on your course_lib and
explain each result."""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import asdict
from pathlib import Path

from . import chapters, uses
from .checking import Result, total
from .loader import load_impl

SAME = "(same as above)"
SAME_MISTAKE = "(the same known mistake as above)"


def _points(results: list[Result]) -> tuple[int, int]:
    """Widths that align the points column: earned right-aligned, possible left-aligned."""
    earned = max([len(f"{r.earned:g}") for r in results] + [len(f"{total(results)[0]:g}")])
    possible = max([len(f"{r.points:g}") for r in results] + [len(f"{total(results)[1]:g}")])
    return earned, possible


def table(results: list[Result], width: int = 100) -> str:
    """A plain-text table: check, points, status, message (wrapped). A message repeated from the row
    above is not printed twice; when every check fails for the same reason, one line says so."""
    earned, possible = total(results)
    messages = {r.message for r in results}
    if len(results) > 1 and earned == 0 and len(messages) == 1:
        head = f"All {len(results)} checks fail ({earned:g}/{possible:g} points): "
        return textwrap.fill(head + (results[0].message or "failed"), width, subsequent_indent="    ")
    name_w = max([len("check"), len("total")] + [len(r.case) for r in results])
    ew, pw = _points(results)
    pts_w = ew + pw + 3
    lines = [f"{'check':<{name_w}}  {'points':^{pts_w}}  status  message", "-" * width]
    previous: tuple[str, tuple[str, ...]] | None = None
    for r in results:
        status = "PASS" if r.status == "pass" else "FAIL"
        head = f"{r.case:<{name_w}}  {r.earned:>{ew}g} / {r.points:<{pw}g}  {status:<6}  "
        text = r.message or "ok"
        if r.status != "pass" and previous is not None:
            if r.message == previous[0]:
                text = SAME
            elif r.mistakes and tuple(r.mistakes) == previous[1]:
                text = SAME_MISTAKE
        previous = (r.message, tuple(r.mistakes)) if r.status != "pass" else None
        body = textwrap.wrap(text, max(30, width - len(head))) or [""]
        lines.append(head + body[0])
        lines.extend(" " * len(head) + more for more in body[1:])
    lines.append("-" * width)
    lines.append(f"{'total':<{name_w}}  {earned:>{ew}g} / {possible:<{pw}g}")
    return "\n".join(lines)


def used_chapters(number: str, impl) -> set[str]:
    """The earlier chapters whose modules this chapter's code (``impl``'s) imports (uses.py)."""
    return uses.used_chapters(number, lambda module: chapters.module_source(impl, module))


def results_and_causes(number: str, impl, annotate: bool = True) -> tuple[list[Result], dict[str, tuple[int, int]], str]:
    """The chapter's public results, with (``annotate``) each failed one headed by the note naming the earlier
    chapters that fail their own checks, that this chapter's code uses (``used_chapters``) *and* whose code that
    check runs (chapters.run_with_prerequisites); those {chapter: (failed, run)}; the note of them all."""
    results, failing = chapters.run_with_prerequisites(number, impl, annotate=annotate)  # only chapters it uses
    return results, failing, chapters.prereq_note(number, failing)


def check(chapter: str, which: str = "learner") -> list[Result]:
    """The chapter's public checks; a failed one names an earlier chapter it uses that fails its own."""
    return results_and_causes(chapters.normalise(chapter), load_impl(which))[0]


def _where(which: str) -> str:
    """The folder of the implementation that was checked, so that a learner sees which tree ran."""
    package = "course_lib" if which == "learner" else "course_ref"
    module = sys.modules.get(package)
    folder = Path(getattr(module, "__file__", "") or ".").resolve().parent
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course check", description=__doc__)
    parser.add_argument("chapter", help="the chapter to check, e.g. ch02")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--impl", choices=["learner", "reference"], default="learner",
                        help="check your course_lib (default) or the instructor's reference")
    args = parser.parse_args(argv)
    try:
        number = chapters.normalise(args.chapter)
        impl = load_impl(args.impl)
    except (ValueError, FileNotFoundError) as err:
        print(f"course check: {err}", file=sys.stderr)
        return 2
    results, failing, note = results_and_causes(number, impl)  # each failed check names what it runs
    earned, possible = total(results)
    where = _where(args.impl)
    if args.json:
        print(json.dumps({"chapter": number, "implementation": args.impl, "checked": where,
                          "earned": earned, "possible": possible,
                          "prerequisites_failing": {p: {"failed": f, "run": n} for p, (f, n) in failing.items()},
                          "results": [asdict(r) for r in results]}, indent=2, ensure_ascii=False))
        return 0 if earned == possible else 1
    spec = chapters.load_spec(number)
    who = "your course_lib" if args.impl == "learner" else "the reference (course_ref)"
    print(f"Chapter {number} — {spec.TITLE}: public checks on {who}\nchecked: {where}\n")
    if note:
        print(textwrap.fill(f"{note} (It concerns the failed checks that run that code, which say so below; "
                            f"`make check CH={min(failing)}` shows what is wrong there.)", 100) + "\n")
    print(table(results))
    if earned == possible:
        print(f"\nAll public checks pass. Hand in with `make submit CH={number}`; your instructor also "
              "grades hidden cases.")
    return 0 if earned == possible else 1
