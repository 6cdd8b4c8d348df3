"""`course release [--check]`: generate what learners receive from solutions/, the one source of truth.

    solutions/course_lib/<module>.py         -> course_lib/<module>.py       (stub: solution blocks raise)
    solutions/source/chNN_<name>/            -> exercises/chNN_<name>/       (nbgrader generate_assignment)

In a solution module, each block between a `### BEGIN SOLUTION` line and a `### END SOLUTION` line
(markers included) becomes one `raise NotImplementedError("Chapter NN: implement <function> in
course_lib/<module>.py (book chapter NN, exercises/chNN_<name>)")` at the block's indentation; the
chapter is the spec in tests/specs/ whose MODULES lists the module. Everything else (docstrings,
argument checks) is kept.

nbgrader runs in a temporary course directory with its own gradebook and no Jupyter configuration
(neither the repository's nbgrader_config.py nor the user's), so its output depends only on
solutions/ and is the same, byte for byte, on every run.

`--check` generates everything in a temporary directory, compares it with the tree, lists the stale
files and exits 1 (0 when in sync); it never writes to the tree.
"""
from __future__ import annotations

import argparse
import ast
import filecmp
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from course_lib.provided.loader import REPO_ROOT

EXERCISE_RE = re.compile(r"ch(\d\d)_\w+")
MARKER_RE = re.compile(r"^(?P<indent>[ \t]*)### (?P<which>BEGIN|END) SOLUTION[ \t]*$")
# Files never copied to or compared in exercises/ (nbgrader's CourseDirectory.ignore, plus editor junk).
IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".DS_Store", "*~"]


class ReleaseError(Exception):
    """A problem in solutions/ that stops the release; the message names the file and line."""


# ------------------------------------------------------------------ the layout of a repository
@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def solution_modules(self) -> list[Path]:
        return sorted(p for p in (self.root / "solutions" / "course_lib").glob("*.py") if p.name != "__init__.py")

    @property
    def exercise_sources(self) -> list[Path]:
        source = self.root / "solutions" / "source"
        if not source.is_dir():
            return []
        return sorted(p for p in source.iterdir() if p.is_dir() and EXERCISE_RE.fullmatch(p.name))

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


def _spec_constant(path: Path, name: str) -> object:
    """The literal value of ``NAME = ...`` in a spec file, read without importing the spec."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError as err:
                raise ReleaseError(f"{path}:{node.lineno}: {name} must be a literal") from err
    return None


def chapter_of(layout: Layout, module: str) -> str:
    """The chapter ('02') whose spec (tests/specs/chNN.py) lists ``module`` in MODULES."""
    owners = []
    for spec in sorted((layout.root / "tests" / "specs").glob("ch[0-9][0-9].py")):
        modules = _spec_constant(spec, "MODULES") or []
        if module in modules:
            owners.append(spec.stem[2:])
    if len(owners) != 1:
        found = "none does" if not owners else f"ch{', ch'.join(owners)} all do"
        raise ReleaseError(f"solutions/course_lib/{module}: exactly one tests/specs/chNN.py must list "
                           f"{module!r} in MODULES, but {found}")
    return owners[0]


def exercise_of(layout: Layout, chapter: str) -> str | None:
    """The exercise folder of a chapter ('ch02_attention'), if it has one."""
    names = [p.name for p in layout.exercise_sources if p.name.startswith(f"ch{chapter}_")]
    return names[0] if names else None


# ------------------------------------------------------------------ stubs from solution modules
HEADER = (
    "# {stub}: yours to fill in. Replace each `raise NotImplementedError(...)` with your code;\n"
    "# the docstrings say what to compute. Check your work with `course check ch{chapter}`.\n"
    "# Generated from {solution} by `course release`: instructors edit solutions/, never this file.\n"
)
HEADER_NOTHING_TO_DO = (
    "# {stub}: provided with the course; nothing to implement here.\n"
    "# Generated from {solution} by `course release`: instructors edit solutions/, never this file.\n"
)


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


def strip_solutions(text: str, filename: str, message: str | None = None, header: str = "") -> str:
    """Replace each solution block of a Python source by ``raise NotImplementedError(message)``.

    ``message`` may contain ``{function}``, filled with the name of the def that encloses the block.
    Raises ReleaseError (naming ``filename`` and the line) on unbalanced or nested markers, a marker
    that shares its line with code, or a block outside a function.
    """
    lines = text.splitlines(keepends=True)
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


def make_stub(layout: Layout, solution: Path) -> str:
    text = solution.read_text(encoding="utf-8")
    rel = layout.rel(solution)
    strip_solutions(text, rel)  # the markers are checked before anything else
    module = solution.name
    if not any(MARKER_RE.match(line) for line in text.splitlines()):
        header = HEADER_NOTHING_TO_DO.format(stub=f"course_lib/{module}", solution=rel)
        return strip_solutions(text, rel, None, header)  # nothing to implement: no chapter needed
    chapter = chapter_of(layout, module)
    exercise = exercise_of(layout, chapter)
    where = f"book chapter {chapter}" + (f", exercises/{exercise}" if exercise else "")
    message = f"Chapter {chapter}: implement {{function}} in course_lib/{module} ({where})"
    header = HEADER.format(stub=f"course_lib/{module}", chapter=chapter, solution=rel)
    return strip_solutions(text, rel, message, header)


# ------------------------------------------------------------------ exercises with nbgrader
def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORE)


def _files(folder: Path) -> dict[str, Path]:
    """Relative posix path -> file, for every file under ``folder`` not ignored."""
    found = {}
    if folder.is_dir():
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not _ignored(d))
            for name in sorted(filenames):
                if not _ignored(name):
                    path = Path(dirpath) / name
                    found[path.relative_to(folder).as_posix()] = path
    return found


def generate_exercise(source: Path, dest: Path) -> None:
    """Run nbgrader generate_assignment on one source folder and put the release in ``dest``."""
    name = source.name
    with tempfile.TemporaryDirectory(prefix="course-release-nbgrader-") as tmp:
        course = Path(tmp)
        shutil.copytree(source, course / "source" / name, ignore=shutil.ignore_patterns(*IGNORE))
        # nbgrader calls the `alembic` script by name: put this environment's scripts first on PATH.
        scripts = str(Path(sys.executable).parent)
        env = {**os.environ, "JUPYTER_NO_CONFIG": "1", "PYTHONHASHSEED": "0",
               "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
        command = [
            sys.executable, "-m", "nbgrader", "generate_assignment", name, "--force", "--log-level=ERROR",
            f"--CourseDirectory.root={course}",
            f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}",
        ]
        done = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True)
        released = course / "release" / name
        if done.returncode != 0 or not released.is_dir():
            raise ReleaseError(f"nbgrader generate_assignment {name} failed (exit {done.returncode}):\n"
                               f"{done.stdout}{done.stderr}".rstrip())
        for rel, path in _files(released).items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


# ------------------------------------------------------------------ build, write, compare
def build(layout: Layout, out: Path) -> dict[str, Path]:
    """Generate every learner file under ``out``; return {path relative to the repository: file}."""
    generated: dict[str, Path] = {}
    for solution in layout.solution_modules:
        rel = f"course_lib/{solution.name}"
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as f:
            f.write(make_stub(layout, solution))
        generated[rel] = target
    for source in layout.exercise_sources:
        dest = out / "exercises" / source.name
        generate_exercise(source, dest)
        generated.update({f"exercises/{source.name}/{rel}": path for rel, path in _files(dest).items()})
    return generated


def managed_in_tree(layout: Layout) -> dict[str, Path]:
    """The files of the tree that `course release` owns: stubs and exercise folders."""
    tree: dict[str, Path] = {}
    for stub in sorted((layout.root / "course_lib").glob("*.py")):
        if stub.name != "__init__.py":
            tree[f"course_lib/{stub.name}"] = stub
    exercises = layout.root / "exercises"
    if exercises.is_dir():
        for folder in sorted(p for p in exercises.iterdir() if p.is_dir() and EXERCISE_RE.fullmatch(p.name)):
            tree.update({f"exercises/{folder.name}/{rel}": path for rel, path in _files(folder).items()})
    return tree


def differences(layout: Layout, generated: dict[str, Path]) -> list[str]:
    """One line per file of the tree that differs from what solutions/ generates."""
    tree = managed_in_tree(layout)
    problems = []
    for rel in sorted(set(generated) | set(tree)):
        if rel not in tree:
            problems.append(f"missing: {rel}")
        elif rel not in generated:
            problems.append(f"not generated from solutions/ (delete it, or add its source): {rel}")
        elif not filecmp.cmp(generated[rel], tree[rel], shallow=False):
            problems.append(f"stale: {rel}")
    return problems


def write(layout: Layout, generated: dict[str, Path]) -> list[str]:
    """Copy the generated files into the tree; remove stale files from regenerated exercise folders."""
    changes = []
    for rel, path in sorted(generated.items()):
        target = layout.root / rel
        if target.is_file() and filecmp.cmp(path, target, shallow=False):
            continue
        changes.append(("updated: " if target.exists() else "created: ") + rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    regenerated = {rel.split("/")[1] for rel in generated if rel.startswith("exercises/")}
    for rel, path in managed_in_tree(layout).items():
        if rel in generated:
            continue
        if rel.startswith("exercises/") and rel.split("/")[1] in regenerated:
            path.unlink()
            changes.append(f"removed: {rel}")
        else:
            changes.append(f"left alone (no source in solutions/; delete it if it is obsolete): {rel}")
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare the tree with what solutions/ generates; exit 1 if stale, write nothing")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="the repository to work on (default: this checkout)")
    parser.add_argument("--learner-tree", type=Path, metavar="DIR",
                        help="after releasing, copy what learners receive (everything but the instructor's "
                             "files) into DIR, a new folder, ready to zip or push as the learners' repository")
    args = parser.parse_args(argv)
    layout = Layout(args.root.resolve())
    try:
        with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
            generated = build(layout, Path(tmp))
            summary = (f"{sum(r.startswith('course_lib/') for r in generated)} stub(s), "
                       f"{len(layout.exercise_sources)} exercise(s)")
            if args.check:
                problems = differences(layout, generated)
                if problems:
                    print(f"course release --check: {len(problems)} file(s) out of sync with solutions/:")
                    for line in problems:
                        print(f"  {line}")
                    print("Run `course release` (or `make release`) and commit the result.")
                    return 1
                print(f"course release --check: in sync ({summary})")
                return 0
            changes = write(layout, generated)
    except ReleaseError as err:
        print(f"course release: {err}", file=sys.stderr)
        return 2
    for line in changes:
        print(f"  {line}")
    changed = sum(not line.startswith("left alone") for line in changes)
    print(f"course release: {summary} generated, {changed or 'no'} change(s) to the tree")
    if args.learner_tree is not None:
        try:
            files = export_learner_tree(layout.root, args.learner_tree)
        except ReleaseError as err:
            print(f"course release: {err}", file=sys.stderr)
            return 2
        print(f"course release: learner tree with {len(files)} file(s) in {args.learner_tree}")
    return 0


# What learners never receive: the instructor's material, the project's own CI, and the book's sources
# (the book executes the reference implementation; learners read the published book instead).
INSTRUCTOR_ONLY = ("solutions/", ".ci/", "nbgrader_config.py", "book/", "_config.yml", "_toc.yml")


def learner_files(root: Path) -> list[str]:
    """Paths (relative, sorted) that learners receive: git's files outside INSTRUCTOR_ONLY."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as err:
        raise ReleaseError(f"--learner-tree needs a git checkout at {root} ({err})") from err
    return sorted(p for p in listed if p and not p.startswith(INSTRUCTOR_ONLY) and (root / p).is_file())


def export_learner_tree(root: Path, dest: Path) -> list[str]:
    """Copy the learner's files of ``root`` into the new folder ``dest``."""
    if dest.exists() and any(dest.iterdir()):
        raise ReleaseError(f"--learner-tree: {dest} exists and is not empty; give a new folder")
    files = learner_files(root)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return files


if __name__ == "__main__":
    raise SystemExit(main())
