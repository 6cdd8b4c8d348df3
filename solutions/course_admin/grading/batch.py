"""A batch of submissions graded by worker processes: one learner's data can cost only that learner.

``run_batch`` grades in this process (``--jobs 1``) or in a pool of worker processes. The workers are forked
from this process where that is safe: on Linux, from a process that kept torch to one thread from its start
(``keep_to_one_thread``: `course grade` calls it first, so OpenMP never starts its threads in the process that
prepares the chapters; a child forked after they started hangs in its first parallel operation). Each forked worker
then takes the thread count the parent had. A fork costs a worker nothing to start (and it has the prepared
chapters already), where a spawned worker imports torch and the grader again (about 2.5 s of CPU here); anywhere
else (another system, a caller that did not keep to one thread) the workers are spawned. A worker that dies
(killed by the kernel's OOM killer, a crash in a library) breaks the whole pool: every learner the pool
still held fails with ``BrokenProcessPool``. Then the learners that were being graded at that moment
(each worker marks the one it holds in a folder of its own) are suspects: each is graded again alone, in
a pool of one; a suspect whose lone worker dies too gets rows saying so (``worker_died``), and is graded
again by the next run. Every other learner goes back to the queue of a fresh pool, so it is graded
normally. Learners already recorded stay recorded (the grade table commits learner by learner).
"""
from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from course_lib.provided.i18n import N_, _

from ..intake.submissions import Submission
from ..records.rows import GradeRow, Options
from ..sandbox import warm
from . import plan
from .verdict import zero_rows


@dataclass
class LearnerGrade:
    learner: str
    fingerprint: str
    source: str
    rows: list[GradeRow]
    seconds: float = 0.0
    part: str = "*"                 # the submission's chapter, or "*" for a submission of every chapter
    chapters: list[str] | None = None  # the chapters whose rows these replace


_KEPT: list[int] = []  # the thread count keep_to_one_thread found: this process's workers are forked, and take it
Grade = Callable[[Submission, list[str], Options], LearnerGrade]
Record = Callable[[LearnerGrade], None]
WORKER_DIED = N_("the grader's worker process died while judging this submission's results (killed, e.g. by "
                 "running out of memory); graded again alone, its worker died again, so it has no points for now. "
                 "Nothing else of the class was affected; the next `course grade` run grades it again")  # shown: _()


def chapters_of(sub: Submission, numbers: list[str]) -> list[str]:
    """The chapters a submission is graded on: the one it was collected for, else every one asked."""
    return [sub.chapter] if sub.chapter else numbers


def grader_failed(sub: Submission, numbers: list[str], exc: BaseException) -> LearnerGrade:
    """Not the learner's fault: recorded so that the table shows it, never counted as finished
    (the fingerprint differs), so the next run grades this learner again."""
    numbers = chapters_of(sub, numbers)
    message = _("the grader failed on this submission ({type}: {error})").format(type=type(exc).__name__, error=exc)
    rows = [GradeRow(n, "course_lib", "(grader)", 0.0, 0.0, "error", message, "none") for n in numbers]
    return LearnerGrade(sub.learner, f"retry:{sub.fingerprint}", str(sub.path), rows, part=sub.chapter or "*",
                        chapters=numbers)


def worker_died(sub: Submission, numbers: list[str]) -> LearnerGrade:
    """A submission whose worker died twice, the second time graded alone: every case at 0 saying why;
    not finished (the fingerprint differs), so the next run grades it again."""
    numbers = chapters_of(sub, numbers)
    rows = [r for n in numbers for r in zero_rows(plan.prepare(n), "error", _(WORKER_DIED))]
    return LearnerGrade(sub.learner, f"retry:{sub.fingerprint}", str(sub.path), rows, part=sub.chapter or "*",
                        chapters=numbers)


def _worker_init(threads: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    if threads:
        import torch

        torch.set_num_threads(threads)  # as a fresh process would have (the parent kept to one)
    # A parent killed outright (SIGKILL, OOM) must not leave workers grading on: die with it.
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before the line above ran
        os._exit(1)


def _marked(grade: Grade, marks: Path, key: int, sub: Submission, numbers: list[str], opts: Options) -> LearnerGrade:
    """``grade`` in a worker, with ``marks/<pid>`` naming the learner (``key``) while it is graded."""
    mark = marks / str(os.getpid())
    mark.write_text(str(key))
    try:
        return grade(sub, numbers, opts)
    finally:
        mark.unlink(missing_ok=True)


def keep_to_one_thread() -> None:
    """Torch in this process kept to one thread, so that its workers can be forked (module docstring); the count
    it had goes to each worker. Call it before this process's first torch operation."""
    import torch

    _KEPT.append(torch.get_num_threads())
    torch.set_num_threads(1)


def _start_method() -> str:
    """"fork" in a process kept to one thread from its start, on Linux; "spawn" anywhere else."""
    return "fork" if _KEPT and sys.platform.startswith("linux") else "spawn"


def _pool(jobs: int) -> futures.ProcessPoolExecutor:
    method = _start_method()
    return futures.ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method),
                                       initializer=_worker_init, initargs=(_KEPT[0] if method == "fork" else 0,))


def _pool_round(queue: list[Submission], numbers: list[str], opts: Options, jobs: int, record: Record,
                grade: Grade, marks: Path) -> tuple[list[Submission], list[Submission]]:
    """Grade ``queue`` in one pool. Returns (learners to grade in a fresh pool, suspects to grade alone):
    both empty unless a worker died."""
    for old in marks.iterdir():
        old.unlink()
    broken: dict[int, Submission] = {}
    with _pool(jobs) as pool:
        pending = {pool.submit(_marked, grade, marks, key, sub, numbers, opts): key for key, sub in enumerate(queue)}
        for fut in futures.as_completed(pending):
            key = pending[fut]
            try:
                record(fut.result())
            except BrokenProcessPool:
                broken[key] = queue[key]
            except Exception as exc:  # noqa: BLE001 - the batch goes on
                record(grader_failed(queue[key], numbers, exc))
    held = {int(m.read_text()) for m in marks.iterdir() if m.read_text().isdigit()} & set(broken)
    suspects = held or set(broken)  # no mark left (it died between learners): each one alone, to be sure
    return [s for k, s in broken.items() if k not in suspects], [broken[k] for k in sorted(suspects)]


def _alone(sub: Submission, numbers: list[str], opts: Options, record: Record, grade: Grade) -> None:
    """One suspect in a pool of its own: its grade, or ``worker_died`` when this worker dies too."""
    with _pool(1) as pool:
        try:
            record(pool.submit(grade, sub, numbers, opts).result())
        except BrokenProcessPool:
            record(worker_died(sub, numbers))
        except Exception as exc:  # noqa: BLE001
            record(grader_failed(sub, numbers, exc))


def run_batch(todo: list[Submission], numbers: list[str], opts: Options, jobs: int, record: Record,
              grade: Grade) -> None:
    """Grade ``todo`` with ``jobs`` worker processes (this process when 1), calling ``record`` as each
    learner finishes (module docstring: what a worker that dies costs)."""
    if jobs <= 1:
        try:
            for sub in todo:
                try:
                    record(grade(sub, numbers, opts))
                except Exception as exc:  # noqa: BLE001 - the batch goes on
                    record(grader_failed(sub, numbers, exc))
        finally:
            warm.shutdown()  # this process's warm sandbox (a worker's ends with the worker)
        return
    marks = Path(tempfile.mkdtemp(prefix=f"course_grade_{os.getpid()}_marks_"))  # swept if we are killed
    try:
        queue = list(todo)
        while queue:
            queue, suspects = _pool_round(queue, numbers, opts, jobs, record, grade, marks)
            for sub in suspects:
                _alone(sub, numbers, opts, record, grade)
    finally:
        shutil.rmtree(marks, ignore_errors=True)
