"""`course submit chNN`: pack your chapter's notebook and your course_lib for the instructor.

    course submit ch02                       -> submissions/<you>_ch02.zip
    course submit ch02 --learner alice --format folder --out /some/dir
    course submit ch02 --notebook path/to/ch02_attention.ipynb
    course submit ch02 --into-assignment     (nbgrader: put the snapshot beside the notebook)

A submission holds:
    manifest.json            learner, chapter, created (UTC), sha256 of every file, Python and torch versions
    course_lib/*.py          a snapshot of your files (course_lib/provided/ is the course's and is left out)
    chNN_<name>.ipynb        the chapter's notebook

The instructor grades exactly this snapshot: what is in your course_lib when you run this command.

With nbgrader's exchange: `nbgrader submit` sends the whole assignment folder
(exercises/chNN_<name>/), the notebook *and the files beside it*. `course submit ch02 --into-assignment`
writes ``course_submission/`` (manifest.json and the course_lib snapshot) into that folder; then run
`nbgrader submit chNN_<name>` as usual. The instructor's `nbgrader collect` brings the folder back and
`course grade submitted/` finds the snapshot in it. (The snapshot lives in ``course_submission/`` so that
it never shadows your real course_lib when you run the notebook.)
"""
from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from .layout import LAYOUT, Layout, SpecError, chapter_number, modules_for


LEARNER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


class SubmitError(Exception):
    pass


def _chapter(chapter: str) -> str:
    try:
        return chapter_number(chapter)
    except ValueError as err:
        raise SubmitError(str(err)) from None


def default_notebook(number: str, root: Path = LAYOUT.root) -> Path:
    found = sorted((root / "exercises").glob(f"ch{number}_*/ch{number}_*.ipynb"))
    found = [p for p in found if ".ipynb_checkpoints" not in p.parts]
    if not found:
        raise SubmitError(f"no notebook for chapter {number} under {root / 'exercises'} "
                          f"(expected exercises/ch{number}_<name>/ch{number}_<name>.ipynb); "
                          "pass --notebook PATH, or --no-notebook to send course_lib only")
    return found[0]


def learner_files(root: Path = LAYOUT.root) -> list[Path]:
    package = root / "course_lib"
    if not (package / "__init__.py").is_file():
        raise SubmitError(f"no course_lib package at {package}: run this from your course folder")
    files = sorted(p for p in package.glob("*.py") if p.is_file() and not p.is_symlink()
                   and p.name != "__init__.py")
    return files


def _modules_for(number: str, root: Path) -> list[str]:
    """The files chapter ``number`` runs: its own and those of the chapters it builds on."""
    layout = Layout(root)
    if not layout.spec(number).is_file():
        return []
    try:
        return modules_for(number, layout)
    except SpecError as err:
        raise SubmitError(str(err)) from None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def build(number: str, learner: str, notebook: Path | None, dest: Path, root: Path = LAYOUT.root) -> dict:
    """Write the submission's files into the folder ``dest``; return the manifest."""
    files = learner_files(root)
    needed = _modules_for(number, root)
    missing = [m for m in needed if not (root / "course_lib" / m).is_file()]
    if missing:
        raise SubmitError(f"course_lib/{', course_lib/'.join(missing)} is missing: chapter {number} runs it "
                          "(its own modules and those of the chapters it builds on); restore it and submit again")
    if notebook is not None and not notebook.is_file():
        raise SubmitError(f"notebook not found: {notebook}")
    (dest / "course_lib").mkdir(parents=True, exist_ok=True)
    hashes = {}
    for f in files:
        shutil.copyfile(f, dest / "course_lib" / f.name)
        hashes[f"course_lib/{f.name}"] = _sha256(f)
    if notebook is not None:
        shutil.copyfile(notebook, dest / notebook.name)
        hashes[notebook.name] = _sha256(notebook)
    manifest = {
        "format": 1,
        "learner": learner,
        "chapter": number,
        "created": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "files": hashes,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "platform": platform.platform(terse=True),
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def _zip(folder: Path, target: Path) -> None:
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(folder).as_posix())
    tmp.replace(target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course submit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapter", help="the chapter to submit, e.g. ch02")
    parser.add_argument("--learner", help="your learner id (default: $COURSE_LEARNER or your user name)")
    parser.add_argument("--out", help="folder to write to (default: submissions/)")
    parser.add_argument("--notebook", help="the notebook to send (default: exercises/chNN_*/chNN_*.ipynb)")
    parser.add_argument("--no-notebook", action="store_true", help="send course_lib only")
    parser.add_argument("--format", choices=["zip", "folder", "both"], default="zip")
    parser.add_argument("--into-assignment", action="store_true",
                        help="write course_submission/ beside the notebook, for `nbgrader submit`")
    args = parser.parse_args(argv)
    try:
        number = _chapter(args.chapter)
        learner = args.learner or os.environ.get("COURSE_LEARNER") or getpass.getuser()
        if not LEARNER_RE.fullmatch(learner):
            raise SubmitError(f"learner id {learner!r}: use letters, digits and . _ @ + - (at most 64)")
        notebook = None
        if not args.no_notebook:
            notebook = Path(args.notebook).resolve() if args.notebook else default_notebook(number)
            if not notebook.is_file():
                raise SubmitError(f"notebook not found: {notebook}")
        if args.into_assignment:
            if notebook is None:
                raise SubmitError("--into-assignment needs the notebook (its folder is the assignment)")
            dest = notebook.parent / "course_submission"
            if dest.exists():
                shutil.rmtree(dest)
            build(number, learner, None, dest)
            print(f"wrote {dest} (manifest and course_lib snapshot); now run: nbgrader submit {notebook.parent.name}")
            return 0
        out = Path(args.out) if args.out else LAYOUT.root / "submissions"
        out.mkdir(parents=True, exist_ok=True)
        name = f"{learner}_ch{number}"
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / name
            build(number, learner, notebook, folder)
            if args.format in ("zip", "both"):
                _zip(folder, out / f"{name}.zip")
                print(f"wrote {out / (name + '.zip')}")
            if args.format in ("folder", "both"):
                target = out / name
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(folder, target)
                print(f"wrote {target}/")
    except SubmitError as err:
        print(f"course submit: {err}", file=sys.stderr)
        return 2
    return 0
