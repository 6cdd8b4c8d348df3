"""`course capstone`: train, evaluate and compare the capstone's classifiers, the baselines beside.

    course capstone baselines                          # fit the three baselines once (cached in --out)
    course capstone finetune --model lstm --quick      # train on the reviews; valid every N steps; test at the end
    course capstone pretrain --model lstm --quick      # masked-LM pretraining on news + train reviews
    course capstone finetune --model lstm --quick --pretrained runs/capstone/pretrain-lstm-quick
    course capstone evaluate --model lstm --quick      # the trained model on valid and test; its worst mistakes
    course capstone plot                               # loss and accuracy curves into runs/capstone/plots/
    torchrun --nproc_per_node 4 -m course_lib.provided.cli capstone finetune --model transformer

``--quick`` is the CPU mode (small model, short reviews, minutes on 2 cores); without it the defaults
are sized for a GPU. Each run writes into ``--out`` (default runs/capstone) a folder such as
``finetune-lstm-quick/`` with metrics.jsonl, checkpoints/, vocab.json and summary.json. A killed run
continues where its last checkpoint left off when the same command is run again.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoints import latest_checkpoint
from ..runtime import ProcessContext, process_context, seed_everything, shard_groups
from ..training import TrainConfig, to_device, train, warmup_cosine
from .batching import Batch, Example, batch_order, batches, collate, encode_reviews
from .data import pretraining_text, reviews
from .mlm import IGNORE_INDEX, MaskedLM, MLMBatch, mlm_batches, pretraining_chunks
from .models import CLASSIFIERS, ModelUnavailable, build_classifier
from .report import cached_baselines, comparison_table, plot_runs
from .vocab import CharVocab

PRESETS: dict[str, dict[str, Any]] = {  # steps are optimizer steps; 217 batches of 64 make one epoch of train
    "quick": dict(size="quick", max_len=128, batch_size=64, steps=600, pretrain_steps=400, eval_every=200,
                  warmup=60, lr={"lstm": 2e-3, "transformer": 1e-3}),
    "full": dict(size="full", max_len=256, batch_size=128, steps=4000, pretrain_steps=20000, eval_every=500,
                 warmup=400, lr={"lstm": 1e-3, "transformer": 5e-4}),
}


def say(*parts: object) -> None:
    """Print on rank 0 only (every rank runs this command under torchrun)."""
    if process_context().is_main:
        print(*parts, flush=True)


def settings(args: argparse.Namespace, stage: str) -> dict[str, Any]:
    """The preset of ``--quick`` or full mode, overridden by the options given."""
    preset = PRESETS["quick" if args.quick else "full"]
    steps = args.steps or preset["pretrain_steps" if stage == "pretrain" else "steps"]
    return {"stage": stage, "model": args.model, "size": preset["size"], "max_len": preset["max_len"],
            "batch_size": args.batch_size or preset["batch_size"], "steps": steps, "dropout": 0.1,
            "lr": args.lr or preset["lr"].get(args.model, 1e-3), "warmup": min(preset["warmup"], steps // 10 + 1),
            "eval_every": args.eval_every or preset["eval_every"], "seed": args.seed}


def run_folder(args: argparse.Namespace, stage: str) -> Path:
    return Path(args.out) / f"{stage}-{args.model}{'-quick' if args.quick else ''}"


def train_config(run: dict[str, Any], args: argparse.Namespace, **extra: Any) -> TrainConfig:
    return TrainConfig(steps=run["steps"], lr=run["lr"], eval_every=run["eval_every"],
                       checkpoint_every=run["eval_every"], seed=run["seed"], compile=args.compile,
                       progress=not args.no_progress, **extra)


def score(model: nn.Module, examples: Sequence[Example], pad_id: int, device: torch.device,
          batch_size: int = 256) -> tuple[float, float, list[float]]:
    """Accuracy, mean loss, and each example's probability of its true label (in the given order)."""
    was_training = model.training
    model.eval()
    correct, loss_sum, order = 0, 0.0, batch_order([len(ids) for ids, _ in examples], batch_size, shuffle=False)
    true_prob = [0.0] * len(examples)
    with torch.no_grad():
        for group in order:  # sorted by length: least padding
            batch = to_device(collate([examples[i] for i in group], pad_id), device)
            logits = model(batch.tokens, batch.tokens != pad_id).float()            # (batch, classes)
            loss_sum += float(F.cross_entropy(logits, batch.labels, reduction="sum"))
            correct += int((logits.argmax(-1) == batch.labels).sum())
            probs = logits.softmax(-1).gather(1, batch.labels[:, None])[:, 0].tolist()  # (batch,)
            for index, prob in zip(group, probs):
                true_prob[index] = prob
    model.train(was_training)
    return correct / len(examples), loss_sum / len(examples), true_prob


def load_pretrained(model: nn.Module, folder: Path) -> None:
    """Copy the encoder weights of the pretraining run in ``folder`` into ``model`` (same model, same size)."""
    found = latest_checkpoint(Path(folder) / "checkpoints")
    if found is None:
        raise SystemExit(f"--pretrained {folder}: no checkpoint there; run `course capstone pretrain` first")
    encoder = {k.removeprefix("encoder."): v for k, v in found[1]["model"].items() if k.startswith("encoder.")}
    try:
        model.load_state_dict(encoder)
    except RuntimeError as err:
        raise SystemExit(f"--pretrained {folder}: its encoder does not fit this model (same --model and "
                         f"--quick as the pretraining run?): {err}") from None


def finetune(args: argparse.Namespace) -> int:
    start, run, folder = time.perf_counter(), settings(args, "finetune"), run_folder(args, "finetune")
    corpus = reviews()
    if args.pretrained:
        vocab = CharVocab.load(Path(args.pretrained) / "vocab.json")
        run["pretrained"] = str(Path(args.pretrained).resolve())
    else:
        vocab = CharVocab.build(review.text for review in corpus.train)
    train_set, valid_set, test_set = (encode_reviews(split, vocab, run["max_len"])
                                      for split in (corpus.train, corpus.valid, corpus.test))
    seed_everything(run["seed"])
    model = build_classifier(run["model"], len(vocab), vocab.pad_id, run["size"], run["max_len"], run["dropout"])
    if args.pretrained:
        load_pretrained(model, Path(args.pretrained))
    run["vocab_size"], run["parameters"] = len(vocab), sum(p.numel() for p in model.parameters())
    if process_context().is_main:
        folder.mkdir(parents=True, exist_ok=True)
        vocab.save(folder / "vocab.json")
    say(f"finetune {run['model']} ({run['parameters']:,} parameters) on {len(train_set):,} reviews, "
        f"{run['steps']} steps of {run['batch_size']} -> {folder}")
    lengths = [len(ids) for ids, _ in train_set]

    def epoch_batches(epoch: int, ctx: ProcessContext) -> Iterator[Batch]:
        for group in shard_groups(batch_order(lengths, run["batch_size"], run["seed"], epoch), ctx):
            yield collate([train_set[i] for i in group], vocab.pad_id)

    def loss_fn(net: nn.Module, batch: Batch) -> tuple[torch.Tensor, int]:
        logits = net(batch.tokens, batch.tokens != vocab.pad_id)                   # (batch, classes)
        return F.cross_entropy(logits.float(), batch.labels), len(batch.labels)

    def evaluate(net: nn.Module, device: torch.device) -> dict[str, float]:
        accuracy, loss, _ = score(net, valid_set, vocab.pad_id, device)
        return {"valid_accuracy": accuracy, "valid_loss": loss}

    result = train(model, loss_fn, epoch_batches, train_config(run, args), evaluate=evaluate, out=folder,
                   schedule=warmup_cosine(run["warmup"], run["steps"]), device=args.device, run_config=run)
    if not result.is_main:
        return 0
    device = next(result.model.parameters()).device
    valid_accuracy, _, _ = score(result.model, valid_set, vocab.pad_id, device)
    test_accuracy, _, _ = score(result.model, test_set, vocab.pad_id, device)
    summary = {**run, "device": str(device), "valid_accuracy": valid_accuracy, "test_accuracy": test_accuracy,
               "resumed_from": result.resumed_from, "train_seconds": result.train_seconds,
               "examples_per_second": result.examples_per_second, "wall_seconds": time.perf_counter() - start}
    (folder / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(comparison_table(cached_baselines(Path(args.out)), [(f"{folder.name} (this run)", valid_accuracy,
                                                               test_accuracy)]))
    print(f"{result.train_seconds:.0f} s of training ({result.examples_per_second:.0f} examples/s), "
          f"{summary['wall_seconds']:.0f} s in all; summary in {folder / 'summary.json'}")
    return 0


def pretrain(args: argparse.Namespace) -> int:
    run, folder = settings(args, "pretrain"), run_folder(args, "pretrain")
    lines = pretraining_text().lines
    vocab = CharVocab.build(lines)  # news characters get ids too
    chunks = pretraining_chunks(lines, vocab, run["max_len"])
    held_out, train_chunks = chunks[::100], [c for i, c in enumerate(chunks) if i % 100]
    seed_everything(run["seed"])
    mlm = MaskedLM(build_classifier(run["model"], len(vocab), vocab.pad_id, run["size"], run["max_len"],
                                    run["dropout"]), len(vocab))
    run["vocab_size"], run["parameters"] = len(vocab), sum(p.numel() for p in mlm.parameters())
    if process_context().is_main:
        folder.mkdir(parents=True, exist_ok=True)
        vocab.save(folder / "vocab.json")
    say(f"pretrain {run['model']} ({run['parameters']:,} parameters) on {len(train_chunks):,} chunks of at most "
        f"{run['max_len']} characters ({len(held_out):,} held out), {run['steps']} steps -> {folder}")
    lengths = [len(c) for c in train_chunks]
    held_batches = list(mlm_batches(held_out, 128, vocab, seed=12345))  # the same masks at every evaluation

    def epoch_batches(epoch: int, ctx: ProcessContext) -> Iterator[MLMBatch]:
        groups = shard_groups(batch_order(lengths, run["batch_size"], run["seed"], epoch), ctx)
        return mlm_batches(train_chunks, run["batch_size"], vocab, run["seed"], epoch, groups=groups)

    def loss_fn(net: nn.Module, batch: MLMBatch) -> tuple[torch.Tensor, int]:
        return net(batch.inputs, batch.mask, batch.targets), len(batch.inputs)

    def evaluate(net: nn.Module, device: torch.device) -> dict[str, float]:
        correct = total = 0
        loss_sum = 0.0
        for batch in held_batches:
            batch = to_device(batch, device)
            logits = net.chosen_logits(batch.inputs, batch.mask, batch.targets).float()  # (chosen, vocab)
            targets = batch.targets[batch.targets != IGNORE_INDEX]                        # (chosen,)
            loss_sum += float(F.cross_entropy(logits, targets, reduction="sum"))
            correct, total = correct + int((logits.argmax(-1) == targets).sum()), total + len(targets)
        return {"valid_mlm_loss": loss_sum / total, "valid_mlm_accuracy": correct / total}

    result = train(mlm, loss_fn, epoch_batches, train_config(run, args, find_unused_parameters=True),
                   evaluate=evaluate, out=folder, schedule=warmup_cosine(run["warmup"], run["steps"]),
                   device=args.device, run_config=run)
    if result.is_main:
        print(f"masked characters predicted on held-out text: {result.last_eval.get('valid_mlm_accuracy', 0):.1%}")
        print(f"fine-tune it: course capstone finetune --model {run['model']}{' --quick' if args.quick else ''} "
              f"--pretrained {folder}")
    return 0


def evaluate_command(args: argparse.Namespace) -> int:
    folder = run_folder(args, "finetune")
    found = latest_checkpoint(folder / "checkpoints")
    if found is None:
        raise SystemExit(f"no trained model in {folder}: run `course capstone finetune` with the same options first")
    run = found[1]["settings"]["run"]
    vocab = CharVocab.load(folder / "vocab.json")
    model = build_classifier(run["model"], len(vocab), vocab.pad_id, run["size"], run["max_len"], run["dropout"])
    model.load_state_dict(found[1]["model"])
    corpus, device = reviews(), torch.device(args.device or "cpu")
    model.to(device)
    valid_acc, _, _ = score(model, encode_reviews(corpus.valid, vocab, run["max_len"]), vocab.pad_id, device)
    test_acc, _, true_prob = score(model, encode_reviews(corpus.test, vocab, run["max_len"]), vocab.pad_id, device)
    print(f"{found[0]} (step {found[1]['step']})")
    print(comparison_table(cached_baselines(Path(args.out)), [(folder.name, valid_acc, test_acc)]))
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


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default="runs/capstone", help="folder of every run, the baselines and plots")
    common.add_argument("--quick", action="store_true", help="CPU mode: small model, minutes on 2 cores")
    common.add_argument("--model", default="lstm", choices=sorted(CLASSIFIERS), help="the classifier")
    common.add_argument("--steps", type=int, help="optimizer steps (default: by mode)")
    common.add_argument("--batch-size", type=int, help="global batch size, all processes together")
    common.add_argument("--lr", type=float, help="peak learning rate (warmup, then cosine decay)")
    common.add_argument("--eval-every", type=int, help="evaluate and checkpoint every N steps")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if present, else cpu)")
    common.add_argument("--compile", action="store_true", help="torch.compile the model")
    common.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    common.add_argument("--no-progress", action="store_true", help="no progress bar")
    top = argparse.ArgumentParser(prog="course capstone", description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("baselines", parents=[common], help="fit (once) and show the baselines").add_argument(
        "--refit", action="store_true", help="fit again even if cached")
    sub.add_parser("pretrain", parents=[common], help="masked-LM pretraining on news + train reviews")
    sub.add_parser("finetune", parents=[common], help="train the classifier; test accuracy beside the baselines"
                   ).add_argument("--pretrained", help="a pretrain run's folder to start from")
    sub.add_parser("evaluate", parents=[common], help="the trained classifier on valid and test").add_argument(
        "--show", type=int, default=5, help="how many confident mistakes to print")
    sub.add_parser("plot", parents=[common], help="curves of every run under --out")
    return top


COMMANDS = {"baselines": baselines_command, "pretrain": pretrain, "finetune": finetune,
            "evaluate": evaluate_command, "plot": plot_command}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        return COMMANDS[args.command](args)
    except (ModelUnavailable, NotImplementedError) as err:
        print(f"course capstone {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
