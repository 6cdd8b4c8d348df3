"""Benchmark `course grade`: N synthetic submissions (correct and wrong mixed), --jobs 2 by default.

    .venv/bin/python solutions/scripts/bench_grade.py [-n 20] [--jobs 2] [--notebooks] [--against REV]

Prints seconds per learner and the projected time for a class of 200 on this machine
(goal: under 15 minutes with --jobs 2). course_lib only unless --notebooks (then each submission also
carries the chapter's exercise notebook, read for its written answers, never run).

--against REV also grades the same submissions with the grader of git revision REV (a temporary
worktree), alternating the two --rounds times, and prints the ratio of the medians: this tree / REV.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from course_lib.provided.layout import LAYOUT

REPO = LAYOUT.root
REFERENCE = (LAYOUT.reference / "attention.py").read_text(encoding="utf-8")
SCALE = "scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)"
VARIANTS = {
    "correct": REFERENCE,
    "no_scale": REFERENCE.replace(SCALE, "scores = query @ key.transpose(-2, -1)"),
    "neg_inf": REFERENCE.replace("torch.finfo(scores.dtype).min", 'float("-inf")'),
    "inplace": REFERENCE.replace(SCALE, "query /= math.sqrt(d_k)\n    scores = query @ key.transpose(-2, -1)"),
    "syntax": REFERENCE + "\ndef broken(:\n",
}


def write_submissions(root: Path, n: int, notebook: Path | None) -> Path:
    subs = root / "submissions"
    names = list(VARIANTS)
    for i in range(n):
        kind = names[i % len(names)] if i % 2 else "correct"
        learner = f"learner{i:03d}"
        folder = subs / learner
        (folder / "course_lib").mkdir(parents=True)
        (folder / "course_lib" / "attention.py").write_text(VARIANTS[kind], encoding="utf-8")
        (folder / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": "02"}))
        if notebook is not None:
            (folder / notebook.name).write_bytes(notebook.read_bytes())
    return subs


def grade(tree: Path, subs: Path, out: Path, args: argparse.Namespace) -> tuple[float, list[str]]:
    """Seconds for one `course grade` run with the grader of ``tree``, and the isolations it recorded."""
    cmd = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out", str(out),
           "--jobs", str(args.jobs), "--timeout", str(args.timeout), "--quiet", "--chapters", "ch02"]
    if not args.notebooks:
        cmd.append("--no-notebooks")
    # the tree's own packages first: course_lib at its root, the instructor's under solutions/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "solutions")])}
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"course grade failed in {tree}:\n{proc.stdout}{proc.stderr}")
    rows = (out / "grades.csv").read_text().splitlines()
    return elapsed, sorted({r.rsplit(",", 1)[-1] for r in rows[1:] if ",course_lib," in r})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20, help="number of synthetic submissions")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--notebooks", action="store_true", help="include and grade the exercise notebook")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--against", metavar="REV", help="also time the grader of this git revision, same run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each tree with --against")
    args = parser.parse_args()
    notebook = next(iter(sorted((REPO / "exercises").glob("ch02_*/ch02_*.ipynb"))), None)
    with tempfile.TemporaryDirectory(prefix="bench_grade_") as tmp:
        root = Path(tmp)
        subs = write_submissions(root, args.n, notebook if args.notebooks else None)
        trees = {"this tree": REPO}
        if args.against:
            subprocess.run(["git", "worktree", "add", "--detach", str(root / "peer"), args.against], cwd=REPO,
                           check=True, capture_output=True)
            trees[args.against] = root / "peer"
        times: dict[str, list[float]] = {name: [] for name in trees}
        isolations: dict[str, list[str]] = {}
        try:
            for r in range(args.rounds if args.against else 1):
                for k, (name, tree) in enumerate(trees.items()):
                    seconds, isolations[name] = grade(tree, subs, root / f"out_{k}_{r}", args)
                    times[name].append(seconds)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(root / "peer")], cwd=REPO,
                               capture_output=True)
    elapsed = statistics.median(times["this tree"])
    per = elapsed / args.n
    projected = per * 200
    print(f"graded {args.n} submissions ({'course_lib + notebook' if args.notebooks else 'course_lib only'}) "
          f"with --jobs {args.jobs} on {os.cpu_count()} CPUs in {elapsed:.1f} s; isolation {', '.join(isolations['this tree'])}")
    print(f"seconds per learner: {per:.2f}")
    print(f"projected for 200 learners: {projected:.0f} s ({projected / 60:.1f} min); goal < 15 min: "
          f"{'met' if projected < 900 else 'NOT met'}")
    if args.against:
        peer = statistics.median(times[args.against])
        ran = {name: set(found) - {"none"} for name, found in isolations.items()}  # none: nothing ran
        if ran[args.against] != ran["this tree"]:
            print(f"warning: {args.against} recorded isolation {isolations[args.against]}: its run did not grade "
                  "the same way, so the ratio compares unlike runs")
        print(f"median of {args.rounds} alternating runs: this tree {elapsed:.1f} s, {args.against} {peer:.1f} s; "
              f"ratio this/{args.against} = {elapsed / peer:.2f} (below 1 is faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
