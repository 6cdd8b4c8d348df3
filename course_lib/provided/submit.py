"""`course submit chNN` (or `make submit CH=NN`): pack your chapter's notebook and your course_lib (its --help is
``HELP``, in the learner's language)."""
from __future__ import annotations

import hashlib
import json
import platform
import shutil
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from . import preflight
from .capstone import handin
from .i18n import N_, _
from .layout import LAYOUT, Layout, SpecError, chapter_number, modules_for
from .parsers import Parser

HELP = N_("""`course submit chNN` (or `make submit CH=NN`): pack your chapter's notebook and your course_lib.

It first says who you are, runs the chapter's public checks and warns about stubs and empty written
answers (preflight.py); it never replaces an earlier submission without --force.

    course submit ch02                       -> submissions/<you>_ch02.zip
    course submit ch02 --learner alice --format folder --out /some/dir
    course submit ch02 --notebook path/to/ch02_attention.ipynb
    course submit ch02 --into-assignment     (nbgrader: put the snapshot beside the notebook)

A submission holds:
    manifest.json            learner, chapter, created (UTC), sha256 of every file, Python and torch versions
    course_lib/*.py          a snapshot of your files (course_lib/provided/ is the course's and is left out)
    chNN_<name>.ipynb        the chapter's notebook
    capstone/                chapter 08 only: your trained model (capstone/handin.py): the best fine-tuning run
                             under runs/ by valid accuracy, or the one given with --run DIR; --no-model leaves it out

The instructor grades exactly this snapshot: what is in your course_lib when you run this command.

With nbgrader's exchange: `nbgrader submit` sends the whole assignment folder
(exercises/chNN_<name>/), the notebook *and the files beside it*. `course submit ch02 --into-assignment`
writes ``course_submission/`` (manifest.json and the course_lib snapshot) into that folder; then run
`nbgrader submit chNN_<name>` as usual. The instructor's `nbgrader collect` brings the folder back and
`course grade submitted/` finds the snapshot in it. (The snapshot lives in ``course_submission/`` so that
it never shadows your real course_lib when you run the notebook.)
""")


class SubmitError(Exception):
    """Why nothing was packed; the message says what to do."""


def default_notebook(number: str, root: Path = LAYOUT.root) -> Path:
    found = sorted((root / "exercises").glob(f"ch{number}_*/ch{number}_*.ipynb"))
    found = [p for p in found if ".ipynb_checkpoints" not in p.parts]
    if not found:
        raise SubmitError(_("no notebook for chapter {number} under {folder} (expected {expected}); pass --notebook "
                            "PATH, or --no-notebook to send course_lib only").format(
            number=number, folder=root / "exercises", expected=f"exercises/ch{number}_<name>/ch{number}_<name>.ipynb"))
    return found[0]


def learner_files(root: Path = LAYOUT.root) -> list[Path]:
    package = root / "course_lib"
    if not (package / "__init__.py").is_file():
        raise SubmitError(_("no course_lib package at {folder}: run this from your course folder").format(folder=package))
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


def require_modules(number: str, root: Path = LAYOUT.root) -> None:
    """Raise SubmitError naming each file the chapter runs (its own and its prerequisites') that is missing."""
    missing = [m for m in _modules_for(number, root) if not (root / "course_lib" / m).is_file()]
    if missing:
        raise SubmitError(_("{files} is missing: chapter {number} runs it (its own modules and those of the chapters "
                            "it builds on); restore it and submit again").format(
            files=", ".join(f"course_lib/{m}" for m in missing), number=number))


def trained_run(number: str, run: str | None, no_model: bool, root: Path = LAYOUT.root) -> Path | None:
    """The fine-tuning run whose model chapter ``number`` hands in (None: not the capstone, or --no-model)."""
    if number != handin.CHAPTER or no_model:
        return None
    if run:
        return Path(run).resolve()
    found = handin.find_runs(root / "runs")
    if not found:
        raise SubmitError(_("no finished fine-tuning run under {folder}: chapter {number} hands in your trained "
                            "model. Train one (`course capstone finetune --model transformer --quick`), give its "
                            "folder with --run DIR, or hand in your code alone with --no-model (the trained-model "
                            "points are then 0)").format(folder=root / "runs", number=number))
    return found[0]


def build(number: str, learner: str, notebook: Path | None, dest: Path, root: Path = LAYOUT.root,
          model_run: Path | None = None) -> dict:
    """Write the submission's files into the folder ``dest`` (with the trained model of ``model_run``, packed
    by capstone/handin.py); return the manifest."""
    files = learner_files(root)
    require_modules(number, root)
    if notebook is not None and not notebook.is_file():
        raise SubmitError(_("notebook not found: {path}").format(path=notebook))
    (dest / "course_lib").mkdir(parents=True, exist_ok=True)
    hashes = {}
    if model_run is not None:
        try:
            packed = handin.pack(model_run, dest)
        except handin.HandInError as err:
            raise SubmitError(_("the trained model: {error}").format(error=err)) from None
        for f in sorted(packed.iterdir()):
            hashes[f"{handin.FOLDER}/{f.name}"] = _sha256(f)
        print(_("trained model: {run} ({size} MB of weights)").format(
            run=model_run, size=f"{(packed / handin.WEIGHTS).stat().st_size / 2 ** 20:.1f}"))
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


def _chapter_with_checks(text: str) -> str:
    ready = LAYOUT.chapters()
    try:
        number: str | None = chapter_number(text)
    except ValueError:
        number = None
    if number not in ready:
        raise SubmitError(_("{chapter} is not a chapter you can submit; chapters with checks: {available}").format(
            chapter=repr(text), available=", ".join("ch" + c for c in ready)))
    return number


def _learner(flag: str | None) -> str:
    try:
        learner, source = preflight.learner_id(flag)
    except preflight.PreflightError as err:
        raise SubmitError(str(err)) from None
    print(_("learner: {learner} ({source})").format(learner=learner, source=source))
    return learner


def _report(number: str, notebook: Path | None, quiet: bool) -> None:
    """The public score and what looks unfinished, printed before anything is packed."""
    if not quiet:
        earned, possible, failed = preflight.public_score(number)
        tail = _("all pass") if not failed else _("{failed} fail: `make check CH={number}` (or `course check "
                                                  "ch{number}`) says why").format(
            failed=failed, number=number)
        print(_("public checks of chapter {number}: {earned}/{possible} points ({tail}); your instructor also grades "
                "hidden cases").format(number=number, earned=f"{earned:g}", possible=f"{possible:g}", tail=tail))
    for line in preflight.warnings(number, notebook):
        print(_("warning: {line}").format(line=line))


def _target(out: Path, name: str, suffix: str, force: bool) -> Path:
    target = out / f"{name}{suffix}"
    if target.exists() and not force:
        raise SubmitError(_("{path} exists already: hand that one in, or replace it with --force "
                            "(`make submit CH=.. FORCE=1`, or `course submit ch.. --force`)").format(path=target))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = Parser("course submit", _(HELP))
    parser.add_argument("chapter", help=_("the chapter to submit, e.g. ch02"))
    parser.add_argument("--learner", help=_("your learner id, remembered in .course-learner for next time"))
    parser.add_argument("--out", help=_("folder to write to (default: submissions/)"))
    parser.add_argument("--notebook", help=_("the notebook to send (default: exercises/chNN_*/chNN_*.ipynb)"))
    parser.add_argument("--no-notebook", action="store_true", help=_("send course_lib only"))
    parser.add_argument("--format", choices=["zip", "folder", "both"], default="zip",
                        help=_("a zip (default), a folder, or both"))
    parser.add_argument("--force", action="store_true", help=_("replace an earlier submission of this chapter"))
    parser.add_argument("--no-checks", action="store_true", help=_("pack without running the public checks first"))
    parser.add_argument("--run", help=_("chapter {chapter}: the fine-tuning run folder whose model to hand in "
                                        "(default: the best on valid under runs/)").format(chapter=handin.CHAPTER))
    parser.add_argument("--no-model", action="store_true",
                        help=_("chapter {chapter}: hand in no trained model").format(chapter=handin.CHAPTER))
    parser.add_argument("--into-assignment", action="store_true",
                        help=_("write course_submission/ beside the notebook, for `nbgrader submit`"))
    args = parser.localise().parse_args(argv)
    try:
        number = _chapter_with_checks(args.chapter)
        require_modules(number)
        notebook = None
        if not args.no_notebook:
            notebook = Path(args.notebook).resolve() if args.notebook else default_notebook(number)
            if not notebook.is_file():
                raise SubmitError(_("notebook not found: {path}").format(path=notebook))
        learner = _learner(args.learner)
        model_run = trained_run(number, args.run, args.no_model)
        if args.into_assignment:
            if notebook is None:
                raise SubmitError(_("--into-assignment needs the notebook (its folder is the assignment)"))
            dest = notebook.parent / "course_submission"
            if dest.exists():
                shutil.rmtree(dest)
            _report(number, notebook, args.no_checks)
            build(number, learner, None, dest, model_run=model_run)
            print(_("wrote {path} (manifest and course_lib snapshot); now run: {command}").format(
                path=dest, command=f"nbgrader submit {notebook.parent.name}"))
            return 0
        out = Path(args.out) if args.out else LAYOUT.root / "submissions"
        out.mkdir(parents=True, exist_ok=True)
        name = f"{learner}_ch{number}"
        targets = {kind: _target(out, name, suffix, args.force) for kind, suffix in (("zip", ".zip"), ("folder", ""))
                   if args.format in (kind, "both")}
        _report(number, notebook, args.no_checks)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / name
            build(number, learner, notebook, folder, model_run=model_run)
            if "zip" in targets:
                _zip(folder, targets["zip"])
            if "folder" in targets:
                shutil.rmtree(targets["folder"], ignore_errors=True)
                shutil.copytree(folder, targets["folder"])
        for target in targets.values():
            print((_("hand in this file: {path}") if target.suffix else _("hand in this folder: {path}")).format(
                path=target))
    except SubmitError as err:
        print(_("course submit: {error}").format(error=err), file=sys.stderr)
        return 2
    return 0
