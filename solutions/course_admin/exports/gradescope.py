"""`course gradescope [ch02 ...] [--out gradescope/] [--allow-rlimits]`: Gradescope autograder zips.

One zip a chapter (every chapter with checks when none is named), in the layout Gradescope's autograder
specification asks for: ``setup.sh`` and ``run_autograder`` at the root, beside ``course/``, the grader's
own tree (course_lib, the reference, hidden cases, known mistakes, specs, reference outputs). On
Gradescope:

  setup.sh          (once, as root, building the image) installs Python, bubblewrap and libseccomp from
                    apt, the course into /autograder/venv with the torch version graded with here, hides
                    solutions/ from every other uid, and prepares the chapter (``gradescope prepare``)
  run_autograder    (per submission) runs ``gradescope run``: `course grade` itself, in its sandbox, on
                    /autograder/submission, then writes /autograder/results/results.json (gradescope_results.py)

Grading is `course grade`'s, called, not copied: bubblewrap where the container lets it start; where it
does not, the zip built with --allow-rlimits grades under rlimits as an unprivileged uid (the container is
then the only boundary: learner code can reach the network, not the grader's files), and without it every
submission gets a results.json that says so and scores nothing. For tests, $COURSE_AUTOGRADER_ROOT
replaces /autograder and $COURSE_AUTOGRADER_PYTHON the venv's python.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from course_lib.provided import chapters as chapters_mod
from course_lib.provided.layout import LAYOUT

from ..intake.submissions import MAX_ZIP_BYTES, SubmissionError, learner_id

BUNDLE = ("course_lib", "solutions/course_ref", "solutions/course_admin", "solutions/hidden", "solutions/mistakes",
          "solutions/source", "tests/specs", "tests/reference", "pyproject.toml", "constraints-cpu.txt", "README.md")
SKIP = ("__pycache__", ".prepared", ".ipynb_checkpoints")
# the instructor tools that grading never runs: benchmarks and mutation testing, the book's extensions
LEFT_OUT = ("solutions/course_admin/measure", "solutions/course_admin/book")
EXECUTABLE = 0o100755 << 16

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (written by `course gradescope`).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap libseccomp2 util-linux >/dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
# the torch that `course gradescope` was run with, CPU build: grades here are computed as on your machine
/autograder/venv/bin/pip install -q "torch=={torch}" --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -q -e /autograder/source/course
# the reference, hidden cases and known mistakes: readable by root alone (learner code never runs as root)
chmod -R go-rwx /autograder/source/course/solutions
/autograder/venv/bin/python -m course_admin.exports.gradescope prepare --chapters {chapters}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as root (written by `course gradescope`). The grading is
# `course grade`'s, in its sandbox; results go to $ROOT/results/results.json.
set -uo pipefail
ROOT="${{COURSE_AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{COURSE_AUTOGRADER_PYTHON:-/autograder/venv/bin/python}}"
export PYTHONPATH="$ROOT/source/course:$ROOT/source/course/solutions"
cd "$ROOT"
exec "$PYTHON" -m course_admin.exports.gradescope run --root "$ROOT" --chapters {chapters}{rlimits}
"""


# ---------------------------------------------------------------- building the zip (instructor's machine)
def bundle_files(root: Path = LAYOUT.root) -> list[tuple[Path, str]]:
    """(file, name in the zip) of the grader's tree: what `course grade` reads, nothing else."""
    files = []
    for part in BUNDLE:
        path = root / part
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `course gradescope` in the instructor's repository")
        for f in sorted([path] if path.is_file() else path.rglob("*")):
            rel = f.relative_to(root).as_posix()
            if f.is_file() and not any(s in f.parts for s in SKIP) and f.suffix != ".pyc" \
                    and not any(rel.startswith(left + "/") for left in LEFT_OUT):
                files.append((f, f"course/{rel}"))
    return files


def torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def build(numbers: list[str], out: Path, allow_rlimits: bool = False) -> Path:
    """Write out/gradescope_chNN.zip for the chapters ``numbers`` (one zip grades them together)."""
    out.mkdir(parents=True, exist_ok=True)
    name = "_".join(f"ch{n}" for n in numbers)
    target = out / f"gradescope_{name}.zip"
    listed = " ".join(numbers)
    scripts = {"setup.sh": SETUP_SH.format(torch=torch_version(), chapters=listed),
               "run_autograder": RUN_AUTOGRADER.format(chapters=listed, rlimits=" --allow-rlimits" * allow_rlimits)}
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, text in scripts.items():
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = EXECUTABLE
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text)
        for path, arcname in bundle_files():
            zf.write(path, arcname)
    tmp.replace(target)
    return target


# ---------------------------------------------------------------- in the container
def prepare(numbers: list[str], store: Path) -> None:
    """Compute the chapters' expected values once, at image build, into ``store`` (plan's store)."""
    from ..grading import plan

    store.mkdir(parents=True, exist_ok=True)
    os.chmod(store, 0o700)
    plan.use_store(str(store))
    for number in plan.chapters_to_run(numbers):
        plan.prepare(number)
    plan.cleanup()


def learner_of(root: Path) -> str:
    """The learner as Gradescope knows them (submission_metadata.json: the first user's sid or email)."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8")).get("users") or [{}]
        return str(users[0].get("sid") or users[0].get("email") or "learner")
    except (OSError, ValueError, AttributeError):
        return "learner"


def stage(folder: Path, work: Path, learner: str) -> Path:
    """The upload, copied under the learner's name for `course grade`: the one zip uploaded alone (a
    `make submit` zip) as work/subs/<learner>.zip, else the folder as work/subs/<learner>/. The name
    carries no chapter: the Gradescope assignment decides which chapter is graded."""
    subs = work / "subs"
    subs.mkdir(parents=True)
    name = learner_id(learner).replace("/", "_").replace("\\", "_").lstrip(".") or "learner"
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    zips = [p for p in entries if p.is_file() and p.suffix.lower() == ".zip"]
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())
    if size > MAX_ZIP_BYTES:
        raise SubmissionError(f"the upload holds {size / 1e6:.0f} MB; upload only the zip `make submit` wrote")
    if len(zips) == 1 and not any((folder / n).exists() for n in ("course_lib", "manifest.json")):
        shutil.copyfile(zips[0], subs / f"{name}.zip")
        return subs / f"{name}.zip"
    shutil.copytree(folder, subs / name, symlinks=True)  # links are kept as links, and refused by the reader
    return subs / name


def run(root: Path, numbers: list[str], allow_rlimits: bool) -> int:
    """Grade /autograder/submission with `course grade` and write results/results.json."""
    from ..grading import grade
    from ..records.gradebook import Gradebook
    from .gradescope_results import failure, results, write_results

    t0 = time.monotonic()
    results_file = root / "results" / "results.json"
    results_file.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(results_file.parent, 0o755)  # never writable by the unprivileged uid of the rlimits fallback
    submission = root / "submission"
    if not submission.is_dir():
        write_results(results_file, failure(f"no submission folder at {submission}"))
        return 1
    work = Path(tempfile.mkdtemp(prefix="course_gradescope_"))
    try:
        prepared = root / "source" / "prepared"
        if prepared.is_dir():
            shutil.copytree(prepared, work / "grades" / ".prepared")
        try:
            target = stage(submission, work, learner_of(root))
        except SubmissionError as exc:
            write_results(results_file, failure(str(exc)))
            return 1
        argv = [str(target), "--out", str(work / "grades"), "--chapters", *numbers,
                "--no-notebooks"] + (["--trust-learners"] if allow_rlimits else [])
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                rc = grade.main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 2) if not isinstance(exc.code, str) else 2
        sys.stderr.write(said.getvalue())  # Gradescope shows the instructor run_autograder's output
        if rc != 0:
            why = said.getvalue().strip().splitlines()[-1:] or [f"course grade stopped (exit status {rc})"]
            write_results(results_file, failure(
                f"the grader could not grade here ({why[0].removeprefix('course grade: ').rstrip('.')})",
                "The instructor can build the zip with `course gradescope --allow-rlimits` to grade where "
                "bubblewrap cannot start" if rc == 2 and not allow_rlimits else ""))
            return 1
        book = Gradebook(work / "grades" / "gradebook.sqlite")
        try:
            table = book.table()
        finally:
            book.close()
        write_results(results_file, results(table, numbers, time.monotonic() - t0))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- the command
def _numbers(parser: argparse.ArgumentParser, given: list[str] | None) -> list[str]:
    try:
        return [chapters_mod.normalise(c) for c in given] if given else chapters_mod.available()
    except ValueError as err:
        parser.error(str(err))
        raise  # unreachable: parser.error exits


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["run"], ["prepare"]):  # inside the autograder container
        parser = argparse.ArgumentParser(prog=f"course_admin.exports.gradescope {argv[0]}")
        parser.add_argument("--root", type=Path, default=Path(os.environ.get("COURSE_AUTOGRADER_ROOT", "/autograder")))
        parser.add_argument("--chapters", nargs="+", required=True)
        parser.add_argument("--allow-rlimits", action="store_true")
        args = parser.parse_args(argv[1:])
        numbers = _numbers(parser, args.chapters)
        if argv[0] == "prepare":
            prepare(numbers, args.root / "source" / "prepared")
            return 0
        return run(args.root, numbers, args.allow_rlimits)
    parser = argparse.ArgumentParser(prog="course gradescope", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", help="chapters, one zip each (default: every chapter with checks)")
    parser.add_argument("--out", type=Path, default=Path("gradescope"), help="folder for the zips")
    parser.add_argument("--together", action="store_true", help="one zip grading all the chapters named")
    parser.add_argument("--allow-rlimits", action="store_true",
                        help="grade under rlimits as an unprivileged uid where bubblewrap cannot start in "
                             "Gradescope's container (the container is then the only boundary)")
    args = parser.parse_args(argv)
    numbers = _numbers(parser, args.chapters)
    groups = [numbers] if args.together else [[n] for n in numbers]
    for group in groups:
        path = build(group, args.out, args.allow_rlimits)
        print(f"course gradescope: wrote {path} ({path.stat().st_size / 1e6:.1f} MB): upload it as the autograder "
              f"of the Gradescope assignment for {', '.join('ch' + n for n in group)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
