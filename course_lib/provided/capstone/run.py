"""`course capstone`: train, evaluate and compare the capstone's classifiers, the baselines beside.

``DESCRIPTION`` below lists the commands and what they write; `course capstone --help` prints it, with every
help text of the options, in the learner's language (``i18n._`` at the time the parser is built; argparse's
own words "usage:", "options:" and the help option's text too, ``localise``).
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
from ..i18n import N_, _
from ..parsers import Formatter, argparse_error

DESCRIPTION = N_("""`course capstone`: train, evaluate and compare the capstone's classifiers, the baselines beside.

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
""")


def evaluate_command(args: argparse.Namespace) -> int:
    """The trained model (its last checkpoint; an ensemble: its members' best-valid models) on valid and test."""
    folder, corpus, device = run_folder(args, "finetune"), reviews(), pick_device(args.device)
    members = sorted(path for path in folder.glob("seed-*") if path.is_dir())
    if members:  # an ensemble (--seeds): the mean of its members' probabilities
        probabilities = [member_probabilities(path, device) for path in members]
        accuracy = ensemble_accuracy(probabilities)
        valid_acc, test_acc = accuracy["valid"], accuracy["test"]
        name = _("{name}: ensemble of {count}").format(name=folder.name, count=len(members))
        labels = torch.tensor([review.label for review in corpus.test])
        mean = torch.stack([p["test"] for p in probabilities]).mean(0)                 # (test, classes)
        true_prob = mean.gather(1, labels[:, None])[:, 0].tolist()                     # (test,)
        print(_("{folder}: {count} members, each at its best valid accuracy").format(folder=folder, count=len(members)))
    else:
        found = latest_checkpoint(folder / "checkpoints")
        if found is None:
            raise SystemExit(_("no trained model in {folder}: run `course capstone finetune` with the same options "
                               "first").format(folder=folder))
        run = found[1]["settings"]["run"]
        vocab = CharVocab.load(folder / "vocab.json")
        model = make_classifier(run, vocab, found[1]["model"].get("embed.keys"))
        model.load_state_dict(found[1]["model"])
        model.to(device)
        valid_acc = score(model, encode_reviews(corpus.valid, vocab, run["max_len"]), vocab.pad_id, device)[0]
        test_acc, _loss, true_prob = score(model, encode_reviews(corpus.test, vocab, run["max_len"]), vocab.pad_id,
                                           device)
        name = folder.name
        print(_("{path} (step {step})").format(path=found[0], step=found[1]["step"]))
    print(comparison_table(cached_baselines(Path(args.out)), [(name, valid_acc, test_acc)]))
    print("\n" + _("the {count} test reviews it gets most confidently wrong (label: 0 negative, 1 positive):").format(
        count=args.show))
    for index in sorted(range(len(true_prob)), key=true_prob.__getitem__)[: args.show]:
        review = corpus.test[index]
        print(_("  label {label}, p(label) {p:.3f}: {text}").format(label=review.label, p=true_prob[index],
                                                                    text=review.text[:80]))
    return 0


def baselines_command(args: argparse.Namespace) -> int:
    """The baselines (fitted once, cached in ``--out``) beside every finished fine-tuning run there."""
    models = []
    for path in sorted(Path(args.out).glob("finetune-*/summary.json")):
        summary = json.loads(path.read_text(encoding="utf-8"))
        models.append((path.parent.name, summary["valid_accuracy"], summary["test_accuracy"]))
    print(comparison_table(cached_baselines(Path(args.out), refit=args.refit), models))
    return 0


def plot_command(args: argparse.Namespace) -> int:
    """The curves of every run under ``--out``, into ``--out``/plots/."""
    written = plot_runs(Path(args.out))
    print("\n".join(map(str, written)) if written else _("no runs under {out} to plot").format(out=args.out))
    return 0


def record_command(args: argparse.Namespace) -> int:
    """Every run under ``--out``, with hardware, versions and date, as one JSON file (``--to``)."""
    if not any(Path(args.out).glob("finetune-*/summary.json")):
        raise SystemExit(_("no finished fine-tuning run under {out}: run `course capstone finetune` first").format(
            out=args.out))
    record = record_runs(Path(args.out))
    Path(args.to).parent.mkdir(parents=True, exist_ok=True)
    Path(args.to).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for run in record["finetune"]:
        past = (_("passed TF-IDF on valid at step {step} (~{seconds:.0f} s)").format(
            step=run["beats_tfidf_valid_at_step"], seconds=run["seconds_to_beat_tfidf_valid"])
            if run["beats_tfidf_valid_at_step"] else _("never passed TF-IDF on valid"))
        print(_("{name}: test {accuracy:.1%}; {past}").format(name=run["name"], accuracy=run["test_accuracy"],
                                                             past=past))
    print(_("wrote {path}").format(path=args.to))
    return 0


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error line is in the learner's language."""

    def error(self, message: str):  # noqa: ANN201 - NoReturn, as argparse's
        self.print_usage(sys.stderr)
        self.exit(2, _("{prog}: error: {message}").format(prog=self.prog, message=argparse_error(message)) + "\n")


def localise(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with argparse's own words in the learner's language: its groups' titles and the text of
    -h (argparse makes them in English before any help of ours is given)."""
    parser._positionals.title = _("positional arguments")  # noqa: SLF001 - argparse's groups, stable since 3.10
    parser._optionals.title = _("options")  # noqa: SLF001
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._HelpAction):  # noqa: SLF001
            action.help = _("show this help message and exit")
    return parser


SUBCOMMANDS = {  # name: its one-line help in `course capstone --help`
    "baselines": N_("fit (once) and show the baselines"),
    "pretrain": N_("masked-LM pretraining on news + train reviews"),
    "finetune": N_("train the classifier; test accuracy beside the baselines"),
    "evaluate": N_("the trained classifier on valid and test"),
    "plot": N_("curves of every run under --out"),
    "record": N_("every run under --out with hardware, versions and date, as one JSON file (what a page reports)"),
}


def common_options() -> argparse.ArgumentParser:
    """The options every subcommand takes, their help in the learner's language."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default="runs/capstone", help=_("folder of every run, the baselines and plots"))
    common.add_argument("--quick", action="store_true", help=_("the quick preset: small model, minutes on 2 cores"))
    common.add_argument("--preset", choices=sorted(PRESETS), help=_(
        "quick (--quick), cpu (under an hour on 2 cores, the default without a GPU) or full (GPU sizes, the "
        "default with one)"))
    common.add_argument("--impl", choices=["learner", "reference"], default="learner", help=_(
        "whose TransformerClassifier --model transformer trains: your course_lib (default) or the reference "
        "course_ref (the instructor's repository only)"))
    common.add_argument("--model", default="lstm", choices=sorted(CLASSIFIERS), help=_("the classifier"))
    common.add_argument("--steps", type=int, help=_("optimizer steps (default: by mode)"))
    common.add_argument("--batch-size", type=int, help=_("global batch size, all processes together"))
    common.add_argument("--lr", type=float, help=_("peak learning rate (warmup, then cosine decay)"))
    common.add_argument("--eval-every", type=int, help=_("evaluate and checkpoint every N steps"))
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--device", help=_("cpu, cuda, cuda:1, mps, ... (default: cuda if present, else mps on a Mac "
                                           "that has it, else cpu)"))
    common.add_argument("--compile", action="store_true", help=_("torch.compile the model"))
    common.add_argument("--threads", type=int, help=_(
        "CPU threads for torch (default: 1 on a CPU, or the count of the run being resumed; saved with the run)"))
    common.add_argument("--dropout", type=float, help=_("dropout probability (default: by preset)"))
    common.add_argument("--bigrams", type=int, help=_(
        "transformer: add character-bigram inputs, the pairs seen at least N times in the training text (0: off; "
        "default: by preset)"))
    common.add_argument("--seeds", type=int, help=_(
        "fine-tune this many seeds (--seed, --seed + 1, ...) and average their probabilities, an ensemble "
        "(default: by preset)"))
    common.add_argument("--pretrain-text", choices=["news+reviews", "reviews"],
                        help=_("pretrain on news + train reviews, or the train reviews only (default: by preset)"))
    common.add_argument("--no-progress", action="store_true", help=_("no progress bar"))
    return common


def parser() -> argparse.ArgumentParser:
    """The command's parser; every text it prints in the learner's language (the option names stay)."""
    common = common_options()
    top = localise(Parser(prog="course capstone", description=_(DESCRIPTION),
                                           formatter_class=Formatter))
    sub = top.add_subparsers(dest="command", required=True)
    made = {name: localise(sub.add_parser(name, parents=[common], help=_(text),
                                          formatter_class=Formatter))
            for name, text in SUBCOMMANDS.items()}
    made["baselines"].add_argument("--refit", action="store_true", help=_("fit again even if cached"))
    made["finetune"].add_argument("--pretrained", help=_("a pretrain run's folder to start from"))
    made["evaluate"].add_argument("--show", type=int, default=5, help=_("how many confident mistakes to print"))
    made["record"].add_argument("--to", required=True, help=_("the JSON file"))
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
