"""Where the course's parts live, and the facts of a chapter, found by its number alone.

One module so that a path, the chapter-number pattern and the reading of a spec are written once;
the learner's commands, the book, the tests and the instructor's tools all import it.

    layout = Layout(REPO_ROOT)                   # or Layout(some_other_tree)
    layout.spec("02")                            # tests/specs/ch02.py
    facts = chapter_facts("03")                  # ChapterFacts(number="03", title=..., modules=[...], requires=["02"])
    modules_for("03")                            # ["attention.py", "multihead.py"]: its own and its prerequisites'

A spec's facts (``TITLE``, ``MODULES``, ``REQUIRES``) are read from its source as literals, without
importing it, so that ``course submit`` stays fast and a broken spec is reported, not executed.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CHAPTER_RE = re.compile(r"(?:ch)?0*(\d{1,2})")
EXERCISE_RE = re.compile(r"ch(\d\d)_\w+")
REFERENCE_PACKAGE = "course_ref"


def chapter_number(text: str | int) -> str:
    """'ch02', '02', '2' and 2 all mean '02'; anything else raises ValueError."""
    m = CHAPTER_RE.fullmatch(str(text).strip().lower())
    if not m:
        raise ValueError(f"not a chapter: {text!r}; write it as ch02")
    return f"{int(m.group(1)):02d}"


@dataclass(frozen=True)
class Layout:
    """The paths of one tree: the instructor's repository, a copy of it, or a learner's tree."""

    root: Path

    # ---------------------------------------------------------------- what learners receive
    @property
    def course_lib(self) -> Path:
        return self.root / "course_lib"

    @property
    def specs(self) -> Path:
        return self.root / "tests" / "specs"

    @property
    def outputs(self) -> Path:
        """Reference outputs of the public cases, tests/reference/chNN.pt."""
        return self.root / "tests" / "reference"

    @property
    def exercises(self) -> Path:
        return self.root / "exercises"

    # ---------------------------------------------------------------- the instructor's (solutions/)
    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def reference(self) -> Path:
        """The reference implementation, the package ``course_ref``."""
        return self.solutions / REFERENCE_PACKAGE

    @property
    def hidden(self) -> Path:
        return self.solutions / "hidden"

    @property
    def mistakes(self) -> Path:
        return self.solutions / "mistakes"

    @property
    def sources(self) -> Path:
        """nbgrader source notebooks, solutions/source/chNN_<name>/."""
        return self.solutions / "source"

    # ---------------------------------------------------------------- a chapter's parts by number
    def spec(self, number: str) -> Path:
        return self.specs / f"ch{number}.py"

    def spec_part(self, number: str, part: str) -> Path:
        return self.specs / f"ch{number}_{part}.py"

    def spec_files(self, number: str) -> list[Path]:
        """The chapter's spec and its parts (``spec_part``)."""
        return [self.spec(number), *sorted(self.specs.glob(f"ch{number}_*.py"))]

    def outputs_file(self, number: str) -> Path:
        return self.outputs / f"ch{number}.pt"

    def hidden_file(self, number: str) -> Path:
        return self.hidden / f"ch{number}.py"

    def mistakes_file(self, number: str) -> Path:
        return self.mistakes / f"ch{number}.py"

    def chapters(self) -> list[str]:
        """Chapter numbers that have checks (a spec), e.g. ['02', '03']."""
        return sorted(p.stem[2:] for p in self.specs.glob("ch[0-9][0-9].py"))

    def reference_modules(self) -> list[Path]:
        return sorted(p for p in self.reference.glob("*.py") if p.name != "__init__.py")

    def exercise_sources(self) -> list[Path]:
        if not self.sources.is_dir():
            return []
        return sorted(p for p in self.sources.iterdir() if p.is_dir() and EXERCISE_RE.fullmatch(p.name))

    def exercise_name(self, number: str) -> str | None:
        """The exercise folder of a chapter ('ch02_attention'), from its source or its release."""
        for folder in (self.sources, self.exercises):
            names = sorted(p.name for p in folder.glob(f"ch{number}_*") if p.is_dir()
                           and EXERCISE_RE.fullmatch(p.name)) if folder.is_dir() else []
            if names:
                return names[0]
        return None

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


LAYOUT = Layout(REPO_ROOT)


# ---------------------------------------------------------------- a chapter's facts, from its spec
class SpecError(ValueError):
    """A spec whose facts cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class ChapterFacts:
    number: str
    title: str
    modules: tuple[str, ...]    # the learner's files this chapter grades (course_lib/<module>)
    requires: tuple[str, ...]   # the chapters it builds on directly (their modules are imported)


def _literals(path: Path, source: bytes) -> dict[str, object]:
    """Top-level ``NAME = <literal>`` and ``NAME: type = <literal>`` assignments of a Python source."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as err:
        raise SpecError(f"{path}:{err.lineno}: not valid Python: {err.msg}") from None
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id.isupper():
                try:
                    found[target.id] = ast.literal_eval(value)
                except ValueError:
                    pass  # not a literal (CASES, PROBES, ...): not a fact
    return found


@lru_cache(maxsize=None)
def _facts(spec: Path, source: bytes) -> ChapterFacts:
    number = spec.stem[2:]
    values = _literals(spec, source)
    title, modules, requires = values.get("TITLE"), values.get("MODULES"), values.get("REQUIRES", [])
    if not isinstance(title, str) or not title:
        raise SpecError(f"{spec}: TITLE must be a string literal, e.g. TITLE = \"Attention\"")
    if not (isinstance(modules, list) and all(isinstance(m, str) and m.endswith(".py") for m in modules)):
        raise SpecError(f"{spec}: MODULES must be a list of file names, e.g. MODULES = [\"attention.py\"]")
    if not (isinstance(requires, list) and all(isinstance(r, str) for r in requires)):
        raise SpecError(f"{spec}: REQUIRES must be a list of chapter numbers, e.g. REQUIRES = [\"02\"]")
    return ChapterFacts(number, title, tuple(modules), tuple(chapter_number(r) for r in requires))


def chapter_facts(number: str | int, layout: Layout = LAYOUT) -> ChapterFacts:
    number = chapter_number(number)
    spec = layout.spec(number)
    if not spec.is_file():
        raise SpecError(f"chapter {number} has no spec ({layout.rel(spec)})")
    return _facts(spec, spec.read_bytes())


def prerequisites(number: str | int, layout: Layout = LAYOUT) -> list[str]:
    """Every chapter ``number`` builds on, directly or not, earliest first; a cycle is an error."""
    order: list[str] = []

    def visit(n: str, path: tuple[str, ...]) -> None:
        for r in chapter_facts(n, layout).requires:
            if r in path:
                raise SpecError(f"chapters {' -> '.join(path + (r,))} require each other in a cycle")
            if r not in order:
                visit(r, path + (r,))
                order.append(r)

    start = chapter_number(number)
    visit(start, (start,))
    return sorted(order)


def modules_for(number: str | int, layout: Layout = LAYOUT) -> list[str]:
    """The learner's files a chapter runs: its prerequisites' modules, then its own (no repeats)."""
    out: list[str] = []
    for n in [*prerequisites(number, layout), chapter_number(number)]:
        out += [m for m in chapter_facts(n, layout).modules if m not in out]
    return out


def owner_of(module: str, layout: Layout = LAYOUT) -> str:
    """The one chapter whose MODULES lists ``module`` (e.g. 'attention.py' -> '02')."""
    owners = [n for n in layout.chapters() if module in chapter_facts(n, layout).modules]
    if len(owners) != 1:
        found = "none does" if not owners else f"ch{', ch'.join(owners)} all do"
        raise SpecError(f"exactly one tests/specs/chNN.py must list {module!r} in MODULES, but {found}")
    return owners[0]
