"""`course release [--check]`: generate what learners receive from solutions/, the one source of truth.

    solutions/course_ref/<module>.py         -> course_lib/<module>.py       (stub: solution blocks raise; stubs.py)
    solutions/source/chNN_<name>/            -> exercises/chNN_<name>/       (nbgrader generate_assignment)
    solutions/locale/<lang>/chNN_<name>.json -> solutions/source_<lang>/chNN_<name>/ -> exercises_<lang>/chNN_<name>/

Each source notebook is also released in every language of notebook_i18n.EDITIONS (zh_CN): its markdown cells
replaced by their translations and their code cells' comments and printed words too (code_i18n.py: the same cells,
ids, grade ids, points and code), filled in that language, and given to nbgrader in the same way, with that
language's placeholder in the written answers (preflight.ANSWER_PLACEHOLDER: 在此作答). solutions/source_<lang>/ and exercises_<lang>/ are that language's nbgrader
source and release folders (nbgrader_config.py takes them when COURSE_LANG=<lang>). A notebook whose translation is not in sync
with its English (a cell untranslated or stale) has no new edition: `course release` says so and leaves its
files alone, and `--check` fails on it.

Before nbgrader runs, the source notebook's generated blocks (what is graded and its points, from the
spec, the hidden cases and the graded cells; chapter 08's capstone times) and the points of its written
questions' headings are rewritten in place (notebook_facts.py): the numbers a learner reads are never typed.
A source folder that holds anything but its notebook is refused (refuse_extra_files): nbgrader would
release the file and, in autograde, copy it over a learner's own.

A stub keeps the solution module's docstrings and argument checks; each solution block becomes a
`raise NotImplementedError` naming the chapter, the function and the exercise (see stubs.py).

nbgrader runs in a temporary course directory, one process a language (exercises.py), with no gradebook and no
Jupyter configuration (neither the repository's nbgrader_config.py nor the user's), so its output depends only
on solutions/ and is the same, byte for byte, on every run.

`--check` generates everything in a temporary directory, compares it with the tree, lists the stale
files and exits 1 (0 when in sync); it never writes to the tree.
"""
from __future__ import annotations

import argparse
import filecmp
import fnmatch
import json
import shutil
import sys
import tempfile
from pathlib import Path

from course_lib.provided import i18n
from course_lib.provided.layout import EXERCISE_RE, LAYOUT, Layout
from course_lib.provided.preflight import ANSWER_PLACEHOLDER

from ..intake.answers import auto_graded
from .learner_tree import export_learner_tree
from . import notebook_i18n, stub_i18n
from .notebook_facts import fill, filled_source
from .exercises import IGNORE, NBGRADER_IGNORE, files_under as _files, generate_exercises
from .stubs import ReleaseError, make_stub


# ------------------------------------------------------------------ build, write, compare
def refuse_auto_graded(layout: Layout, source: Path) -> None:
    """A source notebook's graded cells are written answers only: an automatically graded code cell
    could only be scored by running the learner's notebook, where the learner's code decides."""
    for notebook in sorted(source.glob("*.ipynb")):
        try:
            found = auto_graded(json.loads(notebook.read_text(encoding="utf-8")))
        except ValueError as err:
            raise ReleaseError(f"{layout.rel(notebook)}: not valid JSON ({err})") from None
        if found:
            raise ReleaseError(f"{layout.rel(notebook)}: automatically graded cell(s) {', '.join(found)}. Code "
                               "points come from `course grade` (the learner's course_lib in a sandbox); make "
                               "these cells self-checks (nbgrader: read-only, not graded)")


def refuse_extra_files(layout: Layout, source: Path) -> None:
    """A source folder holds its notebook and nothing else (but what nbgrader ignores by default): nbgrader
    copies every other file into the release, and autograde copies it over the learner's submitted file of
    the same name, so a source file could overwrite a learner's code."""
    extra = sorted(path for path in source.iterdir()
                   if path.name != f"{source.name}.ipynb" and not any(fnmatch.fnmatch(path.name, pattern)
                                                                      for pattern in NBGRADER_IGNORE))
    if extra:
        raise ReleaseError(f"{layout.rel(extra[0])}: a source folder holds only its notebook ({source.name}.ipynb); "
                           f"nbgrader would release this file and, in autograde, copy it over a learner's own. "
                           "Move it out of the folder (code belongs in solutions/course_ref/) or delete it"
                           + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))


def edition_folders(lang: str, name: str) -> tuple[str, str]:
    """The source and release folders, relative to the repository, of notebook ``name``'s edition in ``lang``."""
    return f"solutions/source_{lang}/{name}", f"exercises_{lang}/{name}"


def build_edition(layout: Layout, source: Path, out: Path, lang: str) -> tuple[Path, Path]:
    """The source notebook of ``source``'s edition in ``lang``, written under ``out``: (its folder, the folder its
    release goes to). Raises ReleaseError when its translation is not in sync (notebook_i18n.translate)."""
    notebook_path = source / f"{source.name}.ipynb"
    english = json.loads(notebook_path.read_text(encoding="utf-8"))
    catalog = notebook_i18n.load(notebook_i18n.catalog_path(layout, lang, source.name))
    where = layout.rel(notebook_i18n.catalog_path(layout, lang, source.name))
    translated = notebook_i18n.translate(english, catalog, lang, where)
    match = EXERCISE_RE.fullmatch(source.name)
    assert match is not None, source
    fill(layout, match.group(1), translated, where, lang)
    source_rel, release_rel = edition_folders(lang, source.name)
    target = out / source_rel / notebook_path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as f:
        f.write(json.dumps(translated, indent=1, ensure_ascii=False) + "\n")
    return target.parent, out / release_rel


def build(layout: Layout, out: Path, behind: dict[str, str] | None = None) -> dict[str, Path]:
    """Generate every learner file under ``out``; return {path relative to the repository: file}. An edition
    whose translation is not in sync is left out and named in ``behind`` ({folder: why}, each of its folders)."""
    generated: dict[str, Path] = {}
    for solution in layout.reference_modules():
        rel = f"course_lib/{solution.name}"
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as f:
            f.write(make_stub(layout, solution))
        generated[rel] = target
    batches: dict[str, dict[Path, Path]] = {lang: {} for lang in ("en", *notebook_i18n.EDITIONS)}
    for source in layout.exercise_sources():
        refuse_extra_files(layout, source)
        refuse_auto_graded(layout, source)
        filled = out / "solutions" / "source" / source.name
        shutil.copytree(source, filled, ignore=shutil.ignore_patterns(*IGNORE))
        for notebook in sorted(source.glob("*.ipynb")):
            with open(filled / notebook.name, "w", encoding="utf-8", newline="") as f:
                f.write(filled_source(layout, notebook))
            generated[f"solutions/source/{source.name}/{notebook.name}"] = filled / notebook.name
        batches["en"][filled] = out / "exercises" / source.name
        for lang in notebook_i18n.EDITIONS:
            try:
                edition, release_to = build_edition(layout, source, out, lang)
            except ReleaseError as err:
                if behind is None:
                    raise
                for folder in edition_folders(lang, source.name):
                    behind[folder] = str(err)
                continue
            batches[lang][edition] = release_to
            generated[f"{edition_folders(lang, source.name)[0]}/{source.name}.ipynb"] = edition / f"{source.name}.ipynb"
    generate_exercises(list(batches.values()), [ANSWER_PLACEHOLDER[lang] for lang in batches])
    for batch in batches.values():
        for dest in batch.values():
            rel_dest = dest.relative_to(out).as_posix()
            generated.update({f"{rel_dest}/{rel}": path for rel, path in _files(dest).items()})
    return generated


def managed_in_tree(layout: Layout) -> dict[str, Path]:
    """The files of the tree that `course release` writes: stubs, source notebooks and exercise folders."""
    tree: dict[str, Path] = {}
    for source in layout.exercise_sources():
        tree.update({f"solutions/source/{source.name}/{nb.name}": nb for nb in sorted(source.glob("*.ipynb"))})
    for stub in sorted((layout.root / "course_lib").glob("*.py")):
        if stub.name != "__init__.py":
            tree[f"course_lib/{stub.name}"] = stub
    for released in ["exercises", *(folder for lang in notebook_i18n.EDITIONS for folder in
                                    (f"exercises_{lang}", f"solutions/source_{lang}"))]:
        folder_of = layout.root / released
        if folder_of.is_dir():
            for folder in sorted(p for p in folder_of.iterdir() if p.is_dir() and EXERCISE_RE.fullmatch(p.name)):
                tree.update({f"{released}/{folder.name}/{rel}": path for rel, path in _files(folder).items()})
    return tree


def _folder(rel: str) -> str:
    """The exercise folder a managed file is in (exercises/chNN_x, exercises_zh_CN/chNN_x, ...), or its folder."""
    parts = rel.split("/")
    at = next((i for i, part in enumerate(parts[:-1]) if EXERCISE_RE.fullmatch(part)), len(parts) - 2)
    return "/".join(parts[:at + 1])


def differences(layout: Layout, generated: dict[str, Path], behind: dict[str, str] | None = None) -> list[str]:
    """One line per file of the tree that differs from what solutions/ generates, and per edition behind."""
    tree = {rel: path for rel, path in managed_in_tree(layout).items() if _folder(rel) not in (behind or {})}
    problems = [f"not in sync with its English, so not generated: {folder}/ ({why.splitlines()[0]})"
                for folder, why in sorted((behind or {}).items()) if folder.startswith("exercises_")]
    for rel in sorted(set(generated) | set(tree)):
        if rel not in tree:
            problems.append(f"missing: {rel}")
        elif rel not in generated:
            problems.append(f"not generated from solutions/ (delete it, or add its source): {rel}")
        elif not filecmp.cmp(generated[rel], tree[rel], shallow=False):
            problems.append(f"stale: {rel}")
    return problems


def write(layout: Layout, generated: dict[str, Path], behind: dict[str, str] | None = None) -> list[str]:
    """Copy the generated files into the tree; remove stale files from regenerated exercise folders; leave the
    folders of an edition ``behind`` as they are."""
    changes = []
    for rel, path in sorted(generated.items()):
        target = layout.root / rel
        if target.is_file() and filecmp.cmp(path, target, shallow=False):
            continue
        changes.append(("updated: " if target.exists() else "created: ") + rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    regenerated = {_folder(rel) for rel in generated if rel.startswith("exercises") or "/source_" in rel}
    for rel, path in managed_in_tree(layout).items():
        if rel in generated or _folder(rel) in (behind or {}):
            continue
        if _folder(rel) in regenerated:
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
    parser.add_argument("--root", type=Path, default=LAYOUT.root,
                        help="the repository to work on (default: this checkout)")
    parser.add_argument("--learner-tree", type=Path, metavar="DIR",
                        help="after releasing, copy what learners receive (everything but the instructor's "
                             "files) into DIR, a new folder, ready to zip or push as the learners' repository")
    parser.add_argument("--book-url", metavar="URL",
                        help="with --learner-tree: where the book is published; the learner README links it and "
                             "each chapter's page (without it, the README says the instructor gives the address)")
    parser.add_argument("--lang", default="en", metavar="LANG",
                        help="with --learner-tree: the learners' language, en (default) or zh_CN: the tree's README, "
                             "exercise notebooks, and what course check, check() and make submit say to them")
    args = parser.parse_args(argv)
    try:
        args.lang = i18n.normalise(args.lang)
    except ValueError as err:
        parser.error(str(err))
    if args.lang != "en" and args.learner_tree is None:
        parser.error("--lang is the learner tree's language (--learner-tree DIR); the exercise notebooks are "
                     f"released in English and in {', '.join(notebook_i18n.EDITIONS)} at every release (exercises_<lang>/)")
    layout = Layout(args.root.resolve())
    if args.learner_tree is not None and args.learner_tree.exists() and (not args.learner_tree.is_dir()
                                                                         or any(args.learner_tree.iterdir())):
        print(f"course release: --learner-tree: {args.learner_tree} exists and is not empty; give a new folder",
              file=sys.stderr)  # said before the release runs, as export_learner_tree would say it after
        return 2
    try:
        with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
            behind: dict[str, str] = {}
            generated = build(layout, Path(tmp), behind)
            editions = sum(r.startswith("exercises_") and r.endswith(".ipynb") for r in generated)
            summary = (f"{sum(r.startswith('course_lib/') for r in generated)} stub(s), "
                       f"{len(layout.exercise_sources())} exercise(s), {editions} translated exercise(s) "
                       f"({', '.join(notebook_i18n.EDITIONS)})")
            if args.check:
                problems = differences(layout, generated, behind)
                if problems:
                    print(f"course release --check: {len(problems)} file(s) out of sync with solutions/:")
                    for line in problems:
                        print(f"  {line}")
                    print("Run `course release` (or `make release`) and commit the result.")
                    return 1
                print(f"course release --check: in sync ({summary})")
                return 0
            changes = write(layout, generated, behind)
    except ReleaseError as err:
        print(f"course release: {err}", file=sys.stderr)
        return 2
    for line in changes:
        print(f"  {line}")
    for folder, why in sorted(behind.items()):
        if folder.startswith("exercises_"):
            print(f"course release: WARNING: {folder}/ not regenerated, its translation is behind the English: {why}",
                  file=sys.stderr)
    for lang in notebook_i18n.EDITIONS:
        if (behind_stubs := stub_i18n.warning(lang, layout)) is not None:
            print(f"course release: WARNING: {behind_stubs}", file=sys.stderr)
    changed = sum(not line.startswith("left alone") for line in changes)
    print(f"course release: {summary} generated, {changed or 'no'} change(s) to the tree")
    if args.learner_tree is not None:
        try:
            files = export_learner_tree(layout.root, args.learner_tree, args.book_url, args.lang)
        except ReleaseError as err:
            print(f"course release: {err}", file=sys.stderr)
            return 2
        print(f"course release: learner tree with {len(files)} file(s) in {args.learner_tree}")
        if not args.book_url:
            print("course release: its README says the instructor gives the book's address; give --book-url URL "
                  "to link the book and each chapter's page")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
