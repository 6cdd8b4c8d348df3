"""Benchmark `course grade` on a class: N synthetic learners, each handing in every chapter that has checks.

    .venv/bin/python solutions/scripts/bench_grade.py [-n 20] [--jobs 2] [--notebooks] [--against REV]

Graded two ways: each chapter as its own assignment (``<learner>_chNN/``, with the modules of the
chapters it builds on, as `course submit` packs them), and once as one submission per learner holding
every chapter (``<learner>/``). Half the learners are correct; the others cycle
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


def learner_files(i: int, chapter: str, wrong: dict[str, dict[str, str]]) -> dict[str, str]:
    """The course_lib files learner ``i`` hands in for ``chapter``: correct for even i, else a wrong kind."""
    files = {m: reference(m) for m in modules_for(chapter)}
    if i % 2:
        names = list(wrong)
        files.update(wrong[names[(i // 2) % len(names)]])
    return files


def write(folder: Path, files: dict[str, str], manifest: dict, notebooks: list[Path]) -> None:
    (folder / "course_lib").mkdir(parents=True)
    for module, text in files.items():
        (folder / "course_lib" / module).write_text(text, encoding="utf-8")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for notebook in notebooks:
        (folder / notebook.name).write_bytes(notebook.read_bytes())


def write_submissions(root: Path, n: int, chosen: list[str], notebooks: bool) -> None:
    """root/submissions_chNN/<learner>_chNN/: one assignment per chapter, as `course submit` packs them;
    root/submissions_all/<learner>/: one submission per learner holding every chapter."""
    wrong = {c: wrong_kinds(c) for c in chosen}
    books = {c: sorted((REPO / "exercises").glob(f"ch{c}_*/ch{c}_*.ipynb"))[:1] if notebooks else [] for c in chosen}
    for i in range(n):
        learner = f"learner{i:03d}"
        whole: dict[str, str] = {}
        for chapter in chosen:
            files = learner_files(i, chapter, wrong[chapter])
            write(root / f"submissions_ch{chapter}" / f"{learner}_ch{chapter}", files,
                  {"learner": learner, "chapter": chapter}, books[chapter])
            whole.update({m: t for m, t in files.items() if m in chapter_facts(chapter).modules})
        write(root / "submissions_all" / learner, whole, {"learner": learner},
              [nb for c in chosen for nb in books[c]])


def grade(tree: Path, subs: Path, chapters: list[str], out: Path, args: argparse.Namespace) -> tuple[float, list[str]]:
    """Seconds for one `course grade` run of ``chapters`` with the grader of ``tree``, and its isolations."""
    cmd = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out", str(out),
           "--jobs", str(args.jobs), "--timeout", str(args.timeout), "--quiet",
           "--chapters", *(f"ch{c}" for c in chapters)]
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
            runs = [(c, [c], root / f"submissions_ch{c}") for c in chosen]
            runs.append(("all", chosen, root / "submissions_all"))
            for r in range(args.rounds if args.against else 1):
                for key, numbers, subs in runs:
                    for k, (name, tree) in enumerate(trees.items()):
                        seconds, found = grade(tree, subs, numbers, root / f"out_{k}_{r}_{key}", args)
                        times.setdefault((name, key), []).append(seconds)
                        isolations.setdefault(name, set()).update(found)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(root / "peer")], cwd=REPO,
                               capture_output=True)
    report(times, isolations, chosen, args)
    return 0


def report(times: dict[tuple[str, str], list[float]], isolations: dict[str, set[str]], chosen: list[str],
           args: argparse.Namespace) -> None:
    """Per chapter, all assignments together, and one whole-course submission: the projection for 200."""
    kind = "course_lib + notebook" if args.notebooks else "course_lib only"
    print(f"{args.n} learners, chapters {', '.join(chosen)} ({kind}), --jobs {args.jobs} on {os.cpu_count()} CPUs; "
          f"isolation {', '.join(sorted(isolations['this tree']))}")
    print(f"{'graded as':<34} {'seconds':>8} {'s/learner':>10} {'200 learners':>13}")

    def line(label: str, elapsed: float) -> float:
        projected = elapsed / args.n * 200
        print(f"{label:<34} {elapsed:8.1f} {elapsed / args.n:10.2f} {projected / 60:9.1f} min")
        return projected

    median = {key: statistics.median(t) for (name, key), t in times.items() if name == "this tree"}
    for chapter in chosen:
        line(f"ch{chapter} (its own assignment)", median[chapter])
    separate = line("every chapter, one assignment each", sum(median[c] for c in chosen))
    whole = line("every chapter, one submission", median["all"])
    for label, projected in (("one assignment per chapter", separate), ("one submission per learner", whole)):
        print(f"projected for 200 learners, every chapter, {label}: {projected / 60:.1f} min; goal < 15 min: "
              f"{'met' if projected < 900 else 'NOT met'}")
    if args.against:
        keys = [*chosen, "all"]
        ours = sum(median[k] for k in keys)
        peer = sum(statistics.median(times[(args.against, k)]) for k in keys)
        ran = {name: found - {"none"} for name, found in isolations.items()}  # none: nothing ran
        if ran[args.against] != ran["this tree"]:
            print(f"warning: {args.against} recorded isolation {sorted(isolations[args.against])}: its run did not "
                  "grade the same way, so the ratio compares unlike runs")
        print(f"medians of {args.rounds} alternating runs, summed: this tree {ours:.1f} s, {args.against} "
              f"{peer:.1f} s; ratio this/{args.against} = {ours / peer:.2f} (below 1 is faster)")


if __name__ == "__main__":
    raise SystemExit(main())
