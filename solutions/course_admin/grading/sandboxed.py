"""Grade one learner's course_lib on a run of chapters: a snapshot in a sandbox, ONE child runs the probes
of every chapter of the run, the outputs come back as data and are judged here (verdict.py).

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

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from course_lib.provided.layout import LAYOUT, owner_of

from ..intake.submissions import Reader, SubmissionError
from ..records.rows import GradeRow, Options
from ..sandbox import cold, warm
from ..sandbox.reaper import Usage
from ..sandbox.results import ResultRefused, read_result
from .plan import Chapter
from .source_scan import submitted_source, with_source_scans
from .verdict import GraderFailure, decode, describe_exit, judge_case, syntax_error, zero_rows

CHILD = warm.FILES["child.py"]  # the grading child (sandbox/child.py), copied into each box
MAX_RESTARTS = 3
READY_INDEX = 999  # the child's first frame: its setup (specs, inputs) is done, no learner code has run yet
MAX_STARVED_RERUNS = 2
STARVED_WALL = (1, 4, 16)  # a chapter's wall limit in its first run and in each rerun, in multiples of its budget
RUNNABLE = 0.5  # stopped on wall time, runnable at least this share of it (on a CPU or in the run queue): starved


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
        why = "" if owner == chapter.number else f" (chapter {owner}, which chapter {chapter.number} builds on)"
        parts.append(f"course_lib/{module}{why}")
    return (f"{', '.join(parts)} {'is' if len(parts) == 1 else 'are'} missing from the submission "
            "(run `course submit` from your course folder)")


@dataclasses.dataclass(frozen=True)
class Segment:
    """One chapter's cases in a run: global result indices ``first`` .. ``first + len(cases) - 1``."""
    chapter: Chapter
    first: int

    @property
    def end(self) -> int:
        return self.first + len(self.chapter.cases)


def grade_course_lib(reader: Reader, chapters: list[Chapter], opts: Options, work: Path,
                     substitute: list[str] = ()) -> dict[str, list[GradeRow]]:
    """Every case of each of ``chapters`` on one snapshot of the learner's files, in ONE sandboxed child
    (one Python and one torch import for all of them), judged; never raises for a learner's fault.

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
            return {ch.number: zero_rows(ch, "error", f"submission not graded: {exc}") for ch in chapters}
        segments: list[Segment] = []
        for ch in chapters:
            lacking = [m for m in ch.modules if m in missing]
            if lacking:
                rows[ch.number] = zero_rows(ch, "missing", missing_message(ch, lacking))
            else:
                segments.append(Segment(ch, segments[-1].end if segments else 0))
        if segments:
            _write_job(box, segments, opts)
            failures = _run_child(box, segments, opts, work, reader.path.name)
            for seg in segments:
                syntax = _syntax(reader, seg.chapter, list(substitute))
                judged = [judge_case(seg.chapter, g, _outcome(box, seg.first + g.index, failures), opts.isolation,
                                     syntax) for g in seg.chapter.cases]
                rows[seg.chapter.number] = with_source_scans(reader, seg.chapter, judged)
        return {ch.number: rows[ch.number] for ch in chapters}
    finally:
        shutil.rmtree(box, ignore_errors=True)


def _write_job(box: Path, segments: list[Segment], opts: Options) -> None:
    """The child, the inputs, and the specs where ``course_lib.provided`` looks for them (``tests/specs``):
    those of the run's chapters and of every chapter they build on, since a spec may use an earlier
    one's helpers (``load_spec("05")``), each with its parts (``load_spec_part``)."""
    shutil.copy2(CHILD, box / "_grader_child.py")
    (box / "out").mkdir()
    specs = box / "tests" / "specs"
    specs.mkdir(parents=True)
    for number in {n for seg in segments for n in [*seg.chapter.prereqs, seg.chapter.number]}:
        for path in LAYOUT.spec_files(number):  # the spec and its parts (chNN_<part>.py)
            shutil.copy2(path, specs / path.name)
    _, prefix, site = cold.python_paths()
    job = {"site_packages": str(site), "python_prefix": str(prefix), "output_cap": 1024**2,
           "audit": opts.isolation == "rlimits", "ready_index": READY_INDEX, "chapters": []}
    for seg in segments:
        number = seg.chapter.number
        shutil.copy2(seg.chapter.inputs_file, box / f"inputs_ch{number}.pt")
        job["chapters"].append({"chapter": number, "spec": f"tests/specs/ch{number}.py",
                                "inputs": f"inputs_ch{number}.pt",
                                "cases": [{"index": seg.first + g.index, "local": g.index, "probe": g.case.probe}
                                          for g in seg.chapter.cases]})
    (box / "job.json").write_text(json.dumps(job))


@dataclasses.dataclass(frozen=True)
class Stop:
    """Why the watchdog stopped a chapter: its CPU budget used up ("cpu") or its wall limit reached with CPU
    to spare ("wall"); the wall time, CPU time and run-queue wait of the chapter up to then."""
    segment: Segment
    reason: str
    wall_s: float
    cpu_s: float
    waiting_s: float | None  # None: the kernel keeps no schedstat here

    @property
    def starved(self) -> bool:
        """Stopped on wall time with CPU to spare while runnable most of it (where the kernel cannot say
        how long it waited for a CPU, every such stop counts: the reruns are bounded either way)."""
        if self.reason != "wall":
            return False
        return self.waiting_s is None or self.cpu_s + self.waiting_s >= RUNNABLE * self.wall_s


class _Watchdog:
    """Given to cold.run / WarmSandbox.run, which call it with the run's meter every 0.1 s: stops the child
    when the chapter it is on has used its ``budget`` seconds of CPU, or its wall limit (``walls``, by chapter
    number); says why in ``stopped``. A chapter's clocks start when the child reaches it (its first result or
    the previous chapter's last)."""

    def __init__(self, out: Path, segments: list[Segment], start: int, budget: float,
                 walls: dict[str, float]) -> None:
        self.out, self.segments, self.budget, self.walls = out, [s for s in segments if s.end > start], budget, walls
        self.current, self.since, self.base, self.read = None, time.monotonic(), None, 0.0
        self.stopped: Stop | None = None

    def __call__(self, meter: Callable[[], Usage]) -> bool:
        done = {int(n[:3]) for n in os.listdir(self.out) if n.endswith(".pt") and n[:3].isdigit()}
        current = next((s for s in self.segments if any(i not in done for i in range(s.first, s.end))), None)
        if current is None:
            return False
        now = time.monotonic()
        if current is not self.current:
            self.current, self.since, self.base, self.read = current, now, meter(), now
            return False
        wall, limit = now - self.since, self.walls[current.chapter.number]
        if now - self.read < 0.25 and wall < limit:  # the meter reads /proc: four times a second is enough
            return False
        self.read, used = now, meter()
        cpu = used.cpu_s - self.base.cpu_s
        waiting = None if None in (used.waiting_s, self.base.waiting_s) else used.waiting_s - self.base.waiting_s
        reason = "cpu" if cpu >= self.budget else "wall" if wall >= limit else ""
        if reason:
            self.stopped = Stop(current, reason, wall, cpu, waiting)
        return bool(reason)


def timeout_message(budget: float, stop: Stop | None, reruns: int) -> str:
    """What a learner reads on the case that was running when its chapter was stopped (``stop``: the
    watchdog's reason; None when the run's own wall limit stopped it first)."""
    head = f"did not finish within the time limit ({budget:g} s per chapter)"
    if stop is None or stop.reason == "cpu":
        return (f"{head}: it ran out of time, using its {budget:g} s of CPU time (a loop that never ends, or code "
                "far slower than it needs to be); the process was stopped")
    if not stop.starved:
        return (f"{head}: it waited (sleeping, or blocked on something) for {stop.wall_s:.0f} s, using only "
                f"{stop.cpu_s:.1f} s of CPU; the process was stopped")
    return (f"{head}: run {reruns + 1} time{'s' * (reruns > 0)}, the last for {stop.wall_s:.0f} s, it got only "
            f"{stop.cpu_s:.1f} s of CPU: the grading machine was too busy (or the code kept waiting); the process "
            "was stopped, and your instructor was told to grade it again")


def _say_starved(who: str, stop: Stop, budget: float, rerun: int, next_wall: float | None) -> None:
    """The instructor's log (stderr of `course grade`): a starved chapter, run again or given up on."""
    waited = "" if stop.waiting_s is None else f", {stop.waiting_s:.0f} s waiting for a CPU"
    what = (f"run again from its first case without a result, with {next_wall:.0f} s of wall time (rerun {rerun} "
            f"of {MAX_STARVED_RERUNS})" if next_wall is not None else
            f"still starved after {MAX_STARVED_RERUNS} reruns: its remaining cases score 0; grade it again on a "
            "quieter machine (`course grade ... --regrade`)")
    print(f"course grade: {who}, chapter {stop.segment.chapter.number}: starved by a busy machine, not slow "
          f"(stopped at {stop.wall_s:.0f} s of wall time with {stop.cpu_s:.1f} of its {budget:g} s of CPU{waited}); "
          f"{what}", file=sys.stderr, flush=True)


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
               who: str = "a submission") -> dict[int, GraderFailure]:
    """Run the child from the first case without a result until all have one or it has died too often.
    A chapter that runs out of time loses its remaining cases; the next chapter starts afresh. A chapter
    starved by the machine is run again (the module's docstring), said on stderr with ``who``.
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
        watchdog = _Watchdog(box / "out", segments, start, budget, walls)
        result = _launch(box, start, limits, opts.isolation, log, watchdog)
        done = {int(p.stem) for p in (box / "out").glob("[0-9][0-9][0-9].pt")}
        gap = next((i for i in range(start, n) if i not in done), None)
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
                _say_starved(who, stop, budget, reruns[number] + 1 if again else reruns[number],
                             budget * STARVED_WALL[reruns[number] + 1] if again else None)
                if again:
                    reruns[number] += 1
                    start = gap
                    continue
            messages[gap] = GraderFailure(timeout_message(budget, stop, reruns[number]))
            _rest(messages, gap + 1, seg.end, "not run: the time limit was reached in an earlier case")
            start = seg.end
            continue
        ended = "the grading process ended during this case"
        messages[gap] = GraderFailure(f"{ended} ({describe_exit(result.returncode)})",
                                      f"{ended} (how: see the public cases)")  # the exit status is the learner's
        restarts += 1
        start = gap + 1
        if restarts > MAX_RESTARTS:
            _rest(messages, start, n, f"not run: the grading process ended {restarts} times")
            break
    return messages


def _spool(opts: Options, work: Path) -> Path:
    """Where a run's folder is made: the warm sandbox's spool under bwrap, else the learner's scratch."""
    ready = warm.current(opts.isolation)
    return ready.spool if ready is not None else work


def _launch(box: Path, start: int, limits: cold.Limits, isolation: str, log: Path,
            watchdog: _Watchdog) -> cold.RunResult:
    """The grading child on ``box`` from case ``start``: forked by the warm sandbox when the box is in
    its spool, else in a sandbox of its own (a new bwrap or rlimits process)."""
    ready = warm.current(isolation)
    if ready is not None and box.parent == ready.spool:
        try:
            return ready.run(box, start, limits, log, watchdog)
        except warm.ZygoteError as exc:
            warm.broken(exc)
    exe, _, _ = cold.python_paths()
    inner = [str(exe), "-I", "-S", "/sandbox/_grader_child.py", str(start)]
    return cold.run(box, inner, limits, isolation, log, watchdog=watchdog)


def _rest(messages: dict[int, GraderFailure], start: int, end: int, text: str) -> None:
    for i in range(start, end):
        messages.setdefault(i, GraderFailure(text))


REFUSED_HIDDEN = "the result of this case was refused by the grader's checks"


def _outcome(box: Path, index: int, failures: dict[int, GraderFailure]) -> Any:
    """The decoded outputs of one case, or a GraderFailure saying why there are none. The frame is
    checked before and after loading (results.py): nothing in it decides how much memory this takes."""
    path = box / "out" / f"{index:03d}.pt"
    if not path.is_file():
        return failures.get(index) or GraderFailure("no result: the grading process wrote nothing for this case")
    try:
        return decode(read_result(path))
    except ResultRefused as exc:
        return GraderFailure(f"the result of this case was refused: {exc}", REFUSED_HIDDEN)
    except Exception as exc:  # noqa: BLE001 - anything a child could leave behind
        return GraderFailure(f"the result of this case could not be read ({type(exc).__name__})", REFUSED_HIDDEN)
