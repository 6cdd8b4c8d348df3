"""Learner stubs from solution modules: each solution block becomes a `raise NotImplementedError(hint)`.

In a solution module (solutions/course_ref/<module>.py), each block between a `### BEGIN SOLUTION` line
and a `### END SOLUTION` line (markers included) becomes one `raise NotImplementedError("Chapter NN:
implement <function> in course_lib/<module>.py (book chapter NN, exercises/chNN_<name>)")` at the
block's indentation; the chapter is the spec in tests/specs/ whose MODULES lists the module.
Everything else (docstrings, argument checks) is kept.

In another language (``make_stub(..., lang="zh_CN")``, what a learner tree released with ``--lang`` holds), the
stub is made from the same solution module, its docstrings, raised messages and comments translated from the
catalog ``solutions/locale/<lang>/course_lib.json`` and its code untouched; so are the header and the hint written
here (stub_i18n.py). A text without a translation stops it (ReleaseError): a Chinese stub is never half English.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from course_lib.provided.layout import Layout, SpecError, owner_of

from .stub_i18n import HEADER, HEADER_NOTHING_TO_DO, HINT, HINT_NO_EXERCISE, catalog_path, localise, translator

MARKER_RE = re.compile(r"^(?P<indent>[ \t]*)### (?P<which>BEGIN|END) SOLUTION[ \t]*$")


class ReleaseError(Exception):
    """A problem in solutions/ that stops the release; the message names the file and line."""



def _function_spans(tree: ast.Module) -> list[tuple[int, int, int, str]]:
    """(first line, last line, column, name to show) of every def; methods show as Class.method.

    A def nested in a function is shown by the name of its outermost function: that is what the
    learner implements.
    """
    spans: list[tuple[int, int, int, str]] = []

    def visit(node: ast.AST, prefix: str, in_function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = in_function or f"{prefix}{child.name}"
                spans.append((child.lineno, child.end_lineno or child.lineno, child.col_offset, name))
                visit(child, prefix, name)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}." if in_function is None else prefix, in_function)
            else:
                visit(child, prefix, in_function)

    visit(tree, "", None)
    return spans


def _solution_blocks(lines: list[str], filename: str) -> list[tuple[int, int, str]]:
    """(begin index, end index, indent) of every solution block, 0-based; bad markers raise ReleaseError."""
    blocks: list[tuple[int, int, str]] = []  # (begin index, end index, indent), 0-based
    begin: tuple[int, str] | None = None
    for i, line in enumerate(lines):
        m = MARKER_RE.match(line.rstrip("\r\n"))
        if m is None:
            if re.search(r"(BEGIN|END) SOLUTION", line):
                raise ReleaseError(f"{filename}:{i + 1}: a solution marker must be alone on its line, "
                                   f"written exactly `### BEGIN SOLUTION` or `### END SOLUTION`: {line.strip()!r}")
            continue
        if m["which"] == "BEGIN":
            if begin is not None:
                raise ReleaseError(f"{filename}:{i + 1}: `### BEGIN SOLUTION` inside the block opened at "
                                   f"line {begin[0] + 1} (nested or missing `### END SOLUTION`)")
            begin = (i, m["indent"])
        else:
            if begin is None:
                raise ReleaseError(f"{filename}:{i + 1}: `### END SOLUTION` without a `### BEGIN SOLUTION` before it")
            blocks.append((begin[0], i, begin[1]))
            begin = None
    if begin is not None:
        raise ReleaseError(f"{filename}:{begin[0] + 1}: `### BEGIN SOLUTION` is never closed by `### END SOLUTION`")
    return blocks


def strip_solutions(text: str, filename: str, message: str | None = None, header: str = "") -> str:
    """Replace each solution block of a Python source by ``raise NotImplementedError(message)``.

    ``message`` may contain ``{function}``, filled with the name of the def that encloses the block.
    Raises ReleaseError (naming ``filename`` and the line) on unbalanced or nested markers, a marker
    that shares its line with code, or a block outside a function.
    """
    lines = text.splitlines(keepends=True)
    blocks = _solution_blocks(lines, filename)
    if not blocks:
        return header + text

    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as err:
        raise ReleaseError(f"{filename}:{err.lineno}: not valid Python: {err.msg}") from err
    spans = _function_spans(tree)

    out: list[str] = []
    previous = 0
    for start, end, indent in blocks:
        line_no = start + 1
        enclosing = [s for s in spans if s[0] < line_no <= s[1]]
        if not enclosing:
            raise ReleaseError(f"{filename}:{line_no}: solution block outside a function; put it inside "
                               "the def that the learner implements")
        first, _, column, function = max(enclosing, key=lambda s: s[0])  # the innermost def
        if len(indent.expandtabs()) <= column:
            raise ReleaseError(f"{filename}:{line_no}: the solution block is not indented inside "
                               f"`{function}` (line {first}); indent its markers like its body")
        text_of_message = (message or "implement {function}").format(function=function)
        quoted = '"' + text_of_message.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.extend(lines[previous:start])
        out.append(f"{indent}raise NotImplementedError({quoted})\n")
        previous = end + 1
    out.extend(lines[previous:])
    stub = "".join(out)

    # The header goes first, after a shebang or encoding line if there is one.
    keep = 0
    stub_lines = stub.splitlines(keepends=True)
    while keep < len(stub_lines) and keep < 2 and re.match(r"#!|#.*coding[:=]", stub_lines[keep]):
        keep += 1
    stub = "".join(stub_lines[:keep]) + header + "".join(stub_lines[keep:])
    try:
        compile(stub, filename, "exec")
    except SyntaxError as err:
        raise ReleaseError(f"{filename}: the generated stub is not valid Python at line {err.lineno}: {err.msg}") from err
    return stub




def make_stub(layout: Layout, solution: Path, lang: str = "en") -> str:
    """The learner's stub of ``solution``, in ``lang``: English, or translated from the catalog (ReleaseError
    when a text of it has no translation)."""
    text = solution.read_text(encoding="utf-8")
    rel = layout.rel(solution)
    strip_solutions(text, rel)  # the markers are checked before anything else
    tr, missing = translator(layout, lang)
    if lang != "en":
        text = localise(text, rel, tr)
    module = solution.name
    if not any(MARKER_RE.match(line) for line in text.splitlines()):
        header = tr(HEADER_NOTHING_TO_DO) or HEADER_NOTHING_TO_DO
        _refuse_missing(layout, rel, lang, missing)
        return strip_solutions(text, rel, None, header.format(stub=f"course_lib/{module}", solution=rel))
    try:
        chapter = owner_of(module, layout)
    except SpecError as err:
        raise ReleaseError(f"{rel}: {err}") from None
    exercise = layout.exercise_name(chapter)
    hint = (tr(HINT) or HINT) if exercise else (tr(HINT_NO_EXERCISE) or HINT_NO_EXERCISE)
    message = hint.format(chapter=chapter, function="{function}", module=module, exercise=exercise)
    header = (tr(HEADER) or HEADER).format(stub=f"course_lib/{module}", chapter=chapter, solution=rel)
    _refuse_missing(layout, rel, lang, missing)
    return strip_solutions(text, rel, message, header)


def _refuse_missing(layout: Layout, rel: str, lang: str, missing: list[str]) -> None:
    if missing:
        raise ReleaseError(f"{rel}: {len(missing)} text(s) of its stub have no {lang} translation in "
                           f"{layout.rel(catalog_path(layout, lang))} (python -m course_admin.release.stub_i18n todo "
                           f"{lang} lists them), the first: {missing[0][:80]!r}")
