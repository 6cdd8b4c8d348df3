"""The exercise notebooks' code cells in another language: their comments and their prose strings, nothing else.

Which words of a code cell are translated (the rule notebook_i18n.py's docstring states, and the tests hold):

- only code cells **without nbgrader metadata** (no solution, grade or locked cell: nbgrader's checksums, the
  hidden tests and the ``check()`` self-checks stay byte for byte the English);
- every **comment** (``# then run again with False``) but a tool's pragma (``# noqa``, ``# type: ignore``);
- a **string literal** that is (a) a positional argument of ``print`` (the printed lines), or (b) a docstring;
  with ``PLOT_LABELS`` on, also (c) a positional argument of a plot's label or title call (``PLOT_CALLS``:
  ``set_xlabel``, ``set_title``, ``plt.ylabel``, …) or the value of a ``label=``, ``xlabel=``, ``ylabel=`` or
  ``title=`` keyword of any call. Each piece of an implicitly concatenated literal is a unit of its own; an
  f-string's ``{fields}`` stay, the same and in the same order.

``PLOT_LABELS`` is off: a learner's kernel has no CJK font for matplotlib (its default, DejaVu Sans, draws a box
and warns "Glyph … missing" for each Chinese character; the book registers its own font, cjk_font.py, in the
book's kernels only). Turn it on, and translate the units it adds, once the learner's tree gives matplotlib a
CJK font.

Anything else (names, data strings such as ``"the"``, format specs, numbers) is code and never changes: a
translated cell's code, parsed with its translatable strings blanked and its comments dropped, is the same AST
as the English cell's (``skeleton``). A unit is keyed by its English text (a comment without its ``#``, a
string literal without its prefix and quotes) in ``solutions/locale/<lang>/code/chNN_<name>.json``:
``{English: translation}`` (the plot labels' translations too, ready for ``PLOT_LABELS`` and linted already).
An English unit with no entry is **untranslated**, an entry whose English is gone **stale**; a translation that loses a ``{field}``, a number or a `code span`, breaks the typography or a term,
or keeps an English phrase (two words of two letters or more, with no Chinese) is named by ``issues``.
"""
from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from ..book import catalogs
from . import messages

PRINT_CALLS = {"print"}
PLOT_CALLS = {"set_xlabel", "set_ylabel", "set_title", "xlabel", "ylabel", "title", "suptitle", "text", "annotate",
              "legend", "set_label"}
PLOT_KEYWORDS = {"label", "xlabel", "ylabel", "title"}
PLOT_LABELS = False  # see the docstring: no CJK font in a learner's matplotlib yet
PREFIX = re.compile(r"^([A-Za-z]*)('''|\"\"\"|'|\")(.*)\2$", re.S)
ENGLISH_PHRASE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
FIELD = re.compile(r"\{[^{}]*\}")
PRAGMA = re.compile(r"(?:noqa|type:|pragma|fmt:|pylint:|isort:)")  # a comment for the tools, not for the reader


@dataclass(frozen=True)
class Piece:
    """A translatable piece of a cell: its character offsets, what stays around it, and its English text."""
    start: int
    end: int
    before: str  # "# " of a comment, the prefix and opening quote of a string
    text: str
    after: str   # the closing quote of a string, "" for a comment


def translatable(cell: dict) -> bool:
    """A code cell whose words may be translated: one nbgrader does not manage."""
    return cell.get("cell_type") == "code" and not (cell.get("metadata") or {}).get("nbgrader")


def _selected(tree: ast.AST, plot: bool | None = None) -> list[ast.expr]:
    """The string-literal nodes of ``tree`` that the rule makes translatable (``plot``: PLOT_LABELS's value)."""
    plot = PLOT_LABELS if plot is None else plot
    calls, keywords = PRINT_CALLS | (PLOT_CALLS if plot else set()), PLOT_KEYWORDS if plot else set()
    found: list[ast.expr] = []
    is_text = lambda node: isinstance(node, ast.JoinedStr) or (  # noqa: E731
        isinstance(node, ast.Constant) and isinstance(node.value, str))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in calls:
                found += [arg for arg in node.args if is_text(arg)]
            found += [kw.value for kw in node.keywords if kw.arg in keywords and is_text(kw.value)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and is_text(body[0].value):
                found.append(body[0].value)
    return found


def _offsets(source: str) -> list[int]:
    """The character offset of each line's start (1-based lines: index 0 is unused)."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def _tokens(source: str) -> list[tuple[str, tuple[int, int], tuple[int, int], str]]:
    """(kind, start, end, text) of the comments and string literals (an f-string whole, in Python 3.12 too)."""
    out, depth, start = [], 0, None
    fstart, fend = getattr(tokenize, "FSTRING_START", None), getattr(tokenize, "FSTRING_END", None)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if fstart is not None and tok.type == fstart:
            depth += 1
            start = tok.start if depth == 1 else start
        elif fend is not None and tok.type == fend:
            depth -= 1
            if depth == 0:
                out.append(("string", start, tok.end, ""))
        elif depth == 0 and tok.type in (tokenize.COMMENT, tokenize.STRING):
            out.append(("comment" if tok.type == tokenize.COMMENT else "string", tok.start, tok.end, tok.string))
    return out


def pieces(source: str, plot: bool | None = None) -> list[Piece]:
    """The translatable pieces of one cell's source, in order; [] for a cell that does not parse."""
    try:
        tree, toks = ast.parse(source), _tokens(source)
    except (SyntaxError, tokenize.TokenError):
        return []
    lines, starts = source.splitlines(keepends=True), _offsets(source)

    def at(row: int, col_bytes: int) -> int:  # ast columns count UTF-8 bytes
        return starts[row] + len(lines[row - 1].encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))

    spans = [(at(n.lineno, n.col_offset), at(n.end_lineno or n.lineno, n.end_col_offset or 0)) for n in _selected(tree, plot)]
    found = []
    for kind, (r0, c0), (r1, c1), _ in toks:
        start, end = starts[r0] + c0, starts[r1] + c1
        text = source[start:end]
        if kind == "comment":
            mark = re.match(r"#+\s*", text)
            assert mark is not None
            if text[mark.end():].strip() and not PRAGMA.match(text[mark.end():]):
                found.append(Piece(start, end, mark.group(0), text[mark.end():], ""))
        elif any(a <= start and end <= b for a, b in spans):
            match = PREFIX.match(text)
            if match and "b" not in match[1].lower() and match[3].strip():
                found.append(Piece(start, end, match[1] + match[2], match[3], match[2]))
    return found


def units(notebook: dict, plot: bool | None = None) -> list[str]:
    """The English texts to translate in a notebook's code cells, each once, in order (``plot``: as _selected)."""
    seen: dict[str, None] = {}
    for cell in notebook.get("cells", []):
        if translatable(cell):
            seen.update((p.text, None) for p in pieces(_source(cell), plot))
    return list(seen)


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def translate_source(source: str, catalog: dict[str, str]) -> str:
    """``source`` with each piece that ``catalog`` translates replaced (a piece it lacks stays English)."""
    out = source
    for piece in reversed(pieces(source)):
        if catalog.get(piece.text):
            out = out[:piece.start] + piece.before + catalog[piece.text] + piece.after + out[piece.end:]
    return out


class _Blank(ast.NodeTransformer):
    """Blanks the translatable strings: their text goes, an f-string's fields stay."""

    def __init__(self, chosen: set[int]) -> None:
        self.chosen = chosen

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(value="") if id(node) in self.chosen else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        if id(node) in self.chosen:
            node.values = [v for v in node.values if not isinstance(v, ast.Constant)]
        return self.generic_visit(node)


def skeleton(source: str) -> str:
    """The cell's code without what may be translated: its AST, translatable strings blanked, comments gone."""
    tree = ast.parse(source)
    chosen = {id(n) for n in _selected(tree)}
    return ast.dump(_Blank(chosen).visit(tree), include_attributes=False)


def issues(en: str, translated: str) -> list[str]:
    """What ``translated`` breaks of the English unit ``en``."""
    found = [f"{{fields}} changed: {FIELD.findall(translated)}, expected {FIELD.findall(en)} (same order)"] \
        if FIELD.findall(en) != FIELD.findall(translated) else []
    numbers = lambda t: sorted(NUMBER.findall(FIELD.sub(" ", t)))  # noqa: E731
    if numbers(en) != numbers(translated):
        found.append(f"numbers changed: {numbers(translated)}, expected {numbers(en)}")
    if "\n" in translated and "\n" not in en:
        found.append("a line break: a comment or a one-line string stays on one line")
    if ENGLISH_PHRASE.search(FIELD.sub(" ", en)) and not re.search(catalogs.CJK, translated):
        found.append("still English: no Chinese in the translation")
    lint = [i for i in messages.issues(FIELD.sub("{x}", en), FIELD.sub("{x}", translated)) if not i.startswith("fields")]
    terms = catalogs.terms(en, translated, with_list=True)
    return found + lint + [t for t in terms if t not in lint]


def path(solutions: Path, lang: str, name: str) -> Path:
    """The code catalog of notebook ``name`` in ``lang``: solutions/locale/<lang>/code/<name>.json."""
    return solutions / "locale" / lang / "code" / f"{name}.json"


def load(file: Path) -> dict[str, str]:
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


def problems(notebook: dict, catalog: dict[str, str]) -> list[str]:
    """Untranslated, stale and broken code units of one notebook, and a cell whose code a translation changed."""
    wanted, known = units(notebook), units(notebook, plot=True)  # known: with the plot labels, kept for PLOT_LABELS
    found = [f"code untranslated: {en!r}" for en in wanted if not catalog.get(en)]
    found += [f"code stale (its English is gone): {en!r}" for en in catalog if en not in known]
    found += [f"code {en!r}: {issue}" for en in known if catalog.get(en) for issue in issues(en, catalog[en])]
    for cell in notebook.get("cells", []):
        if translatable(cell) and pieces(_source(cell)):
            source = _source(cell)
            try:
                if skeleton(translate_source(source, catalog)) != skeleton(source):
                    found.append(f"code cell {cell.get('id')!r}: the translation changes the code")
            except SyntaxError as err:
                found.append(f"code cell {cell.get('id')!r}: the translation does not parse ({err.msg})")
    return found


def translate_cells(notebook: dict, catalog: dict[str, str]) -> None:
    """Translate, in place, the comments and prose strings of ``notebook``'s code cells that nbgrader leaves alone."""
    for cell in notebook.get("cells", []):
        if translatable(cell):
            source = translate_source(_source(cell), catalog)
            cell["source"] = source.splitlines(keepends=True) if isinstance(cell.get("source"), list) else source
