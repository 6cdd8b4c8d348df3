"""`course gradescope [ch02 ...] [--out gradescope/] [--isolation auto|bwrap]`: Gradescope autograder zips.

One zip a chapter (every chapter with checks when none is named), in the layout Gradescope's autograder
specification asks for: ``setup.sh`` and ``run_autograder`` at the root, beside ``course/``, the grader's
own tree (course_lib, the reference, hidden cases, known mistakes, specs, reference outputs), and
``requirements-grader.txt``, every package the grade depends on at the version this machine has. On
Gradescope:

  setup.sh          (once, as root, building the image) installs Python, bubblewrap and libseccomp from
                    apt; the torch version graded with here, CPU build (PyTorch's CPU index, else the
                    default index, said loudly); the course with requirements-grader.txt's versions;
                    hides solutions/ from every other uid; prepares the chapter (``gradescope prepare``)
  run_autograder    (per upload) runs ``gradescope run``: `course grade` itself on /autograder/submission
                    (gradescope_upload.py reads its shapes), then writes /autograder/results/results.json
                    (gradescope_results.py)

Grading is `course grade`'s, called, not copied. Isolation (grading/container.py): bubblewrap where the
container lets it start; where it does not (Docker's default confinement), by default the container
confinement (seccomp filter, an unprivileged uid, rlimits; the container is the boundary between
uploads); a zip built with ``--isolation bwrap`` grades in bubblewrap or not at all. What was used, and
every cause of an upload not graded, goes to run_autograder's output, which only instructors see; the
learner reads one line on what to do. For tests, $COURSE_AUTOGRADER_ROOT replaces /autograder and
$COURSE_AUTOGRADER_PYTHON the venv's python.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from course_lib.provided import i18n
from course_lib.provided.i18n import _
from course_lib.provided import chapters as chapters_mod
from course_lib.provided.layout import LAYOUT

from ..intake.submissions import SubmissionError

BUNDLE = ("course_lib", "solutions/course_ref", "solutions/course_admin", "solutions/hidden", "solutions/mistakes",
          "solutions/source", "tests/specs", "tests/reference", "pyproject.toml", "constraints-cpu.txt", "README.md")
SKIP = ("__pycache__", ".prepared", ".ipynb_checkpoints")
# the instructor tools that grading never runs: benchmarks and mutation testing, the book's extensions
LEFT_OUT = ("solutions/course_admin/measure", "solutions/course_admin/book")
EXECUTABLE = 0o100755 << 16
ISOLATIONS = ("auto", "bwrap")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (written by `course gradescope`).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap libseccomp2 util-linux >/dev/null
python3 -m venv /autograder/venv
PIP="/autograder/venv/bin/pip"
"$PIP" install -q --upgrade pip
# the torch that `course gradescope` was run with: grades here are computed as on the instructor's machine
if ! "$PIP" install -q "torch=={torch}" --index-url https://download.pytorch.org/whl/cpu; then
    echo "setup.sh: WARNING: PyTorch's CPU index has no torch {torch} for $(python3 -V); installing it from the" \\
         "default index instead (a larger build, the same results on the CPU)" >&2
    "$PIP" install -q "torch=={torch}"
fi
# every other package at the version the zip was built with (requirements-grader.txt)
SOURCE=/autograder/source
if ! "$PIP" install -q -c "$SOURCE/requirements-grader.txt" -e "$SOURCE/course"; then
    echo "setup.sh: WARNING: the versions of requirements-grader.txt do not all install for $(python3 -V);" \\
         "installing the course's own ranges instead: grades may differ in the last digits from yours" >&2
    "$PIP" install -q -e "$SOURCE/course"
fi
# the reference, hidden cases and known mistakes: readable by root alone (learner code never runs as root)
chmod -R go-rwx "$SOURCE/course/solutions"
/autograder/venv/bin/python -m course_admin.exports.gradescope prepare --chapters {chapters}
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as root (written by `course gradescope`). The grading is
# `course grade`'s; results go to $ROOT/results/results.json, and this output to the instructor only.
set -uo pipefail
ROOT="${{COURSE_AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{COURSE_AUTOGRADER_PYTHON:-/autograder/venv/bin/python}}"
export PYTHONPATH="$ROOT/source/course:$ROOT/source/course/solutions"
cd "$ROOT"
exec "$PYTHON" -m course_admin.exports.gradescope run --root "$ROOT" --chapters {chapters} --isolation {isolation} --lang {lang}
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


def pinned_requirements(top: str = "transformers-from-scratch") -> list[str]:
    """``name==version`` of every package ``top`` needs (its dependencies, theirs, and so on, without
    extras), as installed here; torch left out (setup.sh installs it first, from the CPU index)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: dict[str, str] = {}
    todo = [top]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a dependency for another platform or Python, not installed here
        seen[key] = dist.version.split("+")[0]
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [f"{k}=={v}" for k, v in sorted(seen.items()) if k not in ("torch", top)]


def build(numbers: list[str], out: Path, isolation: str = "auto", lang: str = "en") -> Path:
    """Write out/gradescope_chNN.zip for the chapters ``numbers`` (one zip grades them together), its feedback in
    ``lang``."""
    out.mkdir(parents=True, exist_ok=True)
    name = "_".join(f"ch{n}" for n in numbers)
    target = out / f"gradescope_{name}.zip"
    listed = " ".join(numbers)
    scripts = {"setup.sh": SETUP_SH.format(torch=torch_version(), chapters=listed),
               "run_autograder": RUN_AUTOGRADER.format(chapters=listed, isolation=isolation, lang=lang)}
    pins = "# the versions `course gradescope` was run with (setup.sh installs them)\n" + \
        "\n".join(pinned_requirements()) + "\n"
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, text in scripts.items():
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = EXECUTABLE
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text)
        zf.writestr(zipfile.ZipInfo("requirements-grader.txt", date_time=(2026, 1, 1, 0, 0, 0)), pins)
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


def _log(line: str) -> None:
    """A line for the instructor: run_autograder's output, which Gradescope shows to instructors only."""
    print(f"course gradescope: {line}", flush=True)


def run(root: Path, numbers: list[str], isolation: str, lang: str = "en") -> int:
    """Grade /autograder/submission with `course grade` and write results/results.json."""
    from ..grading import grade
    from ..grading.container import container_isolation
    from ..records.gradebook import Gradebook
    from .gradescope_results import failure, results, write_results
    from .gradescope_upload import container_memory_bytes, learner_of, stage

    t0 = time.monotonic()
    os.environ["COURSE_LANG"] = i18n.normalise(lang)  # what the learner reads, before `course grade` sets it too
    results_file = root / "results" / "results.json"
    results_file.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(results_file.parent, 0o700)  # never readable nor writable by the unprivileged uid of learner code
    learner = learner_of(root)  # and submission_metadata.json (earlier results, hidden ones too) closed
    submission = root / "submission"
    if not submission.is_dir():
        write_results(results_file, failure(_("no submission folder at {folder}").format(folder=submission)))
        return 1
    try:
        options, how = container_isolation(isolation)
    except RuntimeError as exc:
        _log(f"NOT GRADED: {exc}.")
        write_results(results_file, failure(_("the autograder could not run your code here, through no fault of "
                                               "your upload"), _("Your instructor can see why; submit again once "
                                                                 "they say it is fixed")))
        return 1
    _log(how + ".")
    memory = container_memory_bytes()
    _log((f"the container has {memory / 2**20:.0f} MB of memory; " if memory else "the container's memory limit "
          "could not be read; ") + "learner processes are the first the out-of-memory killer takes "
         "(oom_score_adj 1000), so a run that needs more fails alone and this grader still writes the results.")
    work = Path(tempfile.mkdtemp(prefix="course_gradescope_"))
    try:
        prepared = root / "source" / "prepared"
        if prepared.is_dir():
            shutil.copytree(prepared, work / "grades" / ".prepared")
        try:
            target = stage(submission, work, learner, numbers[0])
        except SubmissionError as exc:
            write_results(results_file, failure(str(exc)))
            return 1
        argv = [str(target), "--out", str(work / "grades"), "--chapters", *numbers, "--no-notebooks", *options,
                "--lang", lang]
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                rc = grade.main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 2) if not isinstance(exc.code, str) else 2
        sys.stdout.write(said.getvalue())  # the instructor's part of Gradescope's output
        if rc != 0:
            _log(f"NOT GRADED: course grade stopped with exit status {rc} (its output is above).")
            write_results(results_file, failure(_("the autograder could not grade your upload, through no fault "
                                                  "of yours"), _("Your instructor can see why")))
            return 1
        book = Gradebook(work / "grades" / "gradebook.sqlite")
        try:
            table = book.table()
        finally:
            book.close()
        data = results(table, numbers, time.monotonic() - t0, packed_for_another(target, numbers))
        for note in data.pop("instructor", []):
            _log(note)
        write_results(results_file, data)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def packed_for_another(target: Path, numbers: list[str]) -> tuple[str, ...]:
    """A warning when the upload's manifest.json says it was packed for a chapter this assignment does
    not grade (a ch03 zip uploaded to the ch02 assignment): the likeliest wrong upload."""
    from ..intake.submissions import discover

    found = discover([target])
    packed = str(found[0].manifest.get("chapter", "")) if found else ""
    if not packed or packed in numbers:
        return ()
    wanted = ", ".join(numbers)
    return (_("this upload was packed for chapter {packed} (its manifest.json says so), and this assignment grades "
              "chapter {wanted}: upload the zip `make submit CH={chapter}` wrote").format(
                  packed=packed, wanted=wanted, chapter=numbers[0]),)


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
        parser.add_argument("--isolation", choices=ISOLATIONS, default="auto")
        parser.add_argument("--allow-rlimits", action="store_true", help=argparse.SUPPRESS)  # zips of before: auto
        parser.add_argument("--lang", default="en")  # zips of before: English
        args = parser.parse_args(argv[1:])
        numbers = _numbers(parser, args.chapters)
        if argv[0] == "prepare":
            prepare(numbers, args.root / "source" / "prepared")
            return 0
        return run(args.root, numbers, args.isolation, args.lang)
    parser = argparse.ArgumentParser(prog="course gradescope", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", help="chapters, one zip each (default: every chapter with checks)")
    parser.add_argument("--out", type=Path, default=Path("gradescope"), help="folder for the zips")
    parser.add_argument("--together", action="store_true", help="one zip grading all the chapters named")
    parser.add_argument("--isolation", choices=ISOLATIONS, default="auto",
                        help="auto (default): bubblewrap where Gradescope's container lets it start, else the "
                             "container confinement (seccomp filter, an unprivileged uid, rlimits); bwrap: "
                             "bubblewrap or no grade at all")
    parser.add_argument("--allow-rlimits", action="store_true",
                        help="kept for old scripts: what --isolation auto, the default, does now")
    parser.add_argument("--lang", default="en", metavar="LANG",
                        help="the learners' language, en (default) or zh_CN: the feedback Gradescope shows them")
    args = parser.parse_args(argv)
    try:
        args.lang = i18n.normalise(args.lang)
    except ValueError as err:
        parser.error(f"--lang: {err}")
    numbers = _numbers(parser, args.chapters)
    groups = [numbers] if args.together else [[n] for n in numbers]
    for group in groups:
        path = build(group, args.out, args.isolation, args.lang)
        print(f"course gradescope: wrote {path} ({path.stat().st_size / 1e6:.1f} MB): upload it as the autograder "
              f"of the Gradescope assignment for {', '.join('ch' + n for n in group)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
