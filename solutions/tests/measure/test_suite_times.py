"""The suite's creep guard (course_admin.measure.suite_times.Clock.check), with planted times: a grading run that
slipped into the quick tier fails it, a test outside `slow` is named past 30 s and fails past 90 s, a `slow` test
never does, and a stage fails 50% past its budget."""
from __future__ import annotations

from course_admin.measure import suite_times
from course_admin.measure.suite_times import Clock


class Config:
    def __init__(self, stage: str, budget: float) -> None:
        self.options = {"stage": stage, "stage_budget": budget}

    def getoption(self, name: str):
        return self.options[name]


def clock(stage: str, budget: float, tests: dict[str, tuple[float, float, set[str]]], wall: float) -> Clock:
    """A Clock that saw ``tests`` ({id: (setup+call+teardown, call, marks)}) in a stage of ``wall`` seconds."""
    c = Clock(Config(stage, budget))
    for nodeid, (seconds, call, marks) in tests.items():
        c.seconds[nodeid], c.calls[nodeid], c.marks[nodeid] = seconds, call, marks
    c.wall = lambda: wall
    return c


def test_a_healthy_run_passes_the_guard() -> None:
    tests = {"a.py::quick": (2.0, 1.0, set()), "b.py::graded": (120.0, 100.0, {"grading", "slow"})}
    assert clock("test", 900, tests, wall=800).check() == ([], [])
    assert clock("quick", 120, {"a.py::quick": (2.0, 1.0, set())}, wall=100).check() == ([], [])


def test_a_grading_run_in_the_quick_tier_fails_it() -> None:
    failed, _ = clock("quick", 120, {"a.py::slipped": (45.0, 5.0, set())}, wall=100).check()  # its fixture: 40 s
    assert len(failed) == 1 and "a.py::slipped: 45 s in the quick tier" in failed[0]


def test_a_long_call_outside_slow_is_named_then_fails_when_gross() -> None:
    limit = suite_times.GROSS * suite_times.CALL_LIMIT_S
    tests = {"a.py::stretched": (60.0, 55.0, {"grading"}), "b.py::gross": (limit + 10, limit + 5, {"grading"}),
             "c.py::marked": (400.0, 400.0, {"grading", "slow"})}
    failed, named = clock("test", 2400, tests, wall=1000).check()
    assert len(failed) == 1 and failed[0].startswith(f"b.py::gross: its call took {limit + 5:.0f} s")
    assert len(named) == 1 and named[0].startswith("a.py::stretched: its call took 55 s")


def test_a_stage_fails_half_again_past_its_budget() -> None:
    failed, _ = clock("test", 1000, {"a.py::x": (1.0, 1.0, set())}, wall=1501).check()
    assert failed == ["stage test: 1501 s, over 1.5 x its budget of 1000 s"]
    assert clock("test", 1000, {"a.py::x": (1.0, 1.0, set())}, wall=1499).check() == ([], [])
    assert clock("test", 0, {"a.py::x": (1.0, 1.0, set())}, wall=99999).check() == ([], [])  # no budget
