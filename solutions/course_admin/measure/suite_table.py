"""Where the test suite's time goes, as a Markdown table for the README: the slowest tests, each file's total and
each kind of cost, for one run or for a run before and after a change.

    python -m course_admin.measure.suite_table _build/test-times/test.json
    python -m course_admin.measure.suite_table --before before.xml _build/test-times/test.json

A run is read from what suite_times.py writes (``--times-json``) or from pytest's JUnit XML (``--junitxml``, a run
without that plugin); a test's time is its setup, call and teardown together, and a test of a run without marks
is counted under the marks the other run gives it.
"""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from .suite_times import cost_of


def load(path: Path) -> dict[str, dict]:
    """{test id: {"seconds": s, "marks": [...]}} of a run, from suite_times' JSON or a JUnit XML file."""
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))["tests"]
    tests: dict[str, dict] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        # pytest writes a.b.test_x(.Class): the file is the longest prefix that names a test module
        cut = max(i for i in range(1, len(parts) + 1) if parts[i - 1].startswith("test"))
        nodeid = "/".join(parts[:cut]) + ".py::" + "::".join([*parts[cut:], case.get("name", "")])
        tests[nodeid] = {"seconds": float(case.get("time", 0.0)), "marks": []}
    return tests


def _cost(test: str, runs: list[dict[str, dict]]) -> str:
    marks = next((set(run[test]["marks"]) for run in runs if test in run and run[test]["marks"]), set())
    return cost_of(marks)


def table(runs: list[dict[str, dict]], names: list[str], top: int = 30) -> str:
    """Markdown: the ``top`` slowest tests of the last run (and their time in the others), each file's total, and
    each kind of cost's total, one column a run."""
    last = runs[-1]
    head = "| " + " | ".join(names) + " |"
    rule = "|" + "---:|" * len(names)
    lines = [f"Slowest {top} tests of the {names[-1]} run (s; setup, call and teardown; a shared fixture counted "
             "in the first test that asks for it):", "", f"| test | pays for {head}", f"|---|---{rule}"]

    def cell(run: dict[str, dict], test: str) -> str:
        return f"{run[test]['seconds']:.1f}" if test in run else "-"
    for test in sorted(last, key=lambda t: -last[t]["seconds"])[:top]:
        lines.append(f"| `{test}` | {_cost(test, runs)} | " + " | ".join(cell(r, test) for r in runs) + " |")
    files: list[dict[str, float]] = []
    costs: list[dict[str, float]] = []
    for run in runs:
        by_file: dict[str, float] = defaultdict(float)
        by_cost: dict[str, float] = defaultdict(float)
        for test, data in run.items():
            by_file[test.split("::")[0]] += data["seconds"]
            by_cost[_cost(test, runs)] += data["seconds"]
        files.append(by_file)
        costs.append(by_cost)
    lines += ["", "Each file's total (s):", "", f"| file {head}", rule.replace("|", "|---|", 1)]
    order = sorted({f for by_file in files for f in by_file}, key=lambda f: -max(b.get(f, 0.0) for b in files))
    for name in order:
        lines.append(f"| `{name}` | " + " | ".join(f"{b[name]:.0f}" if name in b else "-" for b in files) + " |")
    lines += ["", "By what a test pays for (s of test time, tests):", "", f"| pays for {head}", rule.replace("|", "|---|", 1)]
    for cost in sorted({c for by_cost in costs for c in by_cost}, key=lambda c: -max(b.get(c, 0.0) for b in costs)):
        counts = [sum(_cost(t, runs) == cost for t in run) for run in runs]
        lines.append(f"| {cost} | " + " | ".join(f"{b.get(cost, 0.0):.0f} ({n})" for b, n in zip(costs, counts)) + " |")
    totals = [sum(d["seconds"] for d in run.values()) for run in runs]
    lines.append("| **all** | " + " | ".join(f"**{t:.0f}** ({len(r)})" for t, r in zip(totals, runs)) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.measure.suite_table", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run's times (suite_times JSON, or JUnit XML)")
    parser.add_argument("--before", type=Path, help="an earlier run, shown in a column before it")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    paths = [p for p in (args.before, args.run) if p is not None]
    for path in paths:
        if not path.is_file():
            parser.error(f"{path}: no such file (write one with pytest --times-json PATH, or --junitxml PATH)")
    print(table([load(p) for p in paths], ["before", "after"] if args.before else ["s"], args.top), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
