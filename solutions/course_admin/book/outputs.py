"""What a page's code prints, in the Chinese edition's language.

A page runs once for both editions (one execution cache), so what its code prints is English. The Chinese build
translates it as it renders the page, line by line, from the page's output catalog
``book/locale/zh_CN/outputs/<page>.json``: ``{template: translation}``. A template is one line of what a
``print`` call of the page's code writes, read from the code itself (``ast``), not from one run's numbers:

    print(f"largest difference from PyTorch: {gap:.1e}")   ->   "largest difference from PyTorch: {}"

Each ``{}`` stands for a value the call formats (literal braces are doubled, as in ``str.format``); the
translation holds the same values, in order (``{}``) or reordered (``{0}``, ``{1}``):
``"与 PyTorch 的最大差异：{}"``. An output line that a template matches exactly is written with its
translation and the values it printed; any other line (a tensor, a table's numbers) is left as printed.

A line with words to translate (catalogs.needs_translation) is a template; the page's catalog must translate
each, and nothing else: ``problems`` names a template without its translation, a translation no print of
the page writes any more (stale), one whose values do not match, or one that breaks the book's typography
or glossary (catalogs.py), and ``make book`` fails on any (editions.py), so a print cannot change without its
translation. A value a line prints is translated where the catalog holds it, whole: one of the page's own
worded strings (``page_strings``), such as a model's name in a loop or a mark, ``f"WRONG (want {iso})"``;
these entries are optional, and stale when the string is gone. A line that no print of the page writes (a
library's log) or whose words are data (a shape's names, a list of titles) stays as printed; the Chinese build
counts such lines (``LEFT``) and editions.py says so. What the course itself says to a learner is shown in each
language by running it once per language (book/_code/printed.py); this catalog then translates the page's words.

    .venv/bin/python -m course_admin.book.outputs todo 02_attention     # {template: ""} still to translate
    .venv/bin/python -m course_admin.book.outputs check                 # every translated page's problems
"""
from __future__ import annotations

import ast
import json
import re
import string
import sys
from pathlib import Path
from typing import Any

from course_lib.provided.layout import LAYOUT

from . import catalogs
from . import terms as term_list

ROOT = LAYOUT.root
FOLDER = "outputs"
MAGIC = re.compile(r"^\s*[%!].*$", re.MULTILINE)  # IPython's %magic and !shell lines: not Python
SKIPPED = {"remove-cell", "remove-output", "remove-stdout"}  # cells whose printed lines no reader sees
LEFT: dict[str, int] = {}  # Chinese build: per page, printed lines with words that no template matched


def catalog_path(page: str, lang: str = catalogs.LANGUAGE) -> Path:
    return catalogs.LOCALE / lang / FOLDER / f"{page.rsplit('/', 1)[-1]}.json"


def load(page: str, lang: str = catalogs.LANGUAGE) -> dict[str, str]:
    path = catalog_path(page, lang)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


# ---------------------------------------------------------------- templates, from the page's code
def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _piece(node: ast.expr) -> str:
    """One argument of ``print`` as template text: a string's words, each formatted value ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escape(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                out.append(_escape(str(value.value)))
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Constant) \
                    and value.conversion == -1 and (value.format_spec is None or all(
                        isinstance(v, ast.Constant) for v in value.format_spec.values)):  # f"{'ours ms':>9}"
                spec = "".join(str(v.value) for v in value.format_spec.values) if value.format_spec else ""
                out.append(_escape(format(value.value.value, spec)))
            else:
                out.append("{}")
        return "".join(out)
    return "{}"


def call_template(call: ast.Call) -> str | None:
    """What a ``print(...)`` call writes, as a template; None for a call that does not write to stdout plainly."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "print"):
        return None
    options = {k.arg: k.value for k in call.keywords}
    if "file" in options or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    sep, end = options.get("sep"), options.get("end")
    for node in (sep, end):
        if node is not None and not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return None
    joined = _escape(sep.value if sep is not None else " ").join(_piece(a) for a in call.args)
    return joined + _escape(end.value if end is not None else "\n")


def _literal(template: str) -> str:
    """The template's own text, its values left out."""
    return " ".join(lit for lit, *_ in string.Formatter().parse(template))


def wants_translation(template: str) -> bool:
    """A template line with words: the line without its values, as catalogs.needs_translation judges it."""
    return catalogs.needs_translation(_literal(template))


def _parsed(code: str) -> ast.Module | None:
    try:
        return ast.parse(MAGIC.sub("", code))
    except SyntaxError:
        return None


def _in_order(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` in the order of the source (``ast.walk`` goes breadth first)."""
    return sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))


def print_lines(code: str) -> list[str]:
    """Every template line the ``print`` calls of ``code`` write, in the order of the source, each once."""
    tree = _parsed(code)
    written = [call_template(n) for n in (_in_order(tree) if tree else ()) if isinstance(n, ast.Call)]
    return list(dict.fromkeys(line for w in written if w for line in w.split("\n") if line.strip()))


def code_templates(code: str) -> list[str]:
    """The worded template lines of every ``print`` in ``code``, in order, each once."""
    return [line for line in print_lines(code) if wants_translation(line)]


def code_strings(code: str) -> list[str]:
    """The worded one-line strings of ``code`` (f-strings as templates): values a print may write, such as
    the name of a model in a loop's list or a mark, ``"ok"`` or ``f"WRONG (want {iso})"``."""
    tree = _parsed(code)
    if tree is None:
        return []
    found: list[str] = []
    inside = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in ast.walk(node)
              if part is not node}  # an f-string's pieces: it counts whole
    for node in _in_order(tree):
        if id(node) in inside:
            continue
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            text = _piece(node)
            if "\n" not in text and text.strip() and wants_translation(text) and text not in found:
                found.append(text)
    return found


def _shown_code(page: str, root: Path) -> list[str]:
    """The code of the page's cells whose output a reader sees (``page``: e.g. ``02_attention``)."""
    from myst_nb.core.read import read_myst_markdown_notebook
    path = root / "book" / f"{page.rsplit('/', 1)[-1]}.md"
    notebook = read_myst_markdown_notebook(path.read_text(encoding="utf-8"), path=path)
    return [cell.source for cell in notebook.cells
            if cell.cell_type == "code" and not SKIPPED & set(cell.get("metadata", {}).get("tags", []))]


def page_templates(page: str, root: Path = ROOT) -> list[str]:
    """The worded template lines of the page's printing code: each must be translated."""
    return list(dict.fromkeys(t for code in _shown_code(page, root) for t in code_templates(code)))


def page_strings(page: str, root: Path = ROOT) -> list[str]:
    """What the page's catalog may translate besides its templates: the page's worded strings (values a line
    prints) and its print lines without words that still have text of their own, such as ``{} -> {}  {}``
    (so that the values they print can be translated; ``{} {}`` would match any line, and is not one)."""
    shown = _shown_code(page, root)
    lines = {t for code in shown for t in code_templates(code)}
    found = [s for code in shown for s in code_strings(code)]
    found += [line for code in shown for line in print_lines(code) if _literal(line).strip()]
    return list(dict.fromkeys(s for s in found if s not in lines))


# ---------------------------------------------------------------- the translation of printed lines
def fields(template: str) -> list[str | None]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def pattern(template: str) -> re.Pattern[str]:
    """A line the template writes, each value any text of the line."""
    return re.compile("".join(re.escape(lit) + ("(.*?)" if name is not None else "")
                              for lit, name, _, _ in string.Formatter().parse(template)))


class Lines:
    """The page's catalog, ready to translate printed lines (longest template first, so the more words the
    better a match). A value the line prints is translated too where it is, whole, a string of the catalog."""

    def __init__(self, catalog: dict[str, str]) -> None:
        chosen = sorted(((en, zh) for en, zh in catalog.items() if zh), key=lambda kv: -len(kv[0]))
        self.rules = [(pattern(en), zh) for en, zh in chosen]

    def _apply(self, text: str, values: bool) -> str | None:
        for regex, zh in self.rules:
            found = regex.fullmatch(text)
            if found:
                said = [self._value(g) if values else g for g in found.groups()]
                try:
                    return zh.format(*said)
                except (IndexError, KeyError, ValueError):  # a broken translation: problems() names it
                    return None
        return None

    def _value(self, text: str) -> str:
        """A printed value, translated where the catalog holds it whole (the padding a format gave it kept)."""
        core = text.strip()
        said = self._apply(core, False) if core else None
        return text if said is None else text[: len(text) - len(text.lstrip())] + said + text[len(text.rstrip()):]

    def line(self, text: str) -> str | None:
        """The line in the catalog's language; None where no template writes it."""
        return self._apply(text, True)

    def text(self, printed: str) -> tuple[str, int]:
        """(the printed text with every line a template writes translated, how many worded lines are left)."""
        out, left = [], 0
        for line in printed.split("\n"):
            said = self.line(line)
            left += said is None and _worded(line)
            out.append(line if said is None else said)
        return "\n".join(out), left


def _worded(line: str) -> bool:
    """A printed line with words (numbers, tensors and quoted values aside): one a reader may want translated."""
    return catalogs.needs_translation(re.sub(r"'[^']*'|tensor\(|\b(True|False|nan|inf|dtype|torch\.\w+)\b", " ", line))


# ---------------------------------------------------------------- the check
def problems(page: str, root: Path = ROOT, lang: str = catalogs.LANGUAGE) -> list[str]:
    """What keeps the page's printed lines from being shown in ``lang``; [] when they can be."""
    wanted, catalog = page_templates(page, root), load(page, lang)
    allowed = set(wanted) | set(page_strings(page, root))
    where = LAYOUT.rel(catalog_path(page, lang))
    found = [f"{where}: printed line not translated: {t!r}" for t in wanted if not catalog.get(t)]
    found += [f"{where}: stale, no print or string of the page writes {en!r} any more"
              for en in catalog if en not in allowed]
    for en, zh in catalog.items():
        if not zh or en not in allowed:
            continue
        n, mine = len(fields(en)), fields(zh)
        if not (mine == [""] * n or sorted(mine) == [str(i) for i in range(n)]):
            found.append(f"{where}: {en!r}: the translation must hold the {n} value(s) of the English, as {{}} "
                         f"in order or {{0}}, {{1}}, ... (it has {len(mine)}: {mine})")
            continue
        digits = zh.replace("{}", "0")  # a value beside Chinese wants its space, as a number does
        found += [f"{where}: {en[:50]!r}: {issue}" for issue in catalogs.typography(re.sub(r"\{\d+\}", "0", digits))
                  + catalogs.terms(en, zh, with_list=not term_list.pending(where))
                  + [f"lost {p!r}" for p in catalogs.markup_lost(en, zh)]]
    return found


def pages(root: Path = ROOT) -> list[str]:
    """The book's executed pages (e.g. ``02_attention``): those with code cells."""
    return sorted(p.stem for p in (root / "book").glob("*.md") if "{code-cell}" in p.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- Sphinx (the Chinese build)
def _translate(app: Any, doctree: Any, docname: str) -> None:
    from docutils import nodes
    language = app.config.language or "en"
    if language == "en" or docname not in catalogs.translated():
        return
    lines, left = Lines(load(docname, language)), 0
    for node in doctree.findall(nodes.literal_block):
        classes = set(node.get("classes", []))
        if "output" in classes and classes & {"stream", "text_plain"}:  # printed; or shown, as printed.py does
            said, missing = lines.text(node.astext())
            left += missing * ("stream" in classes)
            if said != node.astext():
                node.children = [nodes.Text(said)]
                node.rawsource = said
    LEFT[docname] = left


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-resolved", _translate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv: list[str] | None = None) -> int:
    from .figures import todo_or_check
    args = todo_or_check("course_admin.book.outputs", __doc__, argv)
    if args.action == "check":
        done = catalogs.translated()
        left = [p for page in pages() if f"book/{page}" in done for p in problems(page)]
        print("\n".join(left) or "every printed line of the translated pages translated")
        return 1 if left else 0
    catalog = load(args.page)
    print(json.dumps({t: "" for t in page_templates(args.page) if not catalog.get(t)}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
