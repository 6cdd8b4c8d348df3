"""`course check chNN` (or `make check CH=NN`): run a chapter's public checks on your course_lib and
explain each result."""
from __future__ import annotations

import json
import re
import sys
import unicodedata
from dataclasses import asdict
from pathlib import Path

from . import chapters, uses
from .checking import Result, total
from .i18n import N_, _, check_name
from .loader import load_impl
from .parsers import Parser

HELP = N_("`course check chNN` (or `make check CH=NN`): run a chapter's public checks on\nyour course_lib and "
           "explain each result.")  # the module's docstring, as --help says it
SAME = N_("(same as above)")
SAME_MISTAKE = N_("(the same known mistake as above)")


def _points(results: list[Result]) -> tuple[int, int]:
    """Widths that align the points column: earned right-aligned, possible left-aligned."""
    earned = max([len(f"{r.earned:g}") for r in results] + [len(f"{total(results)[0]:g}")])
    possible = max([len(f"{r.points:g}") for r in results] + [len(f"{total(results)[1]:g}")])
    return earned, possible


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal: a Chinese character takes two."""
    return sum(2 if ord(c) >= 0x1100 and unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, centre: bool = False) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (``_width``), left-aligned or centred."""
    gap = max(0, width - _width(text))
    return " " * (gap // 2) + text + " " * (gap - gap // 2) if centre else text + " " * gap


_PIECE = re.compile(r"\s+|[\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]|[^\s\u2e80-\ua4cf"
                    r"\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]+")  # a space, a CJK character, a word
_NO_START = set("，。、；：？！）」』”’》〉】…")  # Chinese punctuation that never starts a line


def _wrap(text: str, columns: int, indent: int = 0) -> list[str]:
    """``text`` in lines of at most ``columns`` terminal columns (``indent`` fewer after the first): broken at spaces
    and between Chinese characters (each two columns wide), never before Chinese closing punctuation; a word too
    long for a line is cut."""
    lines: list[str] = []
    line = ""
    for piece in _PIECE.findall(text):
        if piece.isspace():
            line += " " if line else ""
            continue
        for part in [piece] if _width(piece) <= columns - indent else list(piece):
            room = columns - (indent if lines else 0)
            if line.strip() and _width(line) + _width(part) > room:
                carry = ""
                last = _PIECE.findall(line.rstrip())
                if part in _NO_START and len(last) > 1:  # the character (or word) before it goes along
                    carry, line = last[-1], line.rstrip()[:-len(last[-1])]
                lines.append(line.rstrip())
                line = carry
            line += part
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def table(results: list[Result], width: int = 100) -> str:
    """A plain-text table: check, points, status, message (wrapped). A message repeated from the row
    above is not printed twice; when every check fails for the same reason, one line says so."""
    earned, possible = total(results)
    messages = {r.message for r in results}
    if len(results) > 1 and earned == 0 and len(messages) == 1:
        head = _("All {count} checks fail ({earned}/{possible} points): ").format(
            count=len(results), earned=f"{earned:g}", possible=f"{possible:g}")
        body = _wrap(head + (results[0].message or _("failed")), width, indent=4)
        return "\n".join(body[:1] + ["    " + line for line in body[1:]])
    words = {w: _(w) for w in (N_("check"), N_("points"), N_("status"), N_("message"), N_("total"))}
    names = [check_name(r.case) for r in results]  # the learner's language; r.case stays the English key
    name_w = max([_width(words["check"]), _width(words["total"])] + [_width(n) for n in names])
    ew, pw = _points(results)
    pts_w = ew + pw + 3
    lines = [f"{_pad(words['check'], name_w)}  {_pad(words['points'], pts_w, centre=True)}  "
             f"{_pad(words['status'], 6)}  {words['message']}", "-" * width]
    previous: tuple[str, tuple[str, ...]] | None = None
    for r, name in zip(results, names):
        status = _("PASS") if r.status == "pass" else _("FAIL")
        head = f"{_pad(name, name_w)}  {r.earned:>{ew}g} / {r.points:<{pw}g}  {_pad(status, 6)}  "
        text = r.message or _("ok")
        if r.status != "pass" and previous is not None:
            if r.message == previous[0]:
                text = _(SAME)
            elif r.mistakes and tuple(r.mistakes) == previous[1]:
                text = _(SAME_MISTAKE)
        previous = (r.message, tuple(r.mistakes)) if r.status != "pass" else None
        body = _wrap(text, max(30, width - _width(head)))  # by terminal columns: a Chinese character takes two
        lines.append(head + body[0])
        lines.extend(" " * _width(head) + more for more in body[1:])
    lines.append("-" * width)
    lines.append(f"{_pad(words['total'], name_w)}  {earned:>{ew}g} / {possible:<{pw}g}")
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
    parser = Parser("course check", _(HELP))
    parser.add_argument("chapter", help=_("the chapter to check, e.g. ch02"))
    parser.add_argument("--json", action="store_true", help=_("print the results as JSON"))
    parser.add_argument("--impl", choices=["learner", "reference"], default="learner",
                        help=_("check your course_lib (default) or the instructor's reference"))
    args = parser.localise().parse_args(argv)
    try:
        number = chapters.normalise(args.chapter)
        impl = load_impl(args.impl)
    except (ValueError, FileNotFoundError) as err:
        print(_("course check: {error}").format(error=err), file=sys.stderr)
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
    who = _("your course_lib") if args.impl == "learner" else _("the reference (course_ref)")
    print(_("Chapter {number} — {title}: public checks on {who}").format(number=number, title=_(spec.TITLE), who=who)
          + "\n" + _("checked: {folder}").format(folder=where) + "\n")
    if note:
        print("\n".join(_wrap(note + _(" (It concerns the failed checks that run that code, which say so below; "
                                       "`make check CH={chapter}` (or `course check ch{chapter}`) shows what is "
                                       "wrong there.)").format(
                                           chapter=min(failing)), 100)) + "\n")
    print(table(results))
    if earned == possible:
        print("\n" + _("All public checks pass. Hand in with `make submit CH={chapter}` (or `course submit "
                       "ch{chapter}`); your instructor also grades hidden cases.").format(chapter=number))
    return 0 if earned == possible else 1
