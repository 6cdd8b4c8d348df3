"""What `course capstone` shows and keeps: the baselines (fitted once, then read back), tables and plots.

    results = cached_baselines(out)           # out/baselines.json; refitted only if the split changed
    print(comparison_table(results, [("lstm (this run)", 0.79, 0.78)]))
    plot_runs(out)                            # out/plots/finetune.png, out/plots/pretrain.png
    record_runs(out)                          # one JSON-ready dict of every run, for a page to report
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Sequence

from ..checkpoints import latest_checkpoint
from ..i18n import _
from .baselines import BaselineResult, run_baselines
from .data import reviews

BASELINES_FILE = "baselines.json"


def _split_sizes() -> list[int]:
    corpus = reviews()
    return [len(corpus.train), len(corpus.valid), len(corpus.test)]


def cached_baselines(out: Path, refit: bool = False) -> list[BaselineResult]:
    """The baselines' accuracies from ``out/baselines.json``, fitted (about 35 s) when absent or stale.

    The file records the split sizes it was measured on; a different split makes it stale.
    """
    path = Path(out) / BASELINES_FILE
    sizes = _split_sizes()
    if path.is_file() and not refit:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("split_sizes") == sizes:
            return [BaselineResult(**row) for row in saved["results"]]
    print(_("fitting the baselines on train (once; cached in {path} )").format(path=path), flush=True)
    results = run_baselines()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"split_sizes": sizes, "results": [vars(r) for r in results]}, indent=1),
                    encoding="utf-8")
    return results


def comparison_table(baselines: Sequence[BaselineResult], models: Sequence[tuple[str, float, float]]) -> str:
    """A Markdown table: each baseline, then each ``(name, valid accuracy, test accuracy)`` of ``models``; its
    header and the baselines' names in the learner's language."""
    lines = [f"| {_('model')} | {_('valid acc')} | {_('test acc')} |", "|---|---:|---:|"]
    lines += [f"| {_(r.name)} | {r.valid_accuracy:.1%} | {r.test_accuracy:.1%} |" for r in baselines]
    lines += [f"| **{name}** | **{valid:.1%}** | **{test:.1%}** |" for name, valid, test in models]
    return "\n".join(lines)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of one run's ``metrics.jsonl``, in order."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_runs(out: Path) -> list[Path]:
    """One figure per stage (finetune, pretrain) of every run under ``out``: train loss, and valid metric."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    baselines = cached_baselines(out) if (out / BASELINES_FILE).is_file() else []
    written = []
    for stage, metric in (("finetune", "valid_accuracy"), ("pretrain", "valid_mlm_accuracy")):
        runs = sorted(p.parent for p in out.glob(f"{stage}-*/metrics.jsonl"))
        if not runs:
            continue
        fig, (loss_ax, metric_ax) = plt.subplots(1, 2, figsize=(11, 4))
        for run in runs:
            records = read_metrics(run / "metrics.jsonl")
            train = [r for r in records if r.get("split") == "train"]
            valid = [r for r in records if r.get("split") == "valid" and metric in r]
            loss_ax.plot([r["step"] for r in train], [r["loss"] for r in train], label=run.name)
            metric_ax.plot([r["step"] for r in valid], [r[metric] for r in valid], marker="o", label=run.name)
        if stage == "finetune":
            for result in baselines:
                metric_ax.axhline(result.valid_accuracy, linestyle="--", linewidth=1, color="gray")
                metric_ax.annotate(result.name, (0, result.valid_accuracy), fontsize=7, color="gray",
                                   xycoords=("axes fraction", "data"), va="bottom")
        loss_ax.set(xlabel="step", ylabel="train loss", title=f"{stage}: training loss")
        metric_ax.set(xlabel="step", ylabel=metric.replace("_", " "), title=f"{stage}: {metric.replace('_', ' ')}")
        loss_ax.legend(fontsize=8)
        metric_ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / "plots" / f"{stage}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _train_seconds(records: list[dict[str, Any]], batch_size: int) -> float:
    """Training time estimated from the train records (each window's examples over its examples/s)."""
    seconds, last = 0.0, 0
    for r in records:
        if r.get("split") == "train" and r.get("examples_per_s"):
            seconds += (r["step"] - last) * batch_size / r["examples_per_s"]
            last = r["step"]
    return seconds


def _first_past(records: list[dict[str, Any]], bar: float) -> int | None:
    """The first evaluated step whose valid accuracy is above ``bar``, or None."""
    return next((r["step"] for r in records if r.get("split") == "valid" and r.get("valid_accuracy", 0) > bar), None)


def record_runs(out: Path) -> dict[str, Any]:
    """Everything a page needs to report the runs under ``out`` without running them: where and when they
    ran (hardware, versions, date), the baselines, each pretraining run (steps, held-out masked-character
    accuracy, training seconds estimated from its metrics), and each fine-tuning run (its summary, and the
    step and time at which its valid accuracy first passed the TF-IDF baseline's, pretraining included)."""
    import torch

    out = Path(out)
    baselines = cached_baselines(out)
    tfidf = next((b for b in baselines if b.name.lower().startswith("tf-idf")), None)
    pretrain = {}
    for path in sorted(out.glob("pretrain-*/metrics.jsonl")):
        records = read_metrics(path)
        found = latest_checkpoint(path.parent / "checkpoints")
        run = found[1]["settings"]["run"] if found else {}
        valid = [r for r in records if r.get("split") == "valid"]
        steps = max((r["step"] for r in records), default=0)
        batch = run.get("batch_size", 64)
        pretrain[str(path.parent.resolve())] = {
            "name": path.parent.name, "settings": run, "steps": steps,
            "train_seconds_estimated": _train_seconds(records, batch),
            "valid_mlm_accuracy": valid[-1].get("valid_mlm_accuracy") if valid else None}
    finetune = []
    for path in sorted(out.glob("finetune-*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        metrics = path.parent / "metrics.jsonl"  # an ensemble (--seeds) has none: its members have theirs
        records = read_metrics(metrics) if metrics.is_file() else []
        step = _first_past(records, tfidf.valid_accuracy) if tfidf else None
        before = pretrain.get(summary.get("pretrained", ""), {}).get("train_seconds_estimated", 0.0)
        seconds = None if step is None else before + summary["train_seconds"] * step / summary["steps"]
        finetune.append({"name": path.parent.name, **summary,
                         "pretrained_with": pretrain.get(summary.get("pretrained", ""), {}).get("name"),
                         "beats_tfidf_valid_at_step": step, "seconds_to_beat_tfidf_valid": seconds,
                         "curve": [(r["step"], r["valid_accuracy"]) for r in records
                                   if r.get("split") == "valid" and "valid_accuracy" in r]})
    cuda = torch.cuda.is_available()
    members = [json.loads(path.read_text(encoding="utf-8")) for path in out.glob("finetune-*/seed-*/summary.json")]
    used = sorted({run["threads"] for run in finetune + members if run.get("threads")})  # what the runs trained with
    return {
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hardware": {"machine": platform.machine(), "processor": platform.processor() or platform.machine(),
                     "cpu_count": os.cpu_count(),
                     "torch_threads": used[0] if len(used) == 1 else used or torch.get_num_threads(),
                     "gpu": torch.cuda.get_device_name(0) if cuda else None},
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__, "platform": platform.platform()},
        "baselines": [vars(b) for b in baselines],
        "pretrain": list(pretrain.values()),
        "finetune": finetune,
    }
