"""Benchmark `course grade`: N synthetic submissions (correct and wrong mixed), --jobs 2 by default.

    .venv/bin/python solutions/scripts/bench_grade.py [-n 20] [--jobs 2] [--notebooks]

Prints seconds per learner and the projected time for a class of 200 on this machine
(goal: under 15 minutes with --jobs 2). course_lib only unless --notebooks (then each submission also
carries the chapter's exercise notebook, graded through nbgrader).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REFERENCE = (REPO / "solutions" / "course_ref" / "attention.py").read_text(encoding="utf-8")
SCALE = "scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)"
VARIANTS = {
    "correct": REFERENCE,
    "no_scale": REFERENCE.replace(SCALE, "scores = query @ key.transpose(-2, -1)"),
    "neg_inf": REFERENCE.replace("torch.finfo(scores.dtype).min", 'float("-inf")'),
    "inplace": REFERENCE.replace(SCALE, "query /= math.sqrt(d_k)\n    scores = query @ key.transpose(-2, -1)"),
    "syntax": REFERENCE + "\ndef broken(:\n",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=20, help="number of synthetic submissions")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--notebooks", action="store_true", help="include and grade the exercise notebook")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    notebook = next(iter(sorted((REPO / "exercises").glob("ch02_*/ch02_*.ipynb"))), None)
    names = list(VARIANTS)
    with tempfile.TemporaryDirectory(prefix="bench_grade_") as tmp:
        subs = Path(tmp) / "submissions"
        for i in range(args.n):
            kind = names[i % len(names)] if i % 2 else "correct"
            learner = f"learner{i:03d}"
            folder = subs / learner
            (folder / "course_lib").mkdir(parents=True)
            (folder / "course_lib" / "attention.py").write_text(VARIANTS[kind], encoding="utf-8")
            (folder / "manifest.json").write_text(json.dumps({"learner": learner, "chapter": "02"}))
            if args.notebooks and notebook is not None:
                (folder / notebook.name).write_bytes(notebook.read_bytes())
        cmd = [sys.executable, "-m", "course_lib.provided.cli", "grade", str(subs), "--out", str(Path(tmp) / "out"),
               "--jobs", str(args.jobs), "--timeout", str(args.timeout), "--quiet"]
        if not args.notebooks:
            cmd.append("--no-notebooks")
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr, file=sys.stderr)
            return proc.returncode
        rows = (Path(tmp) / "out" / "grades.csv").read_text().splitlines()
        isolation = sorted({r.rsplit(",", 1)[-1] for r in rows[1:] if ",course_lib," in r})
    per = elapsed / args.n
    projected = per * 200
    print(f"graded {args.n} submissions ({'course_lib + notebook' if args.notebooks else 'course_lib only'}) "
          f"with --jobs {args.jobs} on {os.cpu_count()} CPUs in {elapsed:.1f} s; isolation {', '.join(isolation)}")
    print(f"seconds per learner: {per:.2f}")
    print(f"projected for 200 learners: {projected:.0f} s ({projected / 60:.1f} min); goal < 15 min: "
          f"{'met' if projected < 900 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
