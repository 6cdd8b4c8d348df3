"""Benchmark `course grade` on a class: N synthetic learners, each handing in every chapter that has checks.

    .venv/bin/python solutions/scripts/bench_grade.py [-n 20] [--jobs 2] [--notebooks] [--cold] [--against REV]
                                                      [--chapters ch02 ...] [--tiny]

Graded two ways: each chapter as its own assignment (``<learner>_chNN/``, with the modules of the
chapters it builds on, as `course submit` packs them), and once as one submission per learner holding
every chapter (``<learner>/``). Half the learners are correct; the others cycle
through wrong kinds: the generated stub, a syntax error, and for chapter 02 three known mistakes.
course_lib only unless --notebooks (then each submission also carries the chapter's exercise notebook,
read for its written answers, never run).

A grading run has a fixed part (preparing the chapters: the reference's and every known-wrong variant's
outputs on every case, then kept in --out/.prepared for later runs) and a part per learner, so each way is
timed three times: a class of --jobs learners into a fresh --out (cold), the same again (warm: the
prepared chapters loaded), and the class of N, warm. Prints the fixed part, seconds per learner, and the
projection for a first run on a class of 200 on this machine: cold small run + (200 - jobs) x per learner
(goal: under 6 minutes for all chapters together with --jobs 2, under bubblewrap's warm sandbox).

--cold also grades everything the cold way (a new sandbox per run: COURSE_GRADE_WARM=0) and prints its
projection beside the warm sandbox's.

--tiny is the smallest class that still measures every column: 2 learners (one correct, one not), --jobs 1,
one chapter (the first of --chapters, default 01), graded as its own assignment only (for one chapter, one
submission of the whole course is the same work). What the benchmark's tests run: a fixed amount of work,
whatever the machine's load; the projection it prints is arithmetic on tiny numbers, not a class's time.

--against REV also grades the same submissions with the grader of git revision REV (a temporary
worktree), alternating the two --rounds times, and prints the ratio of the medians: this tree / REV.
REV must know every chapter handed in; pass --chapters to bench only some (e.g. --chapters ch02).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
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
            own = chapter_facts(chapter).modules
            whole.update({m: t for m, t in files.items() if m in own})
            for m, t in files.items():  # a prerequisite not benched (--chapters): the reference's
                whole.setdefault(m, t)
        write(root / "submissions_all" / learner, whole, {"learner": learner},
              [nb for c in chosen for nb in books[c]])


def timed_ways(tree: Path, subs: Path, small: Path, chapters: list[str], out: Path,
               args: argparse.Namespace, sandbox: str) -> tuple[dict[str, float], list[str]]:
    """The three timings of one way of grading (see the module's docstring) and the isolations seen;
    ``sandbox``: "warm" (the warm sandbox) or "cold" (a new sandbox per run)."""
    cold, found = grade(tree, small, chapters, out / "cold", args, sandbox)
    warm, _ = grade(tree, small, chapters, out / "cold", args, sandbox, regrade=True)
    (out / "class").mkdir(parents=True)
    if (out / "cold" / ".prepared").is_dir():  # a grader older than the store has none: it prepares each run
        shutil.copytree(out / "cold" / ".prepared", out / "class" / ".prepared")
    class_n, more = grade(tree, subs, chapters, out / "class", args, sandbox)
    return {"cold": cold, "warm": warm, "class": class_n}, sorted({*found, *more})


def grade(tree: Path, subs: Path, chapters: list[str], out: Path, args: argparse.Namespace, sandbox: str,
          regrade: bool = False) -> tuple[float, list[str]]:
    """Seconds for one `course grade` run of ``chapters`` with the grader of ``tree``, and its isolations."""
    cmd = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out", str(out),
           "--jobs", str(args.jobs), "--timeout", str(args.timeout), "--quiet",
           "--chapters", *(f"ch{c}" for c in chapters), *(["--regrade"] if regrade else [])]
    if not args.notebooks:
        cmd.append("--no-notebooks")
    # the tree's own packages first: course_lib at its root, the instructor's under solutions/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "solutions")]),
           "COURSE_GRADE_WARM": "1" if sandbox == "warm" else "0"}
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
    parser.add_argument("--cold", action="store_true", help="also grade the cold way (a new sandbox per run)")
    parser.add_argument("--tiny", action="store_true", help="2 learners, --jobs 1, one chapter as its own "
                        "assignment: every column measured on the least work (the tests' run)")
    args = parser.parse_args()
    if args.tiny:
        args.n, args.jobs, args.chapters = 2, 1, (args.chapters or ["01"])[:1]
    if args.n <= args.jobs:
        parser.error(f"-n must be above --jobs ({args.jobs}): the small class has --jobs learners")
    chosen = [chapters.normalise(c) for c in args.chapters] if args.chapters else chapters.available()
    times: dict[tuple[str, str], list[dict[str, float]]] = {}  # (tree, way): one timing per round
    isolations: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_grade_") as tmp:
        root = Path(tmp)
        write_submissions(root / "class", args.n, chosen, args.notebooks)
        write_submissions(root / "small", args.jobs, chosen, args.notebooks)
        trees = {"this tree": REPO}
        if args.cold:
            trees["this tree, cold"] = REPO
        if args.against:
            subprocess.run(["git", "worktree", "add", "--detach", str(root / "peer"), args.against], cwd=REPO,
                           check=True, capture_output=True)
            trees[args.against] = root / "peer"
        try:
            runs = [(f"ch{c}", [c]) for c in chosen] + ([] if args.tiny else [("all", chosen)])
            for r in range(args.rounds if args.against else 1):
                for key, numbers in runs:
                    folder = "submissions_all" if key == "all" else f"submissions_{key}"
                    for k, (name, tree) in enumerate(trees.items()):
                        timing, found = timed_ways(tree, root / "class" / folder, root / "small" / folder,
                                                   numbers, root / f"out_{k}_{r}_{key}", args,
                                                   "cold" if name.endswith(", cold") else "warm")
                        times.setdefault((name, key), []).append(timing)
                        isolations.setdefault(name, set()).update(found)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(root / "peer")], cwd=REPO,
                               capture_output=True)
    report(times, isolations, chosen, args)
    return 0


def projection(timings: list[dict[str, float]], n: int, jobs: int) -> dict[str, float]:
    """Medians over rounds: the fixed part, seconds per learner, and the first run on a class of 200."""
    cold, warm, class_n = (statistics.median(t[k] for t in timings) for k in ("cold", "warm", "class"))
    per = max(class_n - warm, 0.0) / (n - jobs)
    return {"fixed": max(cold - warm, 0.0), "cold": cold, "per": per, "200": cold + (200 - jobs) * per}


def report(times: dict[tuple[str, str], list[dict[str, float]]], isolations: dict[str, set[str]],
           chosen: list[str], args: argparse.Namespace) -> None:
    """Per chapter, all assignments together, and one whole-course submission: the projection for 200."""
    kind = "course_lib + notebook" if args.notebooks else "course_lib only"
    print(f"{args.n} learners, chapters {', '.join(chosen)} ({kind}), --jobs {args.jobs} on {os.cpu_count()} CPUs; "
          f"isolation {', '.join(sorted(isolations['this tree']))}")
    print(f"{'graded as':<36} {'prepare s':>9} {f'{args.jobs} cold s':>9} {'s/learner':>10} {'200 learners':>13}")
    ours = {key: projection(t, args.n, args.jobs) for (name, key), t in times.items() if name == "this tree"}
    cold = {key: projection(t, args.n, args.jobs) for (name, key), t in times.items() if name == "this tree, cold"}

    def line(label: str, p: dict[str, float]) -> float:
        print(f"{label:<36} {p['fixed']:9.1f} {p['cold']:9.1f} {p['per']:10.2f} {p['200'] / 60:9.1f} min")
        return p["200"]

    for chapter in chosen:
        line(f"ch{chapter} (its own assignment)", ours[f"ch{chapter}"])
    summed = {k: sum(ours[f"ch{c}"][k] for c in chosen) for k in ("fixed", "cold", "per", "200")}
    separate = line("every chapter, one assignment each", summed)
    whole = line("every chapter, one submission", ours["all"]) if "all" in ours else None
    print("(per learner: wall seconds at --jobs parallel, from the class of N minus the warm small class; a later "
          "run of the same chapters skips the prepare column)")
    beside = {}
    if cold:
        print("the cold way (COURSE_GRADE_WARM=0: a new sandbox per run):")
        for chapter in chosen:
            line(f"ch{chapter} (its own assignment), cold", cold[f"ch{chapter}"])
        summed_cold = {k: sum(cold[f"ch{c}"][k] for c in chosen) for k in ("fixed", "cold", "per", "200")}
        beside = {"one assignment per chapter": line("every chapter, one assignment each, cold", summed_cold)}
        if "all" in cold:
            beside["one submission per learner"] = line("every chapter, one submission, cold", cold["all"])
    for label, projected in (("one assignment per chapter", separate), ("one submission per learner", whole)):
        if projected is None:  # --tiny: graded as its own assignment only
            continue
        also = f" (cold way: {beside[label] / 60:.1f} min)" if label in beside else ""
        print(f"projected for 200 learners, every chapter, {label}: {projected / 60:.1f} min{also}; goal < 6 min: "
              f"{'met' if projected < 360 else 'NOT met'}")
    if args.against:
        keys = [*(f"ch{c}" for c in chosen), *(["all"] if "all" in ours else [])]
        peer = {key: projection(times[(args.against, key)], args.n, args.jobs) for key in keys}
        ran = {name: found - {"none"} for name, found in isolations.items()}  # none: nothing ran
        if ran[args.against] != ran["this tree"]:
            print(f"warning: {args.against} recorded isolation {sorted(isolations[args.against])}: its run did not "
                  "grade the same way, so the ratio compares unlike runs")
        a, b = (sum(x[k]["200"] for k in keys) for x in (ours, peer))
        print(f"projected for 200, every way summed, medians of {args.rounds} alternating rounds: this tree "
              f"{a / 60:.1f} min, {args.against} {b / 60:.1f} min; ratio this/{args.against} = {a / b:.2f} "
              "(below 1 is faster)")


if __name__ == "__main__":
    raise SystemExit(main())
