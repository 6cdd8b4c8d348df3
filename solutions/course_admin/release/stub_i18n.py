"""The learner's stubs in another language: the words of a solution module translated, its code untouched.

A learner tree released with ``--lang zh_CN`` holds stubs made from the same solution modules as the English ones
(stubs.py), with every text a learner reads in its language: each docstring paragraph (its doctest code and
outputs stay as they are, their comments translated), each error message raised outside the solution blocks (an
f-string's fields kept), each comment, and the header and ``NotImplementedError`` hint that stubs.py writes; the
code, every name and every value are the same (the test compares the two stubs' syntax trees with their strings
removed). The package's own docstring (``course_lib/__init__.py``) is translated the same way.

The translations are in one catalog, ``solutions/locale/<lang>/course_lib.json`` ({English: translation}), keyed by
the English, so a changed English text has no translation until one is written; ``problems`` lists the
untranslated, the stale, and what a translation breaks: inline code, a shape such as ``(batch, heads, seq_q,
seq_k)``, a number, a ``{field}``, the typography and the glossary's terms (the rules of messages.py).

    python -m course_admin.release.stub_i18n todo zh_CN     # JSON: the English texts still to translate
    python -m course_admin.release.stub_i18n check zh_CN    # what the sync test fails on
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tokenize
import unicodedata
from collections.abc import Callable
from pathlib import Path

from course_lib.provided import i18n
from course_lib.provided.layout import LAYOUT, Layout

from ..book import catalogs

Translate = Callable[[str], "str | None"]  # English -> its translation (None: none)
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*$")
PACKAGE = "course_lib/__init__.py"  # its docstring is translated too; it is no stub
SHAPE = re.compile(r"\((?:\.\.\.|\w+(?: ?[-+*/] ?\w+)*)(?:, ?(?:\.\.\.|\w+(?: ?[-+*/] ?\w+)*))*,\)"
                   r"|\((?:\.\.\.|\w+(?: ?[-+*/] ?\w+)*)(?:, ?(?:\.\.\.|\w+(?: ?[-+*/] ?\w+)*))+\)")
DIMENSIONS = {"batch", "seq", "heads", "n", "V", "..."}  # a shape names one of these, or a dimension with _ or a digit
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


# The texts stubs.py writes into every stub itself (a header, the hint each stub raises), English: translated
# through the catalog like the solution modules' own.
HEADER = (
    "# {stub}: yours to fill in. Replace each `raise NotImplementedError(...)` with your code;\n"
    "# the docstrings say what to compute. Check your work with `make check CH={chapter}`.\n"
    "# Generated from {solution} by `course release`: instructors edit solutions/, never this file.\n"
)
HEADER_NOTHING_TO_DO = (
    "# {stub}: provided with the course; nothing to implement here.\n"
    "# Generated from {solution} by `course release`: instructors edit solutions/, never this file.\n"
)
HINT = "Chapter {chapter}: implement {function} in course_lib/{module} (book chapter {chapter}, exercises/{exercise})"
HINT_NO_EXERCISE = "Chapter {chapter}: implement {function} in course_lib/{module} (book chapter {chapter})"
GENERATED = (HEADER, HEADER_NOTHING_TO_DO, HINT, HINT_NO_EXERCISE)


def catalog_path(layout: Layout, lang: str) -> Path:
    """solutions/locale/<lang>/course_lib.json: {English text of a stub: its translation}."""
    return layout.solutions / "locale" / i18n.normalise(lang) / "course_lib.json"


def load_catalog(layout: Layout, lang: str) -> dict[str, str]:
    """``lang``'s catalog of the stubs ({} when there is none)."""
    path = catalog_path(layout, lang)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def has_words(text: str) -> bool:
    """Whether a text has words to translate: a word of two letters or more outside inline code (a heading such as
    ``Example:`` too, which the book's rule for one-token messages would keep)."""
    return bool(re.search(r"[A-Za-z]{2,}", catalogs.PROTECTED.sub(" ", text)))


def translator(layout: Layout, lang: str) -> tuple[Translate, list[str]]:
    """A lookup in ``lang``'s catalog that records what it lacks (in English: no lookup, nothing lacks)."""
    catalog, missing = ({} if lang == "en" else load_catalog(layout, lang)), []

    def tr(english: str) -> str | None:
        if lang == "en":
            return None
        if not catalog.get(english):
            missing.append(english)
        return catalog.get(english)
    return tr, missing


def _doctest_comments(lines: list[str], tr: Translate) -> tuple[dict[int, str], bool]:
    """The doctest lines of a docstring whose comment is translated, {index: the line}: each example (a ``>>>``
    line and its ``...`` lines) is tokenized as Python, and a comment's words are replaced by ``tr``'s answer, the
    code before it kept byte for byte. Also whether every comment with words had an answer."""
    groups: list[list[int]] = []
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if re.match(r">>>( |$)", stripped):
            groups.append([i])
        elif groups and groups[-1][-1] == i - 1 and re.match(r"\.\.\.( |$)", stripped):
            groups[-1].append(i)
    replaced: dict[int, str] = {}
    complete = True
    for group in groups:
        starts = [len(lines[i]) - len(lines[i].lstrip()) + 4 for i in group]  # where the code starts, after "... "
        source = "\n".join(lines[i][start:] for i, start in zip(group, starts))
        try:
            comments = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
        except (tokenize.TokenError, SyntaxError):
            continue  # not Python (a doctest of an error): no comment to find
        for token in comments:
            english = re.sub(r"^# ?", "", token.string)
            if not has_words(english):
                continue
            translated = tr(english)
            complete = complete and translated is not None
            if translated is not None:
                index, column = group[token.start[0] - 1], starts[token.start[0] - 1] + token.start[1]
                replaced[index] = lines[index][:column] + "# " + " ".join(translated.split("\n"))
    return replaced, complete


def _doc_lines(value: str, tr: Translate) -> str | None:
    """A docstring's value with each paragraph of prose translated (its indentation kept); doctest lines, from a
    ``>>>`` line to the end of its paragraph, stay as they are but for their comments (``_doctest_comments``).
    None when a paragraph or a comment has no translation."""
    lines = value.split("\n")
    comments, complete = _doctest_comments(lines, tr)
    indent = min((len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()), default=0)
    out: list[str] = []
    prose: list[str] = []
    in_doctest = False

    def flush() -> None:
        nonlocal complete
        english = "\n".join(prose)
        translated = tr(english) if has_words(english) else english
        complete = complete and translated is not None
        for line in (translated or english).split("\n"):
            out.append(line if not out or not line.strip() else " " * indent + line)
        prose.clear()
    for i, line in enumerate(lines):
        in_doctest = bool(line.strip()) and (in_doctest or line.lstrip().startswith(">>>"))
        if line.strip() and not in_doctest:
            prose.append(line if i == 0 else line[indent:])
            continue
        if prose:
            flush()
        out.append(comments.get(i, line))
    if prose:
        flush()
    return "\n".join(out) if complete else None


def _template(node: ast.expr) -> str | None:
    """The text of a message literal, an f-string's fields written ``{expression}``; None if not a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value).replace("{", "{{").replace("}", "}}"))
        elif isinstance(value, ast.FormattedValue):
            spec = _template(value.format_spec) if value.format_spec is not None else None
            parts.append("{" + ast.unparse(value.value) + (f"!{chr(value.conversion)}" if value.conversion > 0 else "")
                         + (f":{spec}" if spec else "") + "}")
    return "".join(parts)


def _width(text: str) -> int:
    """Columns on screen: a Chinese character or full-width punctuation takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _literal(template: str, f_string: bool, column: int, width: int = 110) -> str:
    """Python source for a message: string literals of at most about ``width`` columns, one a line (implicitly
    concatenated), cut after full-width punctuation (else after a space), an f-string only where a piece has a
    field."""
    atoms = re.findall(r"\{\{|\}\}|\{[^{}]*\}|.", template, re.S) if f_string else list(template)
    pieces, current, cut = [], [], 0  # cut: where the current piece may end, in atoms
    for atom in atoms:
        current.append(atom)
        if atom in "，；：。、" or (atom == " " and not any(a in "，；：。、" for a in current[cut:])):
            cut = len(current)
        if _width("".join(current)) > width - column - 4 and 0 < cut < len(current):
            pieces.append("".join(current[:cut]))
            current, cut = current[cut:], 0
    pieces = [p for p in pieces + ["".join(current)] if p]
    literals = []
    for piece in pieces:
        field = f_string and re.search(r"\{[^{}]*\}", piece.replace("{{", "").replace("}}", ""))
        text = piece if field or not f_string else piece.replace("{{", "{").replace("}}", "}")
        literals.append(("f" if field else "") + '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return ("\n" + " " * column).join(literals or ['""'])


def _in_blocks(lines: list[str]) -> set[int]:
    """The line numbers (1-based) inside solution blocks, markers included: the stub replaces them."""
    inside, begin = set(), None
    for number, line in enumerate(lines, 1):
        if MARKER.match(line):
            if begin is None:
                begin = number
            else:
                inside.update(range(begin, number + 1))
                begin = None
    return inside


def _edits(text: str, filename: str, tr: Translate) -> list[tuple[int, int, str]]:
    """(start, end, replacement) offsets into ``text`` of every translatable text outside the solution blocks;
    ``tr`` is asked for each (a replacement is made only where it answers)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(lineno: int, col_bytes: int) -> int:
        return starts[lineno - 1] + len(lines[lineno - 1].encode("utf-8")[:col_bytes].decode("utf-8"))
    skip = _in_blocks([line.rstrip("\r\n") for line in lines])
    tree = ast.parse(text, filename=filename)
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str) and first.lineno not in skip):
                value = _doc_lines(first.value.value, tr)
                if value is not None:
                    value = value.replace("\\", "\\\\").replace('"""', '\\"""')
                    value = value[:-1] + '\\"' if value.endswith('"') else value
                    edits.append((at(first.lineno, first.col_offset), at(first.end_lineno, first.end_col_offset),
                                  f'"""{value}"""'))
        elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.lineno not in skip:
            for arg in node.exc.args:
                english = _template(arg)
                if english and has_words(english) and (translated := tr(english)) is not None:
                    start = at(arg.lineno, arg.col_offset)
                    column = start - starts[arg.lineno - 1]
                    edits.append((start, at(arg.end_lineno, arg.end_col_offset),
                                  _literal(translated, isinstance(arg, ast.JoinedStr), column)))
    return edits + _comment_edits(text, starts, skip, tr)


def _comment_edits(text: str, starts: list[int], skip: set[int], tr: Translate) -> list[tuple[int, int, str]]:
    """The comments' edits: a run of whole-line comments at one column is one text, a trailing comment another."""
    runs: list[list[tokenize.TokenInfo]] = []
    previous_end = None
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT or token.start[0] in skip or MARKER.match(token.string) \
                or re.match(r"#!|# *(noqa|type:|pragma|-\*-)", token.string):
            previous_end = token.end[0] if token.type == tokenize.NL else previous_end
            continue
        whole_line = not token.line[:token.start[1]].strip()
        if (whole_line and runs and previous_end == token.start[0] - 1 and runs[-1][-1].start[1] == token.start[1]
                and not runs[-1][-1].line[:runs[-1][-1].start[1]].strip()):
            runs[-1].append(token)
        else:
            runs.append([token])
        previous_end = token.start[0]
    edits = []
    for run in runs:
        english = "\n".join(re.sub(r"^# ?", "", t.string) for t in run)
        if has_words(english) and (translated := tr(english)) is not None:
            column = run[0].start[1]
            body = ("\n" + " " * column).join("# " + line for line in translated.split("\n"))
            edits.append((starts[run[0].start[0] - 1] + column, starts[run[-1].end[0] - 1] + run[-1].end[1], body))
    return edits


def localise(text: str, filename: str, tr: Translate) -> str:
    """``text`` (a Python source) with its docstrings, raised messages and comments outside the solution blocks
    replaced by what ``tr`` answers (a text it has no answer for stays English)."""
    for start, end, replacement in sorted(_edits(text, filename, tr), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def texts(source: str, filename: str = "<source>") -> list[str]:
    """The English texts of a source that a translated stub needs, in order."""
    found: list[str] = []

    def record(english: str) -> None:
        found.append(english)
    _edits(source, filename, record)  # record returns None: nothing is replaced
    return found


def wanted(layout: Layout = LAYOUT) -> list[str]:
    """Every English text of the stubs (and the package's docstring), once, in order."""
    found = list(GENERATED)
    for path in [*layout.reference_modules(), layout.root / PACKAGE]:
        found += texts(path.read_text(encoding="utf-8"), layout.rel(path))
    return list(dict.fromkeys(found))


def shapes(text: str) -> list[str]:
    """The tensor shapes written in ``text``: ``(batch, 1, 1, seq_k)``, ``(d_model,)``, not ``(checks, data)``."""
    return [s for s in SHAPE.findall(text) if any(d.strip() in DIMENSIONS or re.search(r"[_\d]|\.\.\.", d)
                                                   for d in s[1:-1].split(","))]


def issues(english: str, translated: str) -> list[str]:
    """What ``translated`` breaks of ``english``: messages.py's rules, and every shape and number kept."""
    from .messages import issues as message_issues
    found = message_issues(english, translated)
    found += [f"shape lost: {s!r}" for s in sorted(set(shapes(english)) - set(shapes(translated)))]
    plain = catalogs.PROTECTED.sub(" ", english)
    found += [f"number lost: {n!r}" for n in sorted(set(NUMBER.findall(plain)) - set(NUMBER.findall(translated)))]
    return found


def problems(lang: str, layout: Layout = LAYOUT) -> list[str]:
    """Everything that keeps ``lang``'s stub catalog from being in sync with the current English."""
    want, done = wanted(layout), load_catalog(layout, lang)
    found = [f"untranslated: {m[:80]!r}" for m in want if not done.get(m)]
    found += [f"stale (its English is gone): {m[:80]!r}" for m in done if m not in want]
    return found + [f"{m[:50]!r}: {issue}" for m in want if done.get(m) for issue in issues(m, done[m])]


def warning(lang: str, layout: Layout = LAYOUT) -> str | None:
    """What `course release` says when ``lang``'s stubs cannot be made (None when they can)."""
    left = problems(lang, layout)
    if not left:
        return None
    return (f"{layout.rel(catalog_path(layout, lang))} is behind "
            f"the English stubs ({len(left)} problem(s), the first: {left[0]}); a --lang {lang} learner tree cannot be "
            f"made until it is translated: python -m course_admin.release.stub_i18n todo {lang}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.release.stub_i18n", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["todo", "check"])
    parser.add_argument("lang", help="the language of the catalog, e.g. zh_CN")
    args = parser.parse_args(argv)
    if args.action == "todo":
        done = load_catalog(LAYOUT, args.lang)
        print(json.dumps([m for m in wanted() if not done.get(m)], ensure_ascii=False, indent=1))
        return 0
    left = problems(args.lang)
    print("\n".join(left) or f"{args.lang}: every text of the stubs translated and in sync")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
