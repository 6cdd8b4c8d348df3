"""Grade one learner's course_lib on a run of chapters: a snapshot in a sandbox, one child runs the public
cases of every chapter of the run, then another the hidden cases, the outputs come back as data and are
judged here (verdict.py).

Two phases, so that no hidden input is anywhere learner code can read it while any text of that code can
still reach a learner: the public phase's job and inputs hold the public cases alone, and the hidden
cases' inputs are written into the box only once every public result is in and that child and all it
started have ended. Nothing a hidden case's code says reaches a learner (verdict.py: hidden rows carry
the grader's words only).

The sandbox folder holds the instructor's ``course_lib/__init__.py`` and ``provided/``, the learner's
files of the chapter and of the chapters it builds on (or, with ``--prereqs reference``, the reference's
files of those earlier chapters), the chapter's spec, the child script and the inputs. Nothing else.

Each chapter of a run has a budget of ``--timeout`` seconds of CPU (the child's process tree, measured by
reaper.usage), within a wall limit of the same length. A chapter stopped at its CPU budget ran out of time:
its remaining cases score 0. A chapter stopped at its wall limit with CPU to spare is one of two things.
It was runnable (on a CPU or waiting in the run queue for one) for most of that wall time: the machine
starved it, it is not slow; it is run again from its first case without a result, with a wall limit four
times as long (``STARVED_WALL``), at most ``MAX_STARVED_RERUNS`` times, each said on the instructor's
stderr. Or it was waiting for nothing but itself (sleeping, blocked): it ran out of time, at once. A
chapter still starved after its reruns scores 0 with a message that says so, and the instructor is told
to regrade it on a quieter machine. So a busy machine costs time, never points; code that loops forever
or sleeps forever loses them, within the limit (a sleeper at once, a loop once it has used its CPU).
"""
from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from course_lib.provided.i18n import N_, _
from course_lib.provided.layout import LAYOUT, owner_of

from ..intake.submissions import Reader, SubmissionError
from ..records.rows import GradeRow, Options
from ..sandbox import cold, warm
from ..sandbox.results import ResultRefused, read_result
from .plan import Chapter
from .segment import Segment
from .source_scan import submitted_source, with_source_scans
from .verdict import GraderFailure, decode, describe_exit, judge_case, syntax_error, zero_rows
from .watch import MAX_STARVED_RERUNS, STARVED_WALL, Watchdog, results_in, say_starved, timeout_message

CHILD = warm.FILES["child.py"]  # the grading child (sandbox/child.py), copied into each box
MAX_RESTARTS = 3
AFTER_TIMEOUT = N_("not run: the time limit was reached in an earlier case")  # shown with _()
READY_INDEX = 999  # the child's first frame: its setup (specs, inputs) is done, no learner code has run yet


class GraderError(RuntimeError):
    """The grader's own part failed (a spec that does not load in the sandbox): not the learner's fault."""


def fill_snapshot(reader: Reader, dest: Path, modules: list[str], from_reference: list[str] = ()) -> list[str]:
    """Write ``dest/course_lib``: the instructor's package frame, the learner's ``modules`` (those in
    ``from_reference`` from the reference instead). Returns the modules that the submission lacks."""
    package = dest / "course_lib"
    shutil.copytree(LAYOUT.course_lib / "provided", package / "provided",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(LAYOUT.course_lib / "__init__.py", package / "__init__.py")
    missing = []
    for module in modules:
        if module in from_reference:
            shutil.copyfile(LAYOUT.reference / module, package / module)
            continue
        rel = reader.base + "course_lib/" + module
        if reader.exists(rel):
            (package / module).write_bytes(reader.read(rel))
        else:
            missing.append(module)
    return missing


def missing_message(chapter: Chapter, missing: list[str]) -> str:
    parts = []
    for module in missing:
        owner = owner_of(module)
        why = "" if owner == chapter.number else _(" (chapter {owner}, which chapter {number} builds on)").format(
            owner=owner, number=chapter.number)
        parts.append(f"course_lib/{module}{why}")
    return (_("{files} is missing from the submission (run `course submit` from your course folder)")
            if len(parts) == 1 else
            _("{files} are missing from the submission (run `course submit` from your course folder)")).format(
                files=", ".join(parts))


def grade_course_lib(reader: Reader, chapters: list[Chapter], opts: Options, work: Path,
                     substitute: list[str] = ()) -> dict[str, list[GradeRow]]:
    """Every case of each of ``chapters`` on one snapshot of the learner's files, judged; never raises for
    a learner's fault. One sandboxed child runs the public cases of all of them (one Python and one torch
    import), then another the hidden cases (the module's docstring).

    ``substitute``: modules taken from the reference instead (--prereqs reference). A chapter whose
    files are missing gets ``missing`` rows and does not run; each chapter that runs has its own time
    budget (``opts.timeout_s``). A ready-made case ("built from scratch") is decided here, from the
    submitted bytes (source_scan.py). Returns the rows of each chapter, by number."""
    box = Path(tempfile.mkdtemp(prefix="run_", dir=_spool(opts, work)))
    rows: dict[str, list[GradeRow]] = {}
    try:
        modules = list(dict.fromkeys(m for ch in chapters for m in ch.modules))
        try:
            missing = fill_snapshot(reader, box, modules, list(substitute))
        except SubmissionError as exc:
            why = _("submission not graded: {error}").format(error=exc)
            return {ch.number: zero_rows(ch, "error", why) for ch in chapters}
        segments: list[Segment] = []
        for ch in chapters:
            lacking = [m for m in ch.modules if m in missing]
            if lacking:
                rows[ch.number] = zero_rows(ch, "missing", missing_message(ch, lacking))
            else:
                segments.append(Segment.whole(ch, segments[-1].end if segments else 0))
        failures: dict[int, GraderFailure] = {}
        timed_out: set[str] = set()  # chapters the time limit ended: their hidden cases do not run
        for hidden in (False, True):  # hidden inputs reach the box once every public result is in
            phase = [p for p in (seg.phase(hidden) for seg in segments) if p.first < p.end]
            for p in [p for p in phase if hidden and p.chapter.number in timed_out]:
                _rest(failures, p.first, p.end, _(AFTER_TIMEOUT))
            phase = [p for p in phase if not (hidden and p.chapter.number in timed_out)]
            if phase:
                _write_job(box, phase, opts, hidden)
                failures.update(_run_child(box, phase, opts, work, reader.path.name, timed_out))
        if segments:
            for seg in segments:
                syntax = _syntax(reader, seg.chapter, list(substitute))
                judged = [judge_case(seg.chapter, g, _outcome(box, seg.base + g.index, failures), opts.isolation,
                                     syntax) for g in seg.chapter.cases]
                rows[seg.chapter.number] = with_source_scans(reader, seg.chapter, judged)
        return {ch.number: rows[ch.number] for ch in chapters}
    finally:
        shutil.rmtree(box, ignore_errors=True)


def _write_job(box: Path, segments: list[Segment], opts: Options, hidden: bool = False) -> None:
    """The child, the phase's inputs, and the specs where ``course_lib.provided`` looks for them
    (``tests/specs``): those of the run's chapters and of every chapter they build on, since a spec may use
    an earlier one's helpers (``load_spec("05")``), each with its parts (``load_spec_part``). The public
    phase's job and inputs hold nothing of the hidden cases; the hidden phase's replace them."""
    shutil.copy2(CHILD, box / "_grader_child.py")
    (box / "out").mkdir(exist_ok=True)
    specs = box / "tests" / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    for number in {n for seg in segments for n in [*seg.chapter.prereqs, seg.chapter.number]}:
        for path in LAYOUT.spec_files(number):  # the spec and its parts (chNN_<part>.py)
            shutil.copy2(path, specs / path.name)
    _exe, prefix, site = cold.python_paths()
    job = {"site_packages": str(site), "python_prefix": str(prefix), "output_cap": 1024**2,
           "audit": opts.isolation == "rlimits", "ready_index": READY_INDEX, "chapters": []}
    for seg in segments:
        number = seg.chapter.number
        shutil.copy2(seg.chapter.inputs_files[hidden], box / f"inputs_ch{number}.pt")
        job["chapters"].append({"chapter": number, "spec": f"tests/specs/ch{number}.py",
                                "inputs": f"inputs_ch{number}.pt",
                                "cases": [{"index": seg.base + g.index, "local": g.index, "probe": g.case.probe}
                                          for g in seg.graded()]})
    (box / "job.json").write_text(json.dumps(job))


def _syntax(reader: Reader, chapter: Chapter, substitute: list[str]) -> str | None:
    """The first of the learner's files that ``chapter`` runs which does not compile, compiled here from the
    submitted bytes (verdict.syntax_error): what a hidden case that raised may say. None when all compile."""
    for module in chapter.modules:
        source = None if module in substitute else submitted_source(reader, module)
        found = syntax_error(module, source) if source is not None else None
        if found:
            return found
    return None


def _run_child(box: Path, segments: list[Segment], opts: Options, work: Path,
               who: str = "a submission", timed_out: set[str] | None = None) -> dict[int, GraderFailure]:
    """Run the child from the first case without a result until all have one or it has died too often.
    A chapter that runs out of time loses its remaining cases; the next chapter starts afresh. A chapter
    starved by the machine is run again (the module's docstring), said on stderr with ``who``; a chapter the time
    limit ended is added to ``timed_out`` (its hidden phase does not run, as its later cases would not).
    Returns the failure of each case (global index) that the child could not finish, in the grader's words."""
    messages: dict[int, GraderFailure] = {}
    n = segments[-1].end
    start, restarts = 0, 0
    reruns = {s.chapter.number: 0 for s in segments}
    log = work / f"run_{uuid.uuid4().hex[:6]}.log"
    budget = opts.timeout_s
    while start < n:
        left = [s for s in segments if s.end > start]
        walls = {number: budget * STARVED_WALL[k] for number, k in reruns.items()}
        limits = cold.Limits(wall_s=sum(walls[s.chapter.number] for s in left) + 5, cpu_s=budget * len(left) + 5,
                             memory_bytes=opts.memory_mb * 1024**2)
        watchdog = Watchdog(box / "out", segments, start, budget, walls)
        (box / "out" / f"{READY_INDEX:03d}.pt").unlink(missing_ok=True)  # this launch's own, not a phase's before
        result = _launch(box, start, limits, opts.isolation, log, watchdog)
        done = results_in(box / "out")
        gap = next((i for s in segments for i in range(max(s.first, start), s.end) if i not in done), None)
        if gap is None:
            break
        if READY_INDEX not in done:  # it ended before any learner code could run: the grader's fault
            tail = log.read_text(errors="replace").strip()[-300:] if log.is_file() else ""
            raise GraderError(f"the grading child could not start ({describe_exit(result.returncode)}): {tail}")
        seg = next(s for s in segments if s.first <= gap < s.end)
        if result.timed_out:
            stop = watchdog.stopped if watchdog.stopped is not None and watchdog.stopped.segment is seg else None
            number = seg.chapter.number
            if stop is not None and stop.starved:
                again = reruns[number] < MAX_STARVED_RERUNS
                say_starved(who, stop, budget, reruns[number] + 1 if again else reruns[number],
                             budget * STARVED_WALL[reruns[number] + 1] if again else None)
                if again:
                    reruns[number] += 1
                    start = gap
                    continue
            messages[gap] = GraderFailure(timeout_message(budget, stop, reruns[number]))
            _rest(messages, gap + 1, seg.end, _(AFTER_TIMEOUT))
            if timed_out is not None:
                timed_out.add(number)
            start = seg.end
            continue
        messages[gap] = GraderFailure(_("the grading process ended during this case ({how})").format(
                                          how=describe_exit(result.returncode)),
                                      _("the grading process ended during this case (how: see the public cases)"))
        # ^ the hidden text: the exit status is the learner's
        restarts += 1
        start = gap + 1
        if restarts > MAX_RESTARTS:
            for s in segments:
                _rest(messages, max(start, s.first), s.end,
                      _("not run: the grading process ended {count} times").format(count=restarts))
            break
    return messages


def _spool(opts: Options, work: Path) -> Path:
    """Where a run's folder is made: the warm sandbox's spool under bwrap, else the learner's scratch."""
    ready = warm.current(opts.isolation)
    return ready.spool if ready is not None else work


def _launch(box: Path, start: int, limits: cold.Limits, isolation: str, log: Path,
            watchdog: Watchdog) -> cold.RunResult:
    """The grading child on ``box`` from case ``start``: forked by the warm sandbox when the box is in
    its spool, else in a sandbox of its own (a new bwrap or rlimits process)."""
    ready = warm.current(isolation)
    if ready is not None and box.parent == ready.spool:
        try:
            return ready.run(box, start, limits, log, watchdog)
        except warm.ZygoteError as exc:
            warm.broken(exc)
    exe, _prefix, _site = cold.python_paths()
    inner = [str(exe), "-I", "-S", "/sandbox/_grader_child.py", str(start)]
    return cold.run(box, inner, limits, isolation, log, watchdog=watchdog)


def _rest(messages: dict[int, GraderFailure], start: int, end: int, text: str) -> None:
    for i in range(start, end):
        messages.setdefault(i, GraderFailure(text))


REFUSED_HIDDEN = N_("the result of this case was refused by the grader's checks")  # shown with _()


def _outcome(box: Path, index: int, failures: dict[int, GraderFailure]) -> Any:
    """The decoded outputs of one case, or a GraderFailure saying why there are none. The frame is
    checked before and after loading (results.py): nothing in it decides how much memory this takes."""
    path = box / "out" / f"{index:03d}.pt"
    if (box / "out" / f"{index:03d}{cold.OVER_TOTAL}").is_file():
        return GraderFailure(_("the result of this case was refused: the run's results passed the {mib} MiB the "
                               "grader keeps of one run").format(mib=cold.Limits().results_total >> 20),
                             _(REFUSED_HIDDEN))
    if not path.is_file():
        return failures.get(index) or GraderFailure(_("no result: the grading process wrote nothing for this case"))
    try:
        return decode(read_result(path))
    except ResultRefused as exc:
        return GraderFailure(_("the result of this case was refused: {reason}").format(reason=exc), _(REFUSED_HIDDEN))
    except Exception as exc:  # noqa: BLE001 - anything a child could leave behind
        return GraderFailure(_("the result of this case could not be read ({type})").format(type=type(exc).__name__),
                             _(REFUSED_HIDDEN))
