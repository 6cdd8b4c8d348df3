"""`course grade SUBMISSIONS... --out DIR [--chapters ch02 ...] [--jobs N] [--prereqs learner|reference]`

Grades a class: for every learner and chapter, the chapter's public and hidden cases on the learner's
own course_lib files, run in a sandbox (sandboxed.py), judged here against the reference (verdict.py);
then chapter 08's trained model, read as data and scored with the reference (trained.py); then the
written answers of the chapter's notebook, read as data and never run (answers.py): they wait
for grading by hand in formgrader (--manual merges those scores). Writes DIR/gradebook.sqlite (committed
learner by learner; a re-run skips finished learners whose submission did not change), DIR/grades.csv,
DIR/totals.csv and DIR/feedback/<learner>.md (report.py).

A chapter that builds on earlier ones (its spec's REQUIRES) runs the learner's own modules of those
chapters (--prereqs learner, the default); when one of them fails its own checks, the chapter's failed
checks that run their code say so (diagnose.py, which also revises each chapter's messages by the evidence of
all its cases). --prereqs reference runs the reference's modules of earlier chapters instead: use it
only once those solutions are published, since the learner's code can read what runs beside it.

Isolation: learner code runs under bubblewrap (``--isolation auto``, the default, when it works). Without
it, learner code would run with this process's rights (the rlimits fallback is no boundary): `course grade`
then refuses to grade unless given --trust-learners, and says so loudly; as root it runs the code as an
unprivileged uid of its own with no capability (and refuses, naming the fix, where Python cannot run as
that uid), and its banner says what learner code can still read. --require-sandbox refuses whenever
bubblewrap is not what runs.

The learner id is the collected zip's or folder's name (submissions.py), never what the manifest claims.

This process never imports learner code: it makes the inputs, computes expected values and the outputs
of known-wrong variants with the reference, and only *loads data* (torch.load weights_only=True) that
the sandboxed child wrote, once results.py has checked it. A worker process that dies costs only the
learners it held, and of those only the one that kills a worker of its own too (batch.py).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from course_lib.provided import i18n
from course_lib.provided import chapters as chapters_mod
from course_lib.provided import uses
from course_lib.provided.i18n import _
from course_lib.provided.capstone import handin
from course_lib.provided.layout import LAYOUT

from ..intake.answers import MAX_NOTEBOOK_BYTES, read_answers, source_answers
from ..intake.manifest import manifest_warnings
from ..intake.manual import read_manual_scores
from ..intake.submissions import Reader, Submission, SubmissionError, discover
from ..records.gradebook import Gradebook, GradebookError
from ..records.report import export
from ..records.rows import PREREQ_POLICIES, GradeRow, Options, total
from ..sandbox import cold, confine, procs
from . import plan, trained
from .batch import LearnerGrade, chapters_of, keep_to_one_thread, run_batch
from .diagnose import prerequisite_notes, revise
from .sandboxed import grade_course_lib
from .verdict import zero_rows


# ---------------------------------------------------------------- one learner (runs in a worker process)
def not_graded(error: object) -> str:
    """The message of every row of a submission that cannot be graded, in the learner's language (sandboxed.py's)."""
    return _("submission not graded: {error}").format(error=error)


def notebook_rows(reader: Reader, chapter: plan.Chapter) -> list[GradeRow]:
    """The written answers of the chapter's notebook, read as data: nothing of the notebook runs. Never
    raises: a notebook that cannot be read fails its own rows only, saying so."""
    def row(component: str, max_points: float, status: str, message: str) -> GradeRow:
        return GradeRow(chapter.number, "notebook", component, 0.0, max_points, status, message, "none")

    names = reader.notebooks(chapter.number)
    if not names:
        return [row(gid, points, "missing", _("no ch{number}_*.ipynb notebook in the submission").format(
                    number=chapter.number))
                for gid, points in source_answers(chapter.number)]
    try:
        data = reader.read(names[0], MAX_NOTEBOOK_BYTES)
        return [row(a.grade_id, a.max_points, a.status, a.message) for a in read_answers(data, chapter.number)]
    except Exception as exc:  # noqa: BLE001 - whatever the file holds, the course_lib rows stand
        why = str(exc) if isinstance(exc, SubmissionError) else type(exc).__name__
        said = _("the notebook could not be read ({why}); open it in Jupyter, save it again and hand it in again")
        return [row(gid, points, "error", said.format(why=why)) for gid, points in source_answers(chapter.number)]


def warning_rows(chapter: str, warnings: list[str]) -> list[GradeRow]:
    """A row per warning about the submission, worth nothing: keyed in the grade table by its English (a warning is
    an i18n.Said), its message in the learner's language."""
    return [GradeRow(chapter, "submission", getattr(w, "english", w)[:120], 0.0, 0.0, "warning", w, "none")
            for w in warnings]


def _submitted(reader: Reader) -> uses.Source:
    """A module's submitted bytes (None when absent or unreadable), to see what it imports."""
    def source(module: str) -> bytes | None:
        try:
            rel = reader.base + "course_lib/" + module
            return reader.read(rel) if reader.exists(rel) else None
        except Exception:  # noqa: BLE001 - an unreadable file imports nothing we can see
            return None
    return source


def course_lib_rows(reader: Reader, numbers: list[str], opts: Options, work: Path) -> dict[str, list[GradeRow]]:
    """The course_lib rows of each chapter in ``numbers``, by number.

    --prereqs learner: one sandboxed run of the chapters and every chapter they build on, on the learner's
    own files, earlier chapters first; their results feed the notes of the later ones (a chapter that is
    only built on, not graded, runs its public cases alone). --prereqs
    reference: one run per chapter, its prerequisites' modules taken from the reference (not graded)."""
    if opts.prereqs == "learner":
        # a chapter run only for its note (not graded here) runs its public cases: what `course check` shows
        run = [plan.prepare(n) if n in numbers else plan.public_only(plan.prepare(n))
               for n in plan.chapters_to_run(numbers)]
        lib = grade_course_lib(reader, run, opts, work)
        for chapter in run:  # each chapter's own evidence first (diagnose.py), then what earlier ones explain
            lib[chapter.number] = prerequisite_notes(chapter, revise(chapter, lib[chapter.number]), lib,
                                                     _submitted(reader))
        return lib
    lib = {}
    for number in numbers:
        chapter = plan.prepare(number)
        got = grade_course_lib(reader, [chapter], opts, work, substitute=chapter.prereq_modules())
        lib.update({n: revise(chapter, rows) for n, rows in got.items()})
    return lib


def grade_learner(sub: Submission, numbers: list[str], opts: Options) -> LearnerGrade:
    """The submission's chapters (chapters_of) for one learner: course_lib cases, then the notebook (which
    can fail only its own rows), then the warnings about the submission (its manifest, checked here:
    only submissions that are graded pay for it)."""
    t0 = time.monotonic()
    plan.use_store(opts.store)  # a worker process starts without it
    numbers = chapters_of(sub, numbers)
    graded = [plan.prepare(n) for n in numbers]
    done = dict(part=sub.chapter or "*", chapters=numbers)
    if sub.error:
        rows = [r for ch in graded for r in zero_rows(ch, "error", not_graded(sub.error))
                + trained.zero(ch.number, "error", not_graded(sub.error))]
        return LearnerGrade(sub.learner, sub.fingerprint, str(sub.path), rows, time.monotonic() - t0, **done)
    rows: list[GradeRow] = []
    work = Path(tempfile.mkdtemp(prefix=f"course_grade_{os.getpid()}_"))
    try:
        reader = Reader(sub.path)
        lib = course_lib_rows(reader, numbers, opts, work)
    except SubmissionError as exc:
        rows = [r for ch in graded for r in zero_rows(ch, "error", not_graded(exc))
                + trained.zero(ch.number, "error", not_graded(exc))]
        return LearnerGrade(sub.learner, sub.fingerprint, str(sub.path), rows, time.monotonic() - t0, **done)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for chapter in graded:
        rows += lib[chapter.number] + trained.trained_rows(reader, chapter.number)  # data only: nothing runs
        if opts.notebooks:
            rows += notebook_rows(reader, chapter)
    rows += warning_rows(numbers[0] if numbers else "", sub.warnings + manifest_warnings(reader, sub.manifest))
    return LearnerGrade(sub.learner, sub.fingerprint, str(sub.path), rows, time.monotonic() - t0, **done)


# ---------------------------------------------------------------- the batch
def _say(line: str) -> None:
    """Progress on stdout; a closed pipe (`course grade ... | head`) silences it, never the grading."""
    try:
        print(line, flush=True)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], Options]:
    parser = argparse.ArgumentParser(prog="course grade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", nargs="+", help="zips, folders, or folders of those")
    parser.add_argument("--out", required=True, help="folder for gradebook.sqlite, grades.csv, feedback/")
    parser.add_argument("--chapters", nargs="+", help="chapters to grade (default: all with checks)")
    parser.add_argument("--jobs", type=int, default=1, help="learners graded in parallel (processes)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per learner and chapter (course_lib)")
    parser.add_argument("--memory", type=int, default=2048, help="memory limit of learner code, MB")
    parser.add_argument("--isolation", choices=["auto", "bwrap", "rlimits"], default="auto",
                        help="bwrap: bubblewrap or nothing; rlimits: limits only, no boundary (needs "
                             "--trust-learners); auto (default): bubblewrap where it works")
    parser.add_argument("--trust-learners", action="store_true",
                        help="grade even without bubblewrap, where learner code can read your files, reach the "
                             "network and (unless the grader is root) write whatever you can")
    parser.add_argument("--require-sandbox", action="store_true",
                        help="exit with an error, grading nothing, unless bubblewrap is what runs")
    parser.add_argument("--prereqs", choices=PREREQ_POLICIES, default="learner",
                        help="whose modules of earlier chapters a chapter runs: the learner's own (default) or "
                             "the reference's (only once those solutions are published)")
    parser.add_argument("--no-notebooks", action="store_true", help="grade course_lib only (no written-answer rows)")
    parser.add_argument("--regrade", action="store_true", help="grade finished learners again")
    parser.add_argument("--manual", type=Path, metavar="NBGRADER_DB",
                        help="merge the written answers graded by hand in formgrader from this nbgrader "
                             "gradebook (e.g. grades/gradebook.db); run again after grading more")
    parser.add_argument("--lang", default=os.environ.get("COURSE_LANG") or "en", metavar="LANG",
                        help="the learners' language, en (default, or $COURSE_LANG) or zh_CN: the feedback, the rows' "
                             "messages and the known mistakes in it; scores never depend on it")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        args.lang = i18n.normalise(args.lang)
    except ValueError as err:
        parser.error(f"--lang: {err}")
    os.environ["COURSE_LANG"] = args.lang  # for this process, its workers and their sandboxes (cold.environment)
    try:
        numbers = [chapters_mod.normalise(c) for c in args.chapters] if args.chapters else chapters_mod.available()
    except ValueError as err:
        parser.error(str(err))
    if args.manual is not None:
        try:
            args.manual_scores = read_manual_scores(args.manual)
        except Exception as exc:  # noqa: BLE001 - a bad gradebook is the instructor's to fix, said plainly
            parser.error(f"--manual {args.manual}: {exc}")
    opts = Options(timeout_s=args.timeout, memory_mb=args.memory, notebooks=not args.no_notebooks,
                   prereqs=args.prereqs)
    return args, numbers, opts


def _err(line: str) -> None:
    print(f"course grade: {line}", file=sys.stderr)


def choose_isolation(args: argparse.Namespace) -> str | None:
    """The isolation of this run, or None (after saying why) when it must not grade at all."""
    try:
        isolation = cold.detect(args.isolation)
    except RuntimeError as exc:
        _err(f"{exc}; nothing graded")
        return None
    filtered, no_filter = confine.available()
    if not filtered:  # said on every run: learner processes then run without the seccomp filter
        _err(f"course grade: {no_filter}. Learner processes run without the seccomp filter (confine.py); "
             + ("each run gets a sandbox of its own (the cold way), slower." if isolation == "bwrap" else
                "nothing stops them from tracing or signalling your other processes of their uid."))
    if isolation == "bwrap":
        return isolation
    why = procs.why_not_bwrap(args.isolation)
    if args.require_sandbox:
        _err(f"--require-sandbox: bubblewrap is not what would run ({why}); nothing graded")
        return None
    network = "" if filtered else ", reach the network"
    if not args.trust_learners:
        _err(f"{why}. Without bubblewrap, learner code runs with your rights: it can read your files{network} "
             "and, unless you are root, write whatever you can (the rlimits fallback limits time "
             "and memory, it is no boundary). Install bubblewrap (apt-get install bubblewrap), or, for learners "
             "you trust, pass --trust-learners. Nothing graded.")
        return None
    read_all, how = procs.unprivileged()
    if read_all is None:
        _err(f"{why}, and the fallback cannot drop root's rights: {how}. Nothing graded.")
        return None
    rule = "!" * 100
    for line in (rule, f"NOT SANDBOXED: {why}.", *_what_remains(how, Path(args.out), filtered),
                 "--trust-learners was given; every row of this run says isolation=rlimits.", rule):
        _err(line)
    return isolation


def _what_remains(how: str, out: Path, filtered: bool) -> list[str]:
    """The banner's lines on what learner code can still do under the rlimits fallback (``filtered``: under the
    seccomp filter, which refuses every socket but a unix one, confine.py)."""
    network = ("it opens no network socket (the seccomp filter)" if filtered else "it can reach the network")
    if procs.sandbox_uid() is None:
        return [f"Learner code runs under rlimits only, as YOU: it can read your files and write whatever you "
                f"can; {network}."]
    lines = [f"Learner code runs under rlimits only: {how}; {network}.",
             f"{out / '.prepared'} (expected values) is made readable by you alone."]
    for secret, what in ((LAYOUT.root / "solutions", "the reference and the hidden cases"),
                         (out, "the grade table and every learner's feedback")):
        if procs.readable_by_others(secret):
            lines.append(f"{secret} ({what}) is readable by other users, so by learner code: "
                         f"`chmod -R o-rwx {secret}` hides it.")
    return lines


def main(argv: list[str] | None = None) -> int:
    args, numbers, opts = parse_args(argv)
    if args.jobs > 1:
        keep_to_one_thread()  # its workers are forked from here (batch.py)
    isolation = choose_isolation(args)
    if isolation is None:
        return 2
    out = Path(args.out)
    opts = replace(opts, isolation=isolation, store=str(out / ".prepared"))
    cold.sweep_stale()
    out.mkdir(parents=True, exist_ok=True)
    store = Path(opts.store)
    store.mkdir(mode=0o700, exist_ok=True)
    os.chmod(store, 0o700)  # expected values: never readable by the unprivileged uid of the rlimits fallback
    try:
        book = Gradebook(out / "gradebook.sqlite")
    except GradebookError as exc:
        _err(f"{exc}. Nothing graded.")
        return 2
    if args.manual is not None:
        book.set_manual(args.manual_scores)
        if not args.quiet:
            print(f"course grade: {len(args.manual_scores)} written answer(s) graded by hand, from {args.manual}")
    found = discover(args.submissions)
    subs = [s for s in found if s.chapter is None or s.chapter in numbers]  # collected for another chapter: not now
    config = f"{plan.grader_fingerprint(numbers, opts.prereqs)}|{opts.isolation}"  # a switch of isolation regrades
    config += f"|{args.lang}" if args.lang != "en" else ""  # and of language: the messages are stored in the rows
    # and a table graded before the trained model's measured fields were stored grades chapter 08 again (leaderboard)
    config += f"|{trained.RECORD}" if handin.CHAPTER in numbers else ""
    for sub in subs:
        sub.fingerprint = f"{sub.fingerprint or 'error:' + (sub.error or '')}|{config}"
    done = {} if args.regrade else book.finished()
    todo = [s for s in subs if done.get((s.learner, s.chapter or "*")) != s.fingerprint]
    run_id = uuid.uuid4().hex[:12]
    if not args.quiet:
        other = f" ({len(found) - len(subs)} for other chapters, left)" if len(found) > len(subs) else ""
        _say(f"course grade: {len(subs)} submission(s){other}, {len(subs) - len(todo)} already graded, {len(todo)} "
             f"to grade; chapters {', '.join(numbers)}; isolation {opts.isolation}; prereqs {opts.prereqs}; "
             f"jobs {args.jobs}")
    t0 = time.monotonic()
    if todo:  # prepared once here, stored, and loaded by every worker (not computed once per worker)
        plan.use_store(opts.store)
        for number in plan.chapters_to_run(numbers) if opts.prereqs == "learner" else numbers:
            plan.prepare(number)

    def record(g: LearnerGrade) -> None:
        book.commit_learner(g.learner, g.fingerprint, g.source, run_id, g.rows, g.part, g.chapters)
        if not args.quiet:
            got, possible = total(g.rows)
            _say(f"  {g.learner}: {got:g}/{possible:g} ({g.seconds:.1f} s)")

    try:
        run_batch(todo, numbers, opts, args.jobs, record, grade_learner)
    except KeyboardInterrupt:
        print("course grade: interrupted; finished learners are saved, run the same command to go on",
              file=sys.stderr)
        export(book, out)
        book.close()
        return 130
    export(book, out)
    if not args.quiet:
        own, largest = procs.peak_memory_mb()
        _say(f"course grade: done in {time.monotonic() - t0:.1f} s; wrote {out / 'grades.csv'}, "
             f"{out / 'totals.csv'}, {out / 'feedback'}/; peak memory {own:.0f} MB here, {largest:.0f} MB in the "
             "largest worker or learner process")
    book.close()
    plan.cleanup()
    return 0
