"""The watchdog of a grading run: it stops a chapter at its CPU budget or its wall limit and says which
(``Stop``), and the words for it: what the learner reads (``timeout_message``) and what the instructor's log
says of a chapter starved by a busy machine (``say_starved``). sandboxed.py's docstring tells the policy.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Callable

from ..sandbox.cold import OVER_TOTAL
from ..sandbox.reaper import Usage
from .segment import Segment

MAX_STARVED_RERUNS = 2
STARVED_WALL = (1, 4, 16)  # a chapter's wall limit in its first run and in each rerun, in multiples of its budget
RUNNABLE = 0.5  # stopped on wall time, runnable at least this share of it (on a CPU or in the run queue): starved
RESULTS_IN_GRACE = 1.0  # seconds a child may take to end once every result of its run is in


def results_in(out: Path) -> set[int]:
    """The cases of a run whose result is in ``out``: a frame (NNN.pt) or a frame kept off the disk because
    the run's results reached their total (NNN.over, cold.OVER_TOTAL)."""
    return {int(n[:3]) for n in os.listdir(out) if n[:3].isdigit() and len(n) > 3 and n[3:] in (".pt", OVER_TOTAL)}


@dataclasses.dataclass(frozen=True)
class Stop:
    """Why the watchdog stopped a chapter: its CPU budget used up ("cpu") or its wall limit reached with CPU
    to spare ("wall"); the wall time, CPU time and run-queue wait of the chapter up to then."""
    segment: Segment  # the chapter it stopped in
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


class Watchdog:
    """Given to cold.run / WarmSandbox.run, which call it with the run's meter every 0.1 s: stops the child
    when the chapter it is on has used its ``budget`` seconds of CPU, or its wall limit (``walls``, by chapter
    number); says why in ``stopped``. A chapter's clocks start when the child reaches it (its first result or
    the previous chapter's last). Once every result of the run is in, the child has ``RESULTS_IN_GRACE``
    seconds to end by itself; then it is stopped (``finished``): learner code that goes on after its last case
    (processes left spinning, an exit that never comes) holds neither the worker nor the CPUs."""

    def __init__(self, out: Path, segments: list[Segment], start: int, budget: float,
                 walls: dict[str, float]) -> None:
        self.out, self.segments, self.budget, self.walls = out, [s for s in segments if s.end > start], budget, walls
        self.current, self.since, self.base, self.read = None, time.monotonic(), None, 0.0
        self.stopped: Stop | None = None
        self.all_in: float | None = None  # when the last result came in
        self.finished = False  # stopped because every result was in and the child had not ended

    def __call__(self, meter: Callable[[], Usage]) -> bool:
        done = results_in(self.out)
        current = next((s for s in self.segments if any(i not in done for i in range(s.first, s.end))), None)
        now = time.monotonic()
        if current is None:  # every result is in: the child has nothing left to do but end
            self.all_in = self.all_in or now
            self.finished = now - self.all_in >= RESULTS_IN_GRACE
            return self.finished
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


def say_starved(who: str, stop: Stop, budget: float, rerun: int, next_wall: float | None) -> None:
    """The instructor's log (stderr of `course grade`): a starved chapter, run again or given up on."""
    waited = "" if stop.waiting_s is None else f", {stop.waiting_s:.0f} s waiting for a CPU"
    what = (f"run again from its first case without a result, with {next_wall:.0f} s of wall time (rerun {rerun} "
            f"of {MAX_STARVED_RERUNS})" if next_wall is not None else
            f"still starved after {MAX_STARVED_RERUNS} reruns: its remaining cases score 0; grade it again on a "
            "quieter machine (`course grade ... --regrade`)")
    print(f"course grade: {who}, chapter {stop.segment.chapter.number}: starved by a busy machine, not slow "
          f"(stopped at {stop.wall_s:.0f} s of wall time with {stop.cpu_s:.1f} of its {budget:g} s of CPU{waited}); "
          f"{what}", file=sys.stderr, flush=True)
