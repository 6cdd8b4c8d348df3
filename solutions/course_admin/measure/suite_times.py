"""The test suite's clock: what each test, file and tier costs, printed at the end of every run, and a guard
against gross creep. A pytest plugin, loaded by pyproject.toml's ``addopts`` (``-p course_admin.measure.suite_times``).

Tests are marked by what they pay for, and the tiers are made of the marks (``make test-quick`` deselects them all):

    grading   a `course grade` run, a sandbox (bubblewrap) or the Docker-like Gradescope root
    training  a model trained past a handful of steps
    install   a fresh virtual environment (a learner tree set up from its own README)
    hub       a real JupyterHub on loopback
    book      the built book (browser, editions, accessibility): run by CI after `make book`
    slow      over 10 s (whatever it pays for; a test whose call takes over 30 s must carry it)
    long      holds its worker for a minute or so: under ``--dist loadgroup`` its group is handed out early, so that
              it does not end the run alone (_long_groups_first)

At the end of a run it prints the slowest tests (setup, call and teardown together: a shared fixture is paid by
the first test that asks for it), each file's total, each mark's total, and the stage's wall time against its
budget (``--stage NAME --stage-budget SECONDS``, set by the Makefile); ``--times-json PATH`` writes the same
numbers for the README's table (``python -m course_admin.measure.suite_table``).

The guard fails the run on gross creep only, so that a busy machine does not fail it:
- in the quick tier (``--stage quick``), a test that takes over ``CALL_LIMIT_S`` seconds, fixtures included
  (a grading run or a training that slipped into the quick loop);
- a test outside ``slow`` whose own call takes over ``GROSS`` times ``CALL_LIMIT_S`` (90 s); over
  ``CALL_LIMIT_S`` alone it is named, not failed: two workers on two cores stretch a test's wall time (one of
  20 s alone took 55 s in a `make test` on CI's 2-core machine);
- a stage that runs ``OVER`` (50%) past its budget.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest

MARKS = {
    "grading": "runs `course grade`, a sandbox (bubblewrap) or the Docker-like Gradescope root",
    "training": "trains a model past a handful of steps",
    "install": "builds a fresh virtual environment (a learner tree set up from its README)",
    "hub": "starts a real JupyterHub on loopback",
    "book": "needs the built book (browser, editions, accessibility): CI runs it after `make book`",
}
# The order a test is counted under when it carries several marks: the costliest thing it pays for.
COST_ORDER = ("hub", "install", "grading", "training", "book", "slow")
BOOK_TESTS = "solutions/tests/book/"  # where every `book` test lives (from the root): all `make test-book` collects
LONG_WEIGHT = 60  # a `long` test counts as this many tests when the groups are ordered (_long_groups_first),
SLOW_WEIGHT = 10  # a `slow` one as this many,
PAID_WEIGHT = 3   # and one that pays for one of MARKS (a grading run, a training, ...) as this many
CALL_LIMIT_S = 30.0
GROSS = 3.0
OVER = 1.5


def cost_of(marks: set[str]) -> str:
    """The one group a test's time is counted under: its costliest mark, or "quick"."""
    return next((m for m in COST_ORDER if m in marks), "quick")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("suite_times", "the suite's clock (course_admin.measure.suite_times)")
    group.addoption("--stage", default="", help="the stage this run is (quick, test, book): named in the summary")
    group.addoption("--stage-budget", type=float, default=0.0,
                    help="the stage's budget in seconds: the run fails when it takes 50%% longer (0: no budget)")
    group.addoption("--times-json", default="", help="write every test's time, and the stage's, to this file")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With pytest-xdist's ``--dist loadgroup`` (``make test``): a file's tests go to one worker, so that its module
    fixtures are paid once, unless the file names a group of its own (``xdist_group``: files that share a session
    fixture, or must not run beside each other). Runs before xdist's own hook, which reads the groups.
    A ``book`` test outside BOOK_TESTS stops the run (_book_tests_stay_in_their_folder)."""
    _book_tests_stay_in_their_folder(items)
    if _loadgroup(config):
        for item in items:
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
            _name_group(item)
        _long_groups_first(items)


def _loadgroup(config: pytest.Config) -> bool:
    return getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", "no") == "loadgroup"


def _group(item: pytest.Item) -> str:
    return "_".join(sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                            for m in item.iter_markers("xdist_group")}))


def _weight(item: pytest.Item) -> int:
    """What a test counts for when the groups are ordered: its marks' guess at its time (no earlier run is read)."""
    if item.get_closest_marker("long") is not None:
        return LONG_WEIGHT
    if item.get_closest_marker("slow") is not None:
        return SLOW_WEIGHT
    return PAID_WEIGHT if any(item.get_closest_marker(mark) is not None for mark in MARKS) else 1


def _long_groups_first(items: list[pytest.Item]) -> None:
    """The order pytest-xdist hands the groups out in: by weight (``_weight``: 1 for a quick test, more for one that
    pays for something, is ``slow`` or ``long``), the heaviest first. pytest-xdist's own order (most tests first)
    sent a group of a few long tests (the CPU hogs' test, the hub) to a worker last: it ended the run alone, one
    core idle for its last two minutes; counting only ``long`` tests, a file of two slow ones (35 s) still came
    last, and one worker waited 40 s for the other. Workers collect in this order, and pytest_configure turns
    xdist's reordering off, which would undo it."""
    groups = {id(item): _group(item) for item in items}
    weight: dict[str, int] = defaultdict(int)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        weight[groups[id(item)]] += _weight(item)
        first.setdefault(groups[id(item)], index)
    items.sort(key=lambda item: (-weight[groups[id(item)]], first[groups[id(item)]]))  # stable: a group's own order


def _book_tests_stay_in_their_folder(items: list[pytest.Item]) -> None:
    """`make test-book` collects BOOK_TESTS alone (the whole suite's collection cost 13 s in each of its three
    processes) and `make test` deselects the ``book`` mark: a ``book`` test anywhere else would run in neither."""
    astray = [item.nodeid for item in items
              if item.get_closest_marker("book") is not None and not item.nodeid.startswith(BOOK_TESTS)]
    if astray:
        raise pytest.UsageError(f"{len(astray)} test(s) marked `book` outside {BOOK_TESTS}, where `make test-book` "
                                f"looks for them (and `make test` leaves them out): {', '.join(astray[:5])}. "
                                f"Move them into {BOOK_TESTS}, or drop the mark.")


def _name_group(item: pytest.Item) -> None:
    """Put the test's group in its id, ``path::test@group``, where the scheduler reads it. pytest-xdist (3.8) does
    this by setting ``item._nodeid``, which pytest 9 no longer reads (an item's id is ``item._id``): there every
    test was scheduled alone, and each worker paid for a file's module fixtures (test_grading.py's graded class
    twice, 36 s each). Done here where the id lives in ``_id``; elsewhere xdist's own hook does it."""
    if not hasattr(item, "_id") or "@" in item.nodeid.rsplit("]", 1)[-1]:
        return
    from _pytest.nodeid import coerce_node_id

    item._id = coerce_node_id(f"{item.nodeid}@{_group(item)}")


def _test_id(nodeid: str) -> str:
    """The test's id without the ``@group`` xdist adds to it under ``--dist loadgroup``."""
    return re.sub(r"@[^\]@:]*$", "", nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The test's marks, carried by its reports (a worker's reports reach the controller with their properties;
    their ``keywords`` also hold the names of the folders above the test, some of which are marks' names)."""
    if not any(key == "suite_marks" for key, _ in item.user_properties):
        found = sorted({m.name for m in item.iter_markers()} & (set(MARKS) | {"slow"}))
        item.user_properties.append(("suite_marks", found))


def _share_the_cores(config: pytest.Config) -> None:
    """On a pytest-xdist worker: torch's threads, and those of the processes the tests start, are the worker's share
    of the cores. Each worker's torch would otherwise take every core, and two of them on two cores run a matrix
    product several times slower than one (a beam search test: 4 s alone, 18 s so)."""
    workers = int(config.workerinput.get("workercount", 1))  # type: ignore[attr-defined]
    threads = max(1, (os.cpu_count() or 1) // workers)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, str(threads))
    import torch

    torch.set_num_threads(threads)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        _share_the_cores(config)
    for name, what in MARKS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    config.addinivalue_line("markers", "long: holds its worker for a minute or so: its group is handed out early")
    if _loadgroup(config) and not hasattr(config, "workerinput"):
        config.option.loadscopereorder = False  # the groups in the workers' order (_long_groups_first)
    if not config.pluginmanager.hasplugin("xdist"):  # run without workers (-p no:xdist): the groups still read
        config.addinivalue_line("markers", "xdist_group(name): tests that share a worker under pytest-xdist")
    config.pluginmanager.register(Clock(config), "suite_times_clock")


class Clock:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.seconds: dict[str, float] = defaultdict(float)   # nodeid -> setup + call + teardown
        self.calls: dict[str, float] = defaultdict(float)     # nodeid -> call alone
        self.marks: dict[str, set[str]] = {}
        self.problems: list[str] = []                          # what fails the run
        self.named: list[str] = []                             # creep named only

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = _test_id(report.nodeid)
        self.seconds[test] += report.duration
        if report.when == "call":
            self.calls[test] += report.duration
        marks = next((value for key, value in report.user_properties if key == "suite_marks"), None)
        if marks is not None:
            self.marks[test] = set(marks)

    def wall(self) -> float:
        return time.monotonic() - self.started

    def check(self) -> tuple[list[str], list[str]]:
        """The guard's findings, (what fails the run, what is only named): each a line naming the test or the
        stage and the limit it passed."""
        stage, budget = self.config.getoption("stage"), self.config.getoption("stage_budget")
        failed, named = [], []
        for nodeid, seconds in self.seconds.items():
            marks, call = self.marks.get(nodeid, set()), self.calls.get(nodeid, 0.0)
            if stage == "quick" and seconds > CALL_LIMIT_S:
                failed.append(f"{nodeid}: {seconds:.0f} s in the quick tier (over {CALL_LIMIT_S:.0f} s): mark what "
                              f"it pays for ({', '.join(MARKS)}) or make it cheaper")
            elif "slow" not in marks and call > CALL_LIMIT_S:
                (failed if call > GROSS * CALL_LIMIT_S else named).append(
                    f"{nodeid}: its call took {call:.0f} s (over {CALL_LIMIT_S:.0f} s; the run fails past "
                    f"{GROSS * CALL_LIMIT_S:.0f} s) without the slow mark: mark it slow or make it cheaper")
        if budget and self.wall() > OVER * budget:
            failed.append(f"stage {stage or '(unnamed)'}: {self.wall():.0f} s, over {OVER:g} x its budget of "
                          f"{budget:.0f} s")
        return failed, named

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.seconds or hasattr(self.config, "workerinput"):  # a pytest-xdist worker: its controller counts
            return
        self.problems, self.named = self.check()
        if self.problems and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        path = self.config.getoption("times_json")
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps({
                "stage": self.config.getoption("stage"), "budget_s": self.config.getoption("stage_budget"),
                "wall_s": round(self.wall(), 1),
                "tests": {n: {"seconds": round(s, 2), "call": round(self.calls.get(n, 0.0), 2),
                              "marks": sorted(self.marks.get(n, ()))} for n, s in self.seconds.items()},
            }, indent=1) + "\n", encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds or hasattr(self.config, "workerinput"):
            return
        write = terminalreporter.write_line
        terminalreporter.section("the suite's clock (course_admin.measure.suite_times)")
        total = sum(self.seconds.values())
        write(f"slowest tests (of {len(self.seconds)}, {total:.0f} s of test time in all):")
        for nodeid, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])[:15]:
            write(f"  {seconds:7.1f} s  [{cost_of(self.marks.get(nodeid, set()))}] {nodeid}")
        by_file: dict[str, float] = defaultdict(float)
        by_cost: dict[str, list[float]] = defaultdict(list)
        for nodeid, seconds in self.seconds.items():
            by_file[nodeid.split("::")[0]] += seconds
            by_cost[cost_of(self.marks.get(nodeid, set()))].append(seconds)
        write("slowest files:")
        for name, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:10]:
            write(f"  {seconds:7.1f} s  {name}")
        write("by what a test pays for: " + ", ".join(
            f"{cost} {sum(times):.0f} s ({len(times)})" for cost, times in sorted(by_cost.items(), key=lambda kv: -sum(kv[1]))))
        stage, budget = self.config.getoption("stage"), self.config.getoption("stage_budget")
        write(f"stage {stage or '(unnamed)'}: {self.wall():.0f} s wall"
              + (f", budget {budget:.0f} s (fails past {OVER * budget:.0f} s)" if budget else ""))
        for line in self.named:
            terminalreporter.write_line(f"creep (named, not failed): {line}", yellow=True)
        for line in self.problems:
            terminalreporter.write_line(f"CREEP: {line}", red=True, bold=True)
