"""How long chapter 08's capstone commands take on a CPU: measured, kept in a record, never typed.

    python -m course_admin.release.capstone_times --measure     # runs the commands (minutes), rewrites the record

The commands are those of the chapter 08 notebook's written question on pretraining: each run has its
own ``--out``, so that a fine-tuning from scratch never resumes (or clashes with) the pretrained one.
``--measure`` runs each of them as a learner would, with ``--impl reference`` (the instructor's repository
has no learner code), one torch thread (the capstone's default on a CPU), in a fresh folder, and writes
the wall time and the CPU time of each command into RECORD. The CPU time of a one-thread run is its wall
time on an idle core, so it is what learners are told; the wall time and the load average are kept to
show how busy the machine was. `course release` writes the commands and their times into the chapter 08
notebook and the learner's README (``runs_markdown``, ``readme_lines``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from course_lib.provided.layout import LAYOUT

RECORD = LAYOUT.solutions / "learner" / "capstone_times.json"
COURSE = ".venv/bin/course"  # how a learner calls the command, from the course folder
WIDTH = 108                  # the notebooks' line length


@dataclass(frozen=True)
class Run:
    key: str
    what: str                # what the run does, in the learner's words
    args: tuple[str, ...]    # after `course capstone`


PRETRAINED = "runs/q2-pretrained"
RUNS = (
    Run("pretrain", "masked-LM pretraining on the news text and the train reviews",
        ("pretrain", "--model", "transformer", "--quick", "--out", PRETRAINED)),
    Run("finetune-pretrained", "fine-tuning from the pretrained encoder (after run 1)",
        ("finetune", "--model", "transformer", "--quick", "--out", PRETRAINED,
         "--pretrained", f"{PRETRAINED}/pretrain-transformer-quick")),
    Run("finetune-scratch", "fine-tuning from scratch, with the same settings, in its own folder",
        ("finetune", "--model", "transformer", "--quick", "--out", "runs/q2-scratch")),
)


def command(run: Run) -> str:
    """The command line a learner types in the course folder."""
    return " ".join((COURSE, "capstone", *run.args))


def load(path: Path = RECORD) -> dict:
    """The measured record; a ReleaseError-friendly message when it is missing."""
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: measure it with `python -m course_admin.release.capstone_times "
                                "--measure`")
    return json.loads(path.read_text(encoding="utf-8"))


def minutes(seconds: float) -> int:
    """Whole minutes, rounded up: what a learner should plan for."""
    return max(1, math.ceil(seconds / 60))


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(folder: Path) -> dict:
    """Run every command of RUNS in ``folder`` (as its course folder) and time it."""
    course = Path(sys.executable).parent / "course"
    runs = {}
    for run in RUNS:
        wall, cpu = time.perf_counter(), _cpu_of_children()
        load_before = os.getloadavg()[0]
        done = subprocess.run([str(course), "capstone", *run.args, "--impl", "reference", "--no-progress"],
                              cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{command(run)} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        runs[run.key] = {"command": command(run), "cpu_seconds": round(_cpu_of_children() - cpu, 1),
                         "wall_seconds": round(time.perf_counter() - wall, 1),
                         "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
                         "last_line": done.stdout.strip().splitlines()[-1]}
        print(f"{run.key}: {runs[run.key]}", flush=True)
    import torch  # only to record its version

    return {"measured": datetime.date.today().isoformat(), "cpus": os.cpu_count(), "threads": 1,
            "machine": platform.processor() or platform.machine(), "torch": torch.__version__,
            "impl": "reference", "runs": runs}


def run_minutes(record: dict) -> dict[str, int]:
    """The minutes a learner is told for each run of RUNS (CPU seconds, rounded up)."""
    return {run.key: minutes(record["runs"][run.key]["cpu_seconds"]) for run in RUNS}


# What the runs' table and prose say in each language the notebooks and the learner README are released in.
WORDS = {
    "zh_CN": {
        "pretrain": "在新闻文本和训练集评论上做掩码语言模型预训练",
        "finetune-pretrained": "从预训练的编码器开始微调（在第 1 次运行之后）",
        "finetune-scratch": "从零开始微调，设置相同，使用它自己的文件夹",
        "in_terminal": "在终端中、在你的课程文件夹里（有 `.venv/` 的那个）运行：",
        "header": "| 运行 | 在 CPU 上的时间 |",
        "readme_header": "| 命令 | 它做什么 | 在 CPU 上的时间 |",
        "about": "约 {n} 分钟",
        "prose": ("一次接一次地运行，在一台不做别的事的 CPU 上总共约 {n} 分钟（用单线程测得，这是综合项目在 CPU 上的默认设置，"
                  "并使用课程的参考分类器）；机器繁忙时会更久。每次运行只用一个核：在双核机器上，可以在运行 1 和 2 的同时，"
                  "在第二个终端里开始运行 3。每次运行都有自己的 `--out` 文件夹，因此从零开始的运行永远不会碰到预训练运行的检查点；"
                  "中断的运行在你再次输入它的命令时，会从它最后一个检查点继续。"),
    },
}


def _said(lang: str, key: str, english: str) -> str:
    return WORDS.get(lang, {}).get(key, english)


def runs_markdown(record: dict, lang: str = "en") -> str:
    """The chapter 08 notebook's block: the commands, a table of their measured times, and the total."""
    told = run_minutes(record)
    lines = [_said(lang, "in_terminal", "In a terminal, in your course folder (the one with `.venv/`):"), "", "```bash"]
    lines += [command(run) for run in RUNS]
    lines += ["```", "", _said(lang, "header", "| run | time on a CPU |"), "|---|---:|"]
    lines += [f"| {i}. {_said(lang, run.key, run.what)} | "
              f"{_said(lang, 'about', 'about {n} min').format(n=told[run.key])} |" for i, run in enumerate(RUNS, start=1)]
    if lang != "en":  # a Chinese paragraph is one line (a line break inside it would show as a space)
        return "\n".join(lines + ["", _said(lang, "prose", "").format(n=sum(told.values()))])
    prose = (f"About {sum(told.values())} minutes in all, one run after the other, on a CPU that does nothing else "
             "(measured with one thread, the capstone's default on a CPU, and the course's reference classifier); "
             "longer on a busy machine. Each run uses one core: on two cores, start run 3 in a second terminal "
             "while 1 and 2 run. Each run has its own `--out` folder, so that the run from scratch never meets the "
             "pretrained one's checkpoints; a stopped run continues from its last checkpoint when you give its "
             "command again.")
    return "\n".join(lines + ["", textwrap.fill(prose, WIDTH)])


def readme_lines(record: dict, lang: str = "en") -> str:
    """The learner README's capstone commands, each with its measured time."""
    told = run_minutes(record)
    rows = [_said(lang, "readme_header", "| command | what it does | time on a CPU |"), "|---|---|---:|"]
    rows += [f"| `{command(run)}` | {_said(lang, run.key, run.what)} | "
             f"{_said(lang, 'about', 'about {n} min').format(n=told[run.key])} |" for run in RUNS]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_admin.release.capstone_times", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", action="store_true", help="run the commands and rewrite the record")
    parser.add_argument("--to", type=Path, default=RECORD, help=f"the record to write (default {RECORD})")
    args = parser.parse_args(argv)
    if not args.measure:
        print(runs_markdown(load(args.to)))
        return 0
    folder = Path(tempfile.mkdtemp(prefix="capstone-times-"))
    try:
        record = measure(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    args.to.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.to}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
