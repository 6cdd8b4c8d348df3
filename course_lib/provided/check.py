"""`course check chNN`: run a chapter's public checks on your course_lib and explain each result."""
from __future__ import annotations

import argparse
import json
import textwrap
from dataclasses import asdict

from . import chapters
from .checking import Result, total
from .loader import load_impl


def table(results: list[Result], width: int = 100) -> str:
    """A plain-text table: check, points, status, message (wrapped)."""
    name_w = max([len("check")] + [len(r.case) for r in results])
    lines = [f"{'check':<{name_w}}  {'points':>9}  status  message", "-" * width]
    for r in results:
        status = "PASS" if r.status == "pass" else "FAIL"
        head = f"{r.case:<{name_w}}  {r.earned:>4g}/{r.points:<4g}  {status:<6}  "
        body = textwrap.wrap(r.message or "ok", max(30, width - len(head))) or [""]
        lines.append(head + body[0])
        lines.extend(" " * len(head) + more for more in body[1:])
    earned, possible = total(results)
    lines.append("-" * width)
    lines.append(f"{'total':<{name_w}}  {earned:>4g}/{possible:<4g}")
    return "\n".join(lines)


def check(chapter: str, which: str = "learner") -> list[Result]:
    """The chapter's public checks; a failed one names an earlier chapter it uses that fails its own."""
    return chapters.run_with_prerequisites(chapter, load_impl(which))[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course check", description=__doc__)
    parser.add_argument("chapter", help="the chapter to check, e.g. ch02")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--impl", choices=["learner", "reference"], default="learner",
                        help="check your course_lib (default) or the instructor's reference")
    args = parser.parse_args(argv)
    try:
        number = chapters.normalise(args.chapter)
    except ValueError as err:
        parser.error(str(err))
    results, failing = chapters.run_with_prerequisites(number, load_impl(args.impl), annotate=args.json)
    earned, possible = total(results)
    if args.json:
        print(json.dumps({"chapter": number, "earned": earned, "possible": possible,
                          "prerequisites_failing": {p: {"failed": f, "run": n} for p, (f, n) in failing.items()},
                          "results": [asdict(r) for r in results]}, indent=2, ensure_ascii=False))
    else:
        spec = chapters.load_spec(number)
        print(f"Chapter {number} — {spec.TITLE}: checks on the {args.impl}'s course_lib\n")
        note = chapters.prereq_note(number, failing)
        if note:
            print(textwrap.fill(f"{note} (`course check ch{min(failing)}` shows what is wrong there.)", 100) + "\n")
        print(table(results))
    return 0 if earned == possible else 1
