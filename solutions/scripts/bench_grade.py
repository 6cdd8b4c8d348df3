"""Benchmark `course grade` on a class: N synthetic learners, each handing in every chapter that has checks.

    .venv/bin/python solutions/scripts/bench_grade.py [-n 20] [--jobs 2] [--notebooks] [--against REV]

Each learner hands in one submission per ready chapter (``<learner>_chNN/``, with the modules of the
chapters it builds on, as `course submit` packs them). Half the learners are correct; the others cycle
through wrong kinds: the generated stub, a syntax error, and for chapter 02 three known mistakes. Prints
seconds per learner, per chapter and in all, and the projected time for a class of 200 on this machine
(goal: under 15 minutes for all chapters together with --jobs 2). course_lib only unless --notebooks (then
each submission also carries the chapter's exercise notebook, read for its written answers, never run).

--against REV also grades the same submissions with the grader of git revision REV (a temporary
worktree), alternating the two --rounds times, and prints the ratio of the medians: this tree / REV.
REV must know every chapter handed in; pass --chapters to bench only some (e.g. --chapters ch02).
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

from course_lib.provided import chapters
from course_lib.provided.layout import LAYOUT, chapter_facts, modules_for

REPO = LAYOUT.root
SCALE = "scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)"


def reference(module: str) -> str:
    return (LAYOUT.reference / module).read_text(encoding="utf-8")


def wrong_kinds(chapter: str) -> dict[str, dict[str, str]]:
    """Wrong versions of a chapter's own modules: {kind: {module: source}}."""
    own = chapter_facts(chapter).modules
    kinds = {"stub": {m: (LAYOUT.root / "course_lib" / m).read_text(encoding="utf-8") for m in own},
             "syntax": {m: reference(m) + "\ndef broken(:\n" for m in own}}
    if chapter == "02":
        attention = reference("attention.py")
        kinds["no_scale"] = {"attention.py": attention.replace(SCALE, "scores = query @ key.transpose(-2, -1)")}
        kinds["neg_inf"] = {"attention.py": attention.replace("torch.finfo(scores.dtype).min", 'float("-inf")')}
        kinds["inplace"] = {"attention.py": attention.replace(
            SCALE, "query /= math.sqrt(d_k)\n    scores = query @ key.transpose(-2, -1)")}
    return kinds


def write_submissions(root: Path, n: int, chosen: list[str], notebooks: bool) -> None:
    """One folder of submissions per chapter: root/submissions_chNN/<learner>_chNN/."""
    for chapter in chosen:
        subs = root / f"submissions_ch{chapter}"
        wrong = wrong_kinds(chapter)
        names = list(wrong)
        notebook = next(iter(sorted((REPO / "exercises").glob(f"ch{chapter}_*/ch{chapter}_*.ipynb"))), None)
        for i in range(n):
            learner = f"learner{i:03d}"
            folder = subs / f"{learner}_ch{chapter}"
            (folder / "course_lib").mkdir(parents=True)
            files = {m: reference(m) for m in modules_for(chapter)}
            if i % 2:
                files.update(wrong[names[(i // 2) % len(names)]])
            for module, text in files.items():
                (folder / "course_lib" / module).write_text(text, encoding="utf-8")
            (folder / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": chapter}))
            if notebooks and notebook is not None:
                (folder / notebook.name).write_bytes(notebook.read_bytes())


def grade(tree: Path, subs: Path, chapter: str, out: Path, args: argparse.Namespace) -> tuple[float, list[str]]:
    """Seconds for one `course grade` run of one chapter with the grader of ``tree``, and its isolations."""
    cmd = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out", str(out),
           "--jobs", str(args.jobs), "--timeout", str(args.timeout), "--quiet", "--chapters", f"ch{chapter}"]
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
    parser.add_argument("-n", type=int, default=20, help="number of synthetic learners")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--chapters", nargs="+", help="chapters to bench (default: every chapter with checks)")
    parser.add_argument("--notebooks", action="store_true", help="include and grade the exercise notebook")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--against", metavar="REV", help="also time the grader of this git revision, same run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each tree with --against")
    args = parser.parse_args()
    chosen = [chapters.normalise(c) for c in args.chapters] if args.chapters else chapters.available()
    times: dict[tuple[str, str], list[float]] = {}
    isolations: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_grade_") as tmp:
        root = Path(tmp)
        write_submissions(root, args.n, chosen, args.notebooks)
        trees = {"this tree": REPO}
        if args.against:
            subprocess.run(["git", "worktree", "add", "--detach", str(root / "peer"), args.against], cwd=REPO,
                           check=True, capture_output=True)
            trees[args.against] = root / "peer"
        try:
            for r in range(args.rounds if args.against else 1):
                for chapter in chosen:
                    for k, (name, tree) in enumerate(trees.items()):
                        out = root / f"out_{k}_{r}_{chapter}"
                        seconds, found = grade(tree, root / f"submissions_ch{chapter}", chapter, out, args)
                        times.setdefault((name, chapter), []).append(seconds)
                        isolations.setdefault(name, set()).update(found)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(root / "peer")], cwd=REPO,
                               capture_output=True)
    report(times, isolations, chosen, args)
    return 0


def report(times: dict[tuple[str, str], list[float]], isolations: dict[str, set[str]], chosen: list[str],
           args: argparse.Namespace) -> None:
    """Per chapter and in all: seconds, seconds per learner, the projection for 200 learners."""
    kind = "course_lib + notebook" if args.notebooks else "course_lib only"
    print(f"{args.n} learners x {len(chosen)} chapters ({kind}), --jobs {args.jobs} on {os.cpu_count()} CPUs; "
          f"isolation {', '.join(sorted(isolations['this tree']))}")
    print(f"{'chapter':>8} {'seconds':>8} {'s/learner':>10} {'200 learners':>13}")
    total = 0.0
    for chapter in chosen:
        elapsed = statistics.median(times[("this tree", chapter)])
        total += elapsed
        print(f"{'ch' + chapter:>8} {elapsed:8.1f} {elapsed / args.n:10.2f} {elapsed / args.n * 200 / 60:10.1f} min")
    projected = total / args.n * 200
    print(f"{'all':>8} {total:8.1f} {total / args.n:10.2f} {projected / 60:10.1f} min")
    print(f"projected for 200 learners, every chapter: {projected:.0f} s ({projected / 60:.1f} min); "
          f"goal < 15 min: {'met' if projected < 900 else 'NOT met'}")
    if args.against:
        peer = sum(statistics.median(times[(args.against, c)]) for c in chosen)
        ran = {name: found - {"none"} for name, found in isolations.items()}  # none: nothing ran
        if ran[args.against] != ran["this tree"]:
            print(f"warning: {args.against} recorded isolation {sorted(isolations[args.against])}: its run did not "
                  "grade the same way, so the ratio compares unlike runs")
        print(f"medians of {args.rounds} alternating runs: this tree {total:.1f} s, {args.against} {peer:.1f} s; "
              f"ratio this/{args.against} = {total / peer:.2f} (below 1 is faster)")


if __name__ == "__main__":
    raise SystemExit(main())
