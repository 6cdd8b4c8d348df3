"""`course capstone`: train, evaluate and compare the capstone's classifiers, the baselines beside.

    course capstone baselines                          # fit the three baselines once (cached in --out)
    course capstone finetune --model lstm --quick      # train on the reviews; valid every N steps; test at the end
    course capstone pretrain --model lstm --quick      # masked-LM pretraining on news + train reviews
    course capstone finetune --model lstm --quick --pretrained runs/capstone/pretrain-lstm-quick
    course capstone evaluate --model lstm --quick      # the trained model on valid and test; its worst mistakes
    course capstone plot                               # loss and accuracy curves into runs/capstone/plots/
    course capstone record --to runs.json              # every run under --out, hardware, versions, date: one JSON
    torchrun --nproc_per_node 4 -m course_lib.provided.cli capstone finetune --model transformer

``--quick`` is the CPU mode (small model, short reviews, minutes on 2 cores); without it the defaults
are sized for a GPU. Each run writes into ``--out`` (default runs/capstone) a folder such as
``finetune-lstm-quick/`` with metrics.jsonl, checkpoints/, vocab.json and summary.json. A killed run
continues where its last checkpoint left off when the same command is run again.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

import torch


from ..checkpoints import latest_checkpoint
from ..runtime import pick_device
from ..training import SettingsClash
from .batching import encode_reviews
from .data import reviews
from .models import CLASSIFIERS, ModelUnavailable
from .report import cached_baselines, comparison_table, plot_runs, record_runs
from .ensemble import ensemble_accuracy, finetune_command, member_probabilities
from .stages import PRESETS, make_classifier, pretrain, run_folder, score
from .vocab import CharVocab


def evaluate_command(args: argparse.Namespace) -> int:
    """The trained model (its last checkpoint; an ensemble: its members' best-valid models) on valid and test."""
    folder, corpus, device = run_folder(args, "finetune"), reviews(), pick_device(args.device)
    members = sorted(path for path in folder.glob("seed-*") if path.is_dir())
    if members:  # an ensemble (--seeds): the mean of its members' probabilities
        probabilities = [member_probabilities(path, device) for path in members]
        accuracy = ensemble_accuracy(probabilities)
        valid_acc, test_acc, name = accuracy["valid"], accuracy["test"], f"{folder.name}: ensemble of {len(members)}"
        labels = torch.tensor([review.label for review in corpus.test])
        mean = torch.stack([p["test"] for p in probabilities]).mean(0)                 # (test, classes)
        true_prob = mean.gather(1, labels[:, None])[:, 0].tolist()                     # (test,)
        print(f"{folder}: {len(members)} members, each at its best valid accuracy")
    else:
        found = latest_checkpoint(folder / "checkpoints")
        if found is None:
            raise SystemExit(f"no trained model in {folder}: run `course capstone finetune` with the same options first")
        run = found[1]["settings"]["run"]
        vocab = CharVocab.load(folder / "vocab.json")
        model = make_classifier(run, vocab, found[1]["model"].get("embed.keys"))
        model.load_state_dict(found[1]["model"])
        model.to(device)
        valid_acc, _, _ = score(model, encode_reviews(corpus.valid, vocab, run["max_len"]), vocab.pad_id, device)
        test_acc, _, true_prob = score(model, encode_reviews(corpus.test, vocab, run["max_len"]), vocab.pad_id, device)
        name = folder.name
        print(f"{found[0]} (step {found[1]['step']})")
    print(comparison_table(cached_baselines(Path(args.out)), [(name, valid_acc, test_acc)]))
    print(f"\nthe {args.show} test reviews it gets most confidently wrong (label: 0 negative, 1 positive):")
    for index in sorted(range(len(true_prob)), key=true_prob.__getitem__)[: args.show]:
        review = corpus.test[index]
        print(f"  label {review.label}, p(label) {true_prob[index]:.3f}: {review.text[:80]}")
    return 0


def baselines_command(args: argparse.Namespace) -> int:
    models = []
    for path in sorted(Path(args.out).glob("finetune-*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        models.append((path.parent.name, summary["valid_accuracy"], summary["test_accuracy"]))
    print(comparison_table(cached_baselines(Path(args.out), refit=args.refit), models))
    return 0


def plot_command(args: argparse.Namespace) -> int:
    written = plot_runs(Path(args.out))
    print("\n".join(map(str, written)) if written else f"no runs under {args.out} to plot")
    return 0


def record_command(args: argparse.Namespace) -> int:
    if not any(Path(args.out).glob("finetune-*/summary.json")):
        raise SystemExit(f"no finished fine-tuning run under {args.out}: run `course capstone finetune` first")
    record = record_runs(Path(args.out))
    Path(args.to).parent.mkdir(parents=True, exist_ok=True)
    Path(args.to).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for run in record["finetune"]:
        past = (f"passed TF-IDF on valid at step {run['beats_tfidf_valid_at_step']} "
                f"(~{run['seconds_to_beat_tfidf_valid']:.0f} s)" if run["beats_tfidf_valid_at_step"] else
                "never passed TF-IDF on valid")
        print(f"{run['name']}: test {run['test_accuracy']:.1%}; {past}")
    print(f"wrote {args.to}")
    return 0


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default="runs/capstone", help="folder of every run, the baselines and plots")
    common.add_argument("--quick", action="store_true", help="the quick preset: small model, minutes on 2 cores")
    common.add_argument("--preset", choices=sorted(PRESETS), help="quick (--quick), cpu (under an hour on 2 cores, "
                        "the default without a GPU) or full (GPU sizes, the default with one)")
    common.add_argument("--impl", choices=["learner", "reference"], default="learner",
                        help="whose TransformerClassifier --model transformer trains: your course_lib (default) or "
                             "the reference course_ref (the instructor's repository only)")
    common.add_argument("--model", default="lstm", choices=sorted(CLASSIFIERS), help="the classifier")
    common.add_argument("--steps", type=int, help="optimizer steps (default: by mode)")
    common.add_argument("--batch-size", type=int, help="global batch size, all processes together")
    common.add_argument("--lr", type=float, help="peak learning rate (warmup, then cosine decay)")
    common.add_argument("--eval-every", type=int, help="evaluate and checkpoint every N steps")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if present, else cpu)")
    common.add_argument("--compile", action="store_true", help="torch.compile the model")
    common.add_argument("--threads", type=int, help="CPU threads for torch (default: 1 on a CPU, or the count of "
                        "the run being resumed; saved with the run)")
    common.add_argument("--dropout", type=float, help="dropout probability (default: by preset)")
    common.add_argument("--bigrams", type=int, help="transformer: add character-bigram inputs, the pairs seen at least "
                        "N times in the training text (0: off; default: by preset)")
    common.add_argument("--seeds", type=int, help="fine-tune this many seeds (--seed, --seed + 1, ...) and average "
                        "their probabilities, an ensemble (default: by preset)")
    common.add_argument("--pretrain-text", choices=["news+reviews", "reviews"],
                        help="pretrain on news + train reviews, or the train reviews only (default: by preset)")
    common.add_argument("--no-progress", action="store_true", help="no progress bar")
    top = argparse.ArgumentParser(prog="course capstone", description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("baselines", parents=[common], help="fit (once) and show the baselines").add_argument(
        "--refit", action="store_true", help="fit again even if cached")
    sub.add_parser("pretrain", parents=[common], help="masked-LM pretraining on news + train reviews")
    sub.add_parser("finetune", parents=[common], help="train the classifier; test accuracy beside the baselines"
                   ).add_argument("--pretrained", help="a pretrain run's folder to start from")
    sub.add_parser("evaluate", parents=[common], help="the trained classifier on valid and test").add_argument(
        "--show", type=int, default=5, help="how many confident mistakes to print")
    sub.add_parser("plot", parents=[common], help="curves of every run under --out")
    sub.add_parser("record", parents=[common], help="every run under --out with hardware, versions and date, "
                   "as one JSON file (what a page reports)").add_argument("--to", required=True, help="the JSON file")
    return top


COMMANDS = {"baselines": baselines_command, "pretrain": pretrain, "finetune": finetune_command,
            "evaluate": evaluate_command, "plot": plot_command, "record": record_command}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ModelUnavailable, NotImplementedError, SettingsClash) as err:
        if int(os.environ.get("RANK", "0")) == 0:  # under torchrun, one line, not one per process
            print(f"course capstone {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
