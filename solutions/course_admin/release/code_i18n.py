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

``PLOT_LABELS`` is on: matplotlib's default font, DejaVu Sans, has no Chinese (it draws a box and warns "Glyph …
missing" for each character), so the learner's package ships a CJK font for the figures,
``course_lib/provided/fonts/course-cjk.ttf``, and the notebooks' figure cells call
``course_lib.provided.plots.use_cjk_font()`` (in every edition: the same code). That font is the book's (Noto
Sans SC, book/cjk_font.py) cut to the CJK characters the figures draw (``drawn``: those of the translated plot
labels, and the common CJK punctuation; matplotlib draws the others with its own font); ``write_font`` makes it
again after a label changes
(``python -m course_admin.release.notebook_i18n font zh_CN``), and solutions/tests/release/test_plot_font.py fails
while a label has a character the font lacks.

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

from course_lib.provided import plots
from course_lib.provided.layout import Layout

from ..book import catalogs, cjk_font
from . import messages

PRINT_CALLS = {"print"}
PLOT_CALLS = {"set_xlabel", "set_ylabel", "set_title", "xlabel", "ylabel", "title", "suptitle", "text", "annotate",
              "legend", "set_label"}
PLOT_KEYWORDS = {"label", "xlabel", "ylabel", "title"}
PLOT_LABELS = True  # see the docstring: the learner's package has a CJK font for matplotlib (provided/plots.py)
PREFIX = re.compile(r"^([A-Za-z]*)('''|\"\"\"|'|\")(.*)\2$", re.S)
ENGLISH_PHRASE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
FIELD = re.compile(r"\{[^{}]*\}")
FONT_FAMILY = "Course CJK Labels"  # the figures' font (provided/plots.py): a family of its own, not the book's
FONT_EXTRA = "，。、：；？！（）《》"  # the common CJK punctuation, used in a label or not
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


def _selected(tree: ast.AST, plot: bool | None = None, prose: bool = True) -> list[ast.expr]:
    """The string-literal nodes of ``tree`` that the rule makes translatable (``plot``: PLOT_LABELS's value;
    ``prose`` False: the plot labels only, no printed line or docstring)."""
    plot = PLOT_LABELS if plot is None else plot
    calls = (PRINT_CALLS if prose else set()) | (PLOT_CALLS if plot else set())
    keywords = PLOT_KEYWORDS if plot else set()
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
        elif prose and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
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


def pieces(source: str, plot: bool | None = None, prose: bool = True) -> list[Piece]:
    """The translatable pieces of one cell's source, in order; [] for a cell that does not parse (``plot``,
    ``prose``: as _selected; without prose, no comment either)."""
    try:
        tree, toks = ast.parse(source), _tokens(source)
    except (SyntaxError, tokenize.TokenError):
        return []
    lines, starts = source.splitlines(keepends=True), _offsets(source)

    def at(row: int, col_bytes: int) -> int:  # ast columns count UTF-8 bytes
        return starts[row] + len(lines[row - 1].encode("utf-8")[:col_bytes].decode("utf-8", "ignore"))

    spans = [(at(n.lineno, n.col_offset), at(n.end_lineno or n.lineno, n.end_col_offset or 0))
             for n in _selected(tree, plot, prose)]
    found = []
    for kind, (r0, c0), (r1, c1), _ in toks:
        start, end = starts[r0] + c0, starts[r1] + c1
        text = source[start:end]
        if kind == "comment":
            mark = re.match(r"#+\s*", text)
            assert mark is not None
            if prose and text[mark.end():].strip() and not PRAGMA.match(text[mark.end():]):
                found.append(Piece(start, end, mark.group(0), text[mark.end():], ""))
        elif any(a <= start and end <= b for a, b in spans):
            match = PREFIX.match(text)
            if match and "b" not in match[1].lower() and match[3].strip():
                found.append(Piece(start, end, match[1] + match[2], match[3], match[2]))
    return found


def units(notebook: dict, plot: bool | None = None, prose: bool = True) -> list[str]:
    """The English texts to translate in a notebook's code cells, each once, in order (``plot``, ``prose``: as
    _selected; ``plot=True, prose=False``: the texts its figures draw)."""
    seen: dict[str, None] = {}
    for cell in notebook.get("cells", []):
        if translatable(cell):
            seen.update((p.text, None) for p in pieces(_source(cell), plot, prose))
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
    wanted, known = units(notebook), units(notebook, plot=True)  # known: with the plot labels, even with PLOT_LABELS off
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


# ---------------------------------------------------------------- the figures' font (course_lib/provided/fonts/)
def drawn(layout: Layout, langs: list[str]) -> set[str]:
    """The CJK characters the exercise notebooks' figures draw in ``langs`` (cjk_font.CJK: what DejaVu Sans, the
    font before ours, lacks): those of their plot labels' translations, less the {fields}, and FONT_EXTRA."""
    found = set(FONT_EXTRA)
    for source in layout.exercise_sources():
        notebook = json.loads((source / f"{source.name}.ipynb").read_text(encoding="utf-8"))
        for lang in langs:
            catalog = load(path(layout.solutions, lang, source.name))
            found |= {c for en in units(notebook, plot=True, prose=False)
                      for c in cjk_font.CJK.findall(FIELD.sub("", catalog.get(en) or en))}
    return found


def font_path(layout: Layout) -> Path:
    """The figures' font in ``layout``'s tree: course_lib/provided/fonts/course-cjk.ttf."""
    return layout.course_lib / "provided" / "fonts" / plots.FONT.name


def write_font(layout: Layout, langs: list[str], source: Path = cjk_font.FONT) -> tuple[int, set[str]]:
    """Cut ``source`` (the book's font) to the characters ``drawn`` in ``langs`` and write it, with its licence,
    where plots.py reads it (TrueType, the family FONT_FAMILY, the same bytes for the same input). Returns the
    number of characters it holds and those ``source`` lacks."""
    from fontTools import subset as ft_subset
    from fontTools.ttLib import TTFont

    chars, font = drawn(layout, langs), TTFont(source, recalcTimestamp=False)
    cmap = font.getBestCmap()
    options = ft_subset.Options()
    options.flavor, options.layout_features, options.name_IDs, options.notdef_outline = None, ["*"], ["*"], True
    subsetter = ft_subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in chars if ord(c) in cmap))
    subsetter.subset(font)
    for record in font["name"].names:  # a subset is another font: a name of its own (the OFL asks as much)
        if record.nameID in (1, 4, 16):
            record.string = FONT_FAMILY
        elif record.nameID == 6:
            record.string = FONT_FAMILY.replace(" ", "")
    target = font_path(layout)
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(target)
    (target.parent / "OFL.txt").write_bytes((source.parent / "OFL.txt").read_bytes())
    return len(font.getBestCmap()), {c for c in chars if ord(c) not in cmap}


def font_lacks(layout: Layout, langs: list[str]) -> set[str]:
    """The characters the figures draw in ``langs`` that the shipped font has no glyph for."""
    from fontTools.ttLib import TTFont

    held = {chr(u) for u in TTFont(font_path(layout)).getBestCmap()}
    return drawn(layout, langs) - held
