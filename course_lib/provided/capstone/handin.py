"""The trained capstone model as a hand-in: one fine-tuning run packed safely, and read back by the grader.

    runs = find_runs(Path("runs"))              # every finished fine-tuning run, best valid accuracy first
    pack(runs[0], Path("submission"))           # -> submission/capstone/{model.safetensors, run.json, vocab.json}
    handin = read_handin(Path("submission"))    # raises HandInError, with what to do, on anything wrong
    model = build_model(handin)                 # the run's classifier with its weights, in evaluation mode

A hand-in is three files in ``capstone/``: the weights as safetensors (tensors only: reading them runs no
code, unlike a pickled ``.pt``), float32, or float16 where float32 would pass ``MAX_BYTES``; the run's
``summary.json`` as ``run.json`` (its settings, seed and the accuracies it claims); its vocabulary. The
weights are those of the run's best valid accuracy (``best.pt``), else of its last step. ``pack`` refuses a
run whose weights no longer fit the learner's current ``TransformerClassifier`` (trained with another
version of the code), or that gives another valid accuracy than the run recorded.

``read_handin`` checks only what a file can say (format, size, finite values, the settings it needs);
whether the weights fit a class is ``build_model``'s question, and the accuracy the grader's.
"""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from ..i18n import _
from .noise import standard_error
from .vocab import SPECIALS, CharVocab

FOLDER = "capstone"                  # in a submission
WEIGHTS, RUN, VOCAB = "model.safetensors", "run.json", "vocab.json"
CHAPTER = "08"                       # the chapter whose submission carries the trained model
POINTS = 3.0                         # for reaching BAR, in chapter 08's total
# The bar on test accuracy, set from the recorded quick-preset runs (book/data/capstone_cpu_*.json, the
# weights of their best valid accuracy): the weakest, 81.0%, less three standard errors of a 1,723-review test
# set (2.8 points), rounded down to a whole percent. A quick run of right code clears it; a model that fails
# chapter 08's padding checks, or one trained for a few steps, does not. noise.derive_bar is the rule;
# solutions/tests/capstone/test_trained.py and the book's chapter 08 derive it again from the records.
BAR = 0.78
TFIDF_TEST = 0.839                   # the TF-IDF + LR baseline's test accuracy (README.md), shown beside
MAX_BYTES = 16 * 2 ** 20             # the weights: 4.2 M parameters in float32 (the quick run with bigrams: float16)
NEEDED = ("model", "preset", "size", "max_len", "dropout", "vocab_size", "valid_accuracy", "test_accuracy")
MAX_VOCAB = 100_000                  # the vocabulary a hand-in may build a model with (the train split's: 3,652)
PICKLE_STARTS = (b"PK\x03\x04", b"\x80")  # torch.save's zip archive, a bare pickle: named when not safetensors
Impl = Literal["learner", "reference"]


class HandInError(Exception):
    """Why a run cannot be handed in, or a hand-in cannot be graded: the message (in the learner's language,
    i18n's ``_``) names the thing and the fix. ``missing``: the submission hands in no model at all."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class HandIn:
    """A hand-in as read: the weights by parameter name, the run's summary and its vocabulary."""
    state: dict[str, torch.Tensor]
    run: dict[str, Any]
    vocab: CharVocab
    folder: Path

    @property
    def claimed_test_accuracy(self) -> float:
        """The test accuracy the run's summary claims for the weights handed in (best valid, else last step)."""
        best = self.run.get("best_valid") or {}
        return float(best.get("test_accuracy", self.run["test_accuracy"]))


def weights_of(run_folder: Path) -> dict[str, torch.Tensor]:
    """The weights of a fine-tuning run: its best valid accuracy's (best.pt), else its newest checkpoint's."""
    from ..checkpoints import latest_checkpoint
    from .stages import BEST_FILE
    best = run_folder / BEST_FILE
    if best.is_file():
        return torch.load(best, map_location="cpu", weights_only=True)["model"]
    found = latest_checkpoint(run_folder / "checkpoints")
    if found is None:
        raise HandInError(_("{folder}: no weights (neither {best} nor checkpoints/): run `course capstone "
                            "finetune` to its end first").format(folder=run_folder, best=BEST_FILE))
    return found[1]["model"]


def find_runs(root: Path) -> list[Path]:
    """The finished fine-tuning runs under ``root`` (a folder with summary.json and vocab.json), best valid first."""
    def valid(folder: Path) -> float:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        return float((summary.get("best_valid") or summary).get("valid_accuracy", -1.0))
    found = [p.parent for p in Path(root).glob("**/summary.json")
             if (p.parent / VOCAB).is_file() and json.loads(p.read_text(encoding="utf-8")).get("stage") == "finetune"]
    return sorted(found, key=valid, reverse=True)


def _float16_if_needed(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    size = sum(t.numel() * t.element_size() for t in state.values())
    if size <= MAX_BYTES:
        return state
    half = {k: t.half() if t.is_floating_point() else t for k, t in state.items()}
    if sum(t.numel() * t.element_size() for t in half.values()) > MAX_BYTES:
        raise HandInError(_("the run's weights are {size} MB, over the hand-in's {limit} MB even in float16: hand "
                            "in a run of the quick or cpu preset").format(size=f"{size / 2 ** 20:.0f}",
                                                                          limit=f"{MAX_BYTES / 2 ** 20:.0f}"))
    return half


def pack(run_folder: Path, dest: Path, impl: Impl = "learner", tolerance: float = 0.005) -> Path:
    """Write ``dest/capstone/`` from the run in ``run_folder``; returns that folder. Before writing, the weights
    are loaded into the ``impl`` classifier and scored on valid: another accuracy than the run's (beyond
    ``tolerance``) means the code changed since the run, and nothing is packed."""
    run_folder = Path(run_folder)
    summary_file = run_folder / "summary.json"
    if not summary_file.is_file():
        raise HandInError(_("{folder}: not a finished fine-tuning run (no summary.json); the runs are the folders "
                            "`course capstone finetune --out DIR` writes, e.g. {example}").format(
            folder=run_folder, example="runs/q2-scratch/finetune-transformer-quick"))
    run = json.loads(summary_file.read_text(encoding="utf-8"))
    state = {k: v.detach().cpu().contiguous() for k, v in weights_of(run_folder).items()}
    handin = HandIn(state, run, CharVocab.load(run_folder / VOCAB), run_folder)
    model = build_model(handin, impl)
    recorded = float((run.get("best_valid") or run)["valid_accuracy"])
    measured, _se = accuracy(model, handin, "valid")
    if abs(measured - recorded) > tolerance:
        raise HandInError(_("{folder}: its weights give {measured} on valid with your current code, the run "
                            "recorded {recorded}: your classifier changed since this run. Train it again (or hand "
                            "in another run with --run)").format(folder=run_folder, measured=f"{measured:.1%}",
                                                                 recorded=f"{recorded:.1%}"))
    from safetensors.torch import save_file
    out = Path(dest) / FOLDER
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    save_file(_float16_if_needed(state), str(out / WEIGHTS), metadata={"run": run_folder.name})
    (out / RUN).write_text(json.dumps(run, indent=1), encoding="utf-8")
    shutil.copyfile(run_folder / VOCAB, out / VOCAB)
    return out


def _size_error(size: int) -> HandInError | None:
    if size > MAX_BYTES + 2 ** 20:  # the header's share on top of the tensors
        return HandInError(_("{file} is {size} MB, over the {limit} MB a hand-in may have: `make submit CH=08` "
                             "packs a quick run well under it").format(file=f"{FOLDER}/{WEIGHTS}",
                                                                       size=f"{size / 2 ** 20:.0f}",
                                                                       limit=f"{MAX_BYTES / 2 ** 20:.0f}"))
    return None


def is_safetensors(data: bytes) -> bool:
    """Whether ``data`` has safetensors' structure: eight bytes giving the length of a JSON header (little-endian),
    the header, then the tensors. Told by structure, not by a first byte: a header of 128 bytes mod 256 makes the
    file start with 0x80, a pickle's first byte (one header length in 32)."""
    if len(data) < 10:
        return False
    length = int.from_bytes(data[:8], "little")
    return 2 <= length <= len(data) - 8 and data[8:9] == b"{"


def _weights(data: bytes) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file's bytes (read into memory, never mapped: a mapped file that changes
    underneath kills the reader); float16 ones as float32."""
    if (error := _size_error(len(data))) is not None:
        raise error
    if not is_safetensors(data) and data.startswith(PICKLE_STARTS):
        raise HandInError(_("{file} is a pickle (torch.save), which the grader never loads: it could run code. "
                            "Hand in with `make submit CH=08`, which writes safetensors").format(
            file=f"{FOLDER}/{WEIGHTS}"))
    from safetensors import SafetensorError
    from safetensors.torch import load
    try:
        state = load(data)
    except (SafetensorError, OSError, ValueError) as err:
        raise HandInError(_("{file} is not a readable safetensors file ({error}): pack it again with `make "
                            "submit CH=08`").format(file=f"{FOLDER}/{WEIGHTS}", error=err)) from None
    bad = [k for k, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise HandInError(_("{file}: weights that are NaN or infinite in {names}: the run diverged; hand in "
                            "another run").format(file=f"{FOLDER}/{WEIGHTS}",
                                                  names=", ".join(sorted(bad)[:3]) + (" ..." if len(bad) > 3 else "")))
    return {k: t.float() if t.is_floating_point() else t for k, t in state.items()}


def from_bytes(weights: bytes | None, run_text: bytes | None, vocab_text: bytes | None, where: Path) -> HandIn:
    """A hand-in from its three files' bytes (None: the file is missing), checked; raises HandInError."""
    if weights is None:
        raise HandInError(_("no trained model in the submission ({file} is missing): hand one in with `make "
                            "submit CH=08` after a `course capstone finetune` run").format(
            file=f"{FOLDER}/{WEIGHTS}"), missing=True)
    state = _weights(weights)
    try:
        run = json.loads(run_text or b"")
        data = json.loads(vocab_text or b"")
        if tuple(data.get("specials", ())) != SPECIALS:
            raise ValueError(f"its specials are {data.get('specials')}, not {list(SPECIALS)}")
        vocab = CharVocab(data["chars"])
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise HandInError(_("{folder}/: {run} or {vocab} missing or unreadable ({error}): pack it again with "
                            "`make submit CH=08`").format(folder=FOLDER, run=RUN, vocab=VOCAB, error=err)) from None
    missing = [k for k in NEEDED if k not in run] if isinstance(run, dict) else list(NEEDED)
    if missing:
        raise HandInError(_("{file} lacks the run's {keys}: it is not a fine-tuning run's summary.json; pack it "
                            "again with `make submit CH=08`").format(file=f"{FOLDER}/{RUN}", keys=", ".join(missing)))
    if (bad := _bad_settings(run)) is not None:
        raise HandInError(_("{file}: {bad}: it is not what `course capstone finetune` writes; pack a run again "
                            "with `make submit CH=08`").format(file=f"{FOLDER}/{RUN}", bad=bad))
    if run["vocab_size"] != len(vocab):
        raise HandInError(_("{folder}/: the run was trained on {trained} tokens but {vocab} has {has}: the files "
                            "come from different runs").format(folder=FOLDER, trained=run["vocab_size"], vocab=VOCAB,
                                                               has=len(vocab)))
    return HandIn(state, run, vocab, where)


def _bad_settings(run: dict[str, Any]) -> str | None:
    """What is wrong with the settings a model is built from (None: nothing). Bounded before anything is
    built, since a model's buffers follow them: the size and length are those of the run's preset (what
    `course capstone finetune` writes), the rest within what any command could give."""
    from .stages import PRESETS

    def number(key: str, low: float, high: float, kind: type = int) -> bool:
        value = run.get(key)
        return isinstance(value, kind) and not isinstance(value, bool) and low <= value <= high
    preset = PRESETS.get(run["preset"]) if isinstance(run.get("preset"), str) else None
    if preset is None:
        return _("preset {value} is none of {presets}").format(value=_shown(run.get("preset")),
                                                                presets=", ".join(sorted(PRESETS)))
    for key in ("size", "max_len"):
        if run.get(key) != preset[key] or isinstance(run.get(key), bool):
            return _("{key} {value} is not the {preset} preset's ({expected})").format(
                key=key, value=_shown(run.get(key)), preset=run["preset"], expected=repr(preset[key]))
    if not (number("dropout", 0.0, 0.99, float) or number("dropout", 0, 0)):
        return _("dropout {value} is not a probability below 1").format(value=_shown(run.get("dropout")))
    if not number("vocab_size", len(SPECIALS) + 1, MAX_VOCAB):
        return _("vocab_size {value} is not a whole number from {low} to {high}").format(
            value=_shown(run.get("vocab_size")), low=len(SPECIALS) + 1, high=f"{MAX_VOCAB:,}")
    if "seed" in run and not number("seed", -2 ** 63, 2 ** 63 - 1):
        return _("seed {value} is not a whole number").format(value=_shown(run.get("seed")))
    device = run.get("device", "cpu")
    if not (isinstance(device, str) and len(device) <= 16 and device.replace(":", "").isalnum() and device.isascii()):
        return _("device {value} is not a device's name (cpu, cuda:0, mps)").format(value=_shown(device))
    return None


def _shown(value: object, width: int = 40) -> str:
    """A learner's value as a message shows it: its repr (control characters escaped), at most ``width`` long."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def read_handin(submission: Path) -> HandIn:
    """The hand-in of a submission folder, checked file by file; raises HandInError with what is wrong."""
    folder = Path(submission) / FOLDER
    weights = folder / WEIGHTS
    if weights.is_file() and (error := _size_error(weights.stat().st_size)) is not None:
        raise error  # before a byte of it is read

    def data(name: str) -> bytes | None:
        return (folder / name).read_bytes() if (folder / name).is_file() else None
    return from_bytes(data(WEIGHTS), data(RUN), data(VOCAB), folder)


def build_model(handin: HandIn, impl: Impl = "learner") -> nn.Module:
    """The run's classifier (``impl``: the learner's class or the reference's) with the hand-in's weights, in
    evaluation mode; HandInError when they do not fit (missing, extra or wrongly shaped parameters).

    The shapes are compared on a skeleton first (the model built on PyTorch's ``meta`` device, which allocates
    nothing): a declared shape such as ``[N, 0]`` holds no bytes, so every size check on the file passes it, and
    a model sized from it (an embedding of N rows) would be gigabytes. Only weights that fit are built for real,
    and those are bounded by the file's size."""
    from .models import ModelUnavailable
    from .stages import make_classifier
    if handin.run["model"] != "transformer":
        raise HandInError(_("the run trained --model {model}: the capstone grades your TransformerClassifier; hand "
                            "in a `--model transformer` run").format(model=_shown(handin.run["model"])))
    run, keys = {**handin.run, "impl": impl}, handin.state.get("embed.keys")
    try:
        try:
            with torch.device("meta"):
                skeleton = make_classifier(run, handin.vocab, None if keys is None else torch.empty(len(keys)))
        except ModelUnavailable:
            raise
        except Exception:  # noqa: BLE001 - a learner's class that cannot be built on meta: their own machine
            if impl == "reference":
                raise
            skeleton = None
        if skeleton is not None:
            _fit(skeleton.state_dict(), handin.state)
        model = make_classifier(run, handin.vocab, keys)
    except ModelUnavailable as err:
        raise HandInError(str(err)) from None
    expected = model.state_dict()
    _fit(expected, handin.state)
    model.load_state_dict({k: handin.state[k].to(v.dtype) for k, v in expected.items()})
    return model.eval()


def _fit(expected: dict[str, torch.Tensor], state: dict[str, torch.Tensor]) -> None:
    """HandInError unless ``state`` has exactly the parameters of ``expected``, each of its shape."""
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    shapes = [_("{name} {shape} (the model's: {expected})").format(name=k, shape=tuple(state[k].shape),
                                                                    expected=tuple(v.shape))
              for k, v in expected.items() if k in state and state[k].shape != v.shape]
    if missing or extra or shapes:
        said = [_("missing {names}").format(names=", ".join(missing[:3])) * bool(missing),
                _("unexpected {names}").format(names=", ".join(
                    k if k.isprintable() and len(k) < 60 else _shown(k) for k in extra[:3])) * bool(extra),
                _("wrong shapes: {shapes}").format(shapes="; ".join(shapes[:3])) * bool(shapes)]
        raise HandInError(_("the weights do not fit the classifier their settings build ({what}): hand in a run "
                            "trained with this code").format(what="; ".join(s for s in said if s)))


def digest(state: dict[str, torch.Tensor]) -> str:
    """Twelve hex digits naming a set of weights (names, dtypes, shapes and values): a verdict of `course
    capstone verify` belongs to the weights it was made on, not to a later hand-in."""
    import hashlib
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:12]


def accuracy(model: nn.Module, handin: HandIn, split: str = "test") -> tuple[float, float]:
    """(accuracy, one standard error) of ``model`` on a split of the reviews, encoded with the hand-in's vocabulary."""
    from .batching import encode_reviews
    from .data import reviews
    from .stages import score
    examples = encode_reviews(reviews().split(split), handin.vocab, handin.run["max_len"])
    measured, _loss, _probabilities = score(model, examples, handin.vocab.pad_id, torch.device("cpu"))
    return measured, standard_error(measured, len(examples))
