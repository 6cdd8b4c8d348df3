"""Chapter 07 checks: shift_right, LabelSmoothingLoss, noam_schedule and greedy_decode (course_lib/seq2seq.py).

Token ids are int64 and padded at the end; a target is ``y1 .. yn EOS`` then padding. The loss cases
give your LabelSmoothingLoss fixed logits and read the loss and its gradient with respect to the logits.
The decoding cases give your greedy_decode two kinds of model: a *successor model* (below), whose next
token is a fixed function of the last one, so that where each sequence must stop is known by
construction; and a small chapter 06 Transformer (yours) with fixed weights. Public cases use the seeds
below; the grader adds hidden cases with other seeds and shapes. Expected outputs come from the reference
(tests/reference/ch07.pt).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.provided.chapters import load_spec, load_spec_part
from course_lib.provided.checking import Case, CheckFailure, Outputs, ready_made_case

CHAPTER = "07"
TITLE = "Training"
MODULES = ["seq2seq.py"]  # the learner's file this chapter grades
REQUIRES = ["06"]  # masks and the Transformer (06, on 05, 04, 03 and 02)

_ch06 = load_spec("06")  # chapter 06's small Transformer: its inputs and its builder (weights loaded by name)


# ---------------------------------------------------------------- inputs (deterministic by seed): ch07_inputs.py
_inputs = load_spec_part("07", "inputs")
shift_inputs, loss_inputs, label_inputs = _inputs.shift_inputs, _inputs.loss_inputs, _inputs.label_inputs
schedule_inputs, successor_inputs, model_inputs = _inputs.schedule_inputs, _inputs.successor_inputs, _inputs.model_inputs
_targets, PAD, BOS, EOS = _inputs._targets, _inputs.PAD, _inputs.BOS, _inputs.EOS  # pad 0, bos 1, eos 2


class SuccessorModel(nn.Module):
    """A stand-in for a trained Transformer whose greedy output is known: after token v comes src[b, v].

    encode(src) -> memory = one_hot(src) (batch, vocab, vocab); decode(tgt, memory, ...) -> at each position
    i the row memory[b, tgt[b, i]], the one-hot of the successor of tgt[b, i] (batch, len, vocab);
    generator is the identity, so the logits' argmax is that successor. The masks are accepted and unused.
    """

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.generator = nn.Linear(vocab, vocab, bias=False)
        with torch.no_grad():
            self.generator.weight.copy_(torch.eye(vocab))

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        return F.one_hot(src, self.vocab).float()                                    # (batch, vocab, vocab)

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,
               tgt_mask: Tensor | None = None) -> Tensor:
        index = tgt.clamp(0, self.vocab - 1)[..., None].expand(-1, -1, self.vocab)  # (batch, len, vocab)
        return memory.gather(1, index)                                              # (batch, len, vocab)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.generator(self.decode(tgt, self.encode(src)))                   # (batch, len, vocab)


# ---------------------------------------------------------------- probes (they call your code)
def _tokens(out: object, what: str) -> Tensor:
    if not isinstance(out, Tensor):
        raise CheckFailure("{what} must return a Tensor of token ids, got {got}", what=what, got=type(out).__name__)
    return out


def padded_labels(inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """The shift cases grade the decoder input only where the label is real. Where the label is padding, what the
    input holds (the reference's pad_id, or the EOS and padding of torch.cat([bos, tgt], 1)[:, :-1]) changes no
    loss and no gradient: the loss skips those positions, and under the causal mask only they read them."""
    return {"decoder_input": inputs["tgt"] == inputs["pad_id"]}


def shift(impl, inputs: dict[str, Tensor]) -> Outputs:
    out = impl.seq2seq.shift_right(inputs["tgt"], int(inputs["bos_id"]), int(inputs["pad_id"]))
    return {"decoder_input": _tokens(out, "shift_right")}


def _criterion(impl, inputs: dict[str, Tensor]) -> nn.Module:
    return impl.seq2seq.LabelSmoothingLoss(int(inputs["vocab_size"]), int(inputs["pad_id"]),
                                           smoothing=float(inputs["smoothing"]))


def distribution(impl, inputs: dict[str, Tensor]) -> Outputs:
    return {"q": _criterion(impl, inputs).target_distribution(inputs["target"])}


def loss(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The loss, and its gradient with respect to the logits; for a batch of padding only, also the loss of
    the same logits with real labels (``target_with_labels``)."""
    criterion = _criterion(impl, inputs)
    logits = inputs["logits"].requires_grad_(True)
    value = criterion(logits, inputs["target"])
    if not isinstance(value, Tensor) or not value.requires_grad:
        raise CheckFailure("no gradient flows back from the loss to the logits: compute it with torch operations "
                           "on log_softmax(logits), without .item(), .detach() or numpy")
    value.backward()
    out = {"loss": value, "grad_logits": logits.grad}
    if "target_with_labels" in inputs:
        out["loss_with_labels"] = criterion(inputs["logits"].detach(), inputs["target_with_labels"])
    return out


def schedule(impl, inputs: dict[str, Tensor]) -> Outputs:
    d_model, warmup = int(inputs["d_model"]), int(inputs["warmup"])
    values = [impl.seq2seq.noam_schedule(int(s), d_model, warmup) for s in inputs["steps"]]
    return {"factor": torch.tensor([float(v) for v in values], dtype=torch.float64)}


def harness_schedule(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The learning rates that the harness's LambdaLR sets for the first updates, with lr = 1.

    LambdaLR sets lr * schedule(k) for update k, calling the schedule with k = 0 when it is built and
    k = 1, 2, ... at each step after. The same calls, in the same order, without building an optimizer:
    the first torch optimizer of a process imports torch._dynamo, a second of every graded submission.
    (tests/test_ch07_training.py runs the schedule inside a real LambdaLR and the harness.)"""
    d_model, warmup = int(inputs["d_model"]), int(inputs["warmup"])
    base_lr = 1.0
    rates = [base_lr * impl.seq2seq.noam_schedule(k, d_model, warmup) for k in range(int(inputs["steps"].max()) + 1)]
    return {"lr": torch.tensor([float(r) for r in rates], dtype=torch.float64)}


def _decode(impl, model: nn.Module, src: Tensor, inputs: dict[str, Tensor]) -> Outputs:
    out = impl.seq2seq.greedy_decode(model, src, int(inputs["max_len"]), int(inputs["bos_id"]),
                                     int(inputs["eos_id"]), int(inputs["pad_id"]))
    return {"tokens": _tokens(out, "greedy_decode")}


def decode_successor(impl, inputs: dict[str, Tensor]) -> Outputs:
    return _decode(impl, SuccessorModel(inputs["src"].size(1)).eval(), inputs["src"], inputs)


def decode_transformer(impl, inputs: dict[str, Tensor]) -> Outputs:
    return _decode(impl, _ch06._build_model(impl, inputs), inputs["src"], inputs)


def teacher_forcing(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The training loss of a small Transformer: logits of (src, shift_right(tgt)) against tgt."""
    model = _ch06._build_model(impl, inputs)
    pad, vocab = int(inputs["pad_id"]), int(inputs["tgt_vocab"])
    decoder_input = impl.seq2seq.shift_right(inputs["tgt"], int(inputs["bos_id"]), pad)
    value = impl.seq2seq.LabelSmoothingLoss(vocab, pad, smoothing=0.1)(model(inputs["src"], decoder_input),
                                                                       inputs["tgt"])
    return {"loss": value}


def defaults(impl, inputs: dict[str, Tensor]) -> Outputs:
    """The loss with its default smoothing (0.1) and the schedule with its default warmup (4000)."""
    criterion = impl.seq2seq.LabelSmoothingLoss(int(inputs["vocab_size"]), int(inputs["pad_id"]))
    steps = (0, 999, 3999, 4000, 20000)
    return {"loss": criterion(inputs["logits"], inputs["target"]),
            "factor": torch.tensor([float(impl.seq2seq.noam_schedule(k, 512)) for k in steps], dtype=torch.float64)}


PROBES = {"shift": shift, "distribution": distribution, "loss": loss, "schedule": schedule,
          "harness": harness_schedule, "successor": decode_successor, "transformer": decode_transformer,
          "teacher": teacher_forcing, "defaults": defaults}

# ---------------------------------------------------------------- the public cases (14 points)
# PyTorch's ready-made label-smoothed loss (F.cross_entropy(..., label_smoothing=)) gives no points for the
# loss, and the model is chapter 06's (yours), never PyTorch's. Your own earlier chapters are not ready-mades.
READY_MADE = {"seq2seq.py": ["cross_entropy", "CrossEntropyLoss", "Transformer", "TransformerDecoder*",
                             "MultiheadAttention", "scaled_dot_product_attention"]}

LOSS_HINT = ("LabelSmoothingLoss(vocab_size, pad_id, smoothing)(logits, target): logits (batch, seq, V), target "
             "(batch, seq) int64 -> a scalar; target_distribution(target) -> (batch, seq, V).")
DECODE_HINT = ("greedy_decode(model, src, max_len, bos_id, eos_id, pad_id): encode src once with "
               "padding_mask(src, pad_id), start from a (batch, 1) column of BOS, and each step call "
               "model.decode(ys, memory, src_mask, target_mask(ys, pad_id)), model.generator on the last "
               "position and argmax; return the tokens after BOS, (batch, steps) int64.")

CASES = [
    Case("shift_right: BOS, then the target without its last token", 1.0, "shift", lambda s: shift_inputs(s),
         seed=701, about="3 targets of 6 (6, 4 and 2 tokens with their EOS); bos 1, pad 0; where the target is "
                         "padded the input is not graded (no loss reads it)", ignore=padded_labels),
    Case("shift_right with other ids", 0.5, "shift",
         lambda s: shift_inputs(s, batch=4, seq=5, vocab=9, bos=7, eos=8, pad=3), seed=702,
         about="bos 7, pad 3 come from the arguments; a full row loses its last token (its EOS)",
         ignore=padded_labels),
    Case("target distribution: eps spread over every token but padding", 1.0, "distribution",
         lambda s: loss_inputs(s, vocab=9), seed=703,
         about="q (3, 6, 9): 1 - eps + eps / (V - 1) on the label, eps / (V - 1) on the others, 0 on the pad "
               "column and on padded labels", hint_if_raises=LOSS_HINT),
    Case("label-smoothed loss and its gradient, padding ignored", 1.5, "loss", lambda s: loss_inputs(s), seed=704,
         about="the mean over the 12 real labels of -sum q log softmax(logits), and d loss / d logits",
         hint_if_raises=LOSS_HINT),
    Case("a batch of padding only gives a loss of 0", 1.0, "loss",
         lambda s: loss_inputs(s, batch=2, padding_rows=2), seed=705,
         about="no real label at all: the loss is 0 (not NaN) and so is its gradient; the same logits with "
               "real labels give the reference's loss", hint_if_raises=LOSS_HINT,
         hint="With no real label the mean has nothing to average: divide by the number of real labels "
              "clamped to at least 1, so that the loss is 0, not 0 / 0 = NaN.", hint_on=("nonfinite",)),
    Case("smoothing 0 is the cross-entropy; pad id 4", 0.5, "loss",
         lambda s: loss_inputs(s, vocab=8, pad=4, smoothing=0.0, padding_rows=1), seed=706,
         about="eps = 0: -log p(label) averaged over the real labels; the last row is all padding; the pad id "
               "comes from the argument",
         hint_if_raises=LOSS_HINT),
    Case("float64 logits, float64 loss", 0.5, "loss", lambda s: loss_inputs(s, dtype=torch.float64, smoothing=0.2),
         seed=707, about="the loss keeps the logits' dtype", rtol=1e-7, atol=1e-9, hint_if_raises=LOSS_HINT),
    Case("a single real label", 0.5, "loss", lambda s: loss_inputs(s, batch=2, seq=1, padding_rows=1), seed=714,
         about="one label in the batch (the other row is padding): the mean over one label is that label's loss",
         hint_if_raises=LOSS_HINT),
    Case("noam_schedule at the paper's settings", 1.0, "schedule", lambda s: schedule_inputs(s), seed=708,
         about="d_model 512, warmup 4000, steps 0 .. 99999 counted from 0: rises to 512^-0.5 4000^-0.5 at step "
               "3999, never 0", rtol=1e-6, atol=1e-12),
    Case("noam_schedule as the harness's schedule", 1.0, "harness",
         lambda s: schedule_inputs(s, d_model=64, warmup=10, steps=(0, 29)), seed=709,
         about="LambdaLR(optimizer, noam_schedule) with lr 1: the rates of the first 30 updates, the first > 0",
         rtol=1e-6, atol=1e-12),
    Case("greedy_decode stops each sequence at its EOS", 1.5, "successor", lambda s: successor_inputs(s), seed=710,
         about="a model whose next token is known: sequences of 4, 1 and 6 tokens with their EOS, max_len 9: "
               "(3, 6), each padded after its EOS", hint_if_raises=DECODE_HINT),
    Case("greedy_decode stops at max_len when a sequence never ends", 1.0, "successor",
         lambda s: successor_inputs(s, batch=4, lengths=(3, 0, 5, 2), max_len=7), seed=711,
         about="sequence 1 never produces EOS: (4, 7), the others padded after their EOS", hint_if_raises=DECODE_HINT),
    Case("greedy_decode with a Transformer", 1.0, "transformer", lambda s: model_inputs(s), seed=712,
         about="a small Transformer (yours, chapter 06) with fixed weights: its first 6 greedy tokens",
         hint_if_raises=DECODE_HINT),
    Case("teacher forcing: a Transformer's loss on shift_right(target)", 1.0, "teacher", lambda s: model_inputs(s),
         seed=713, about="LabelSmoothingLoss(model(src, shift_right(tgt, 1, 0)), tgt) with eps 0.1",
         hint_if_raises=LOSS_HINT),
    Case("defaults: smoothing 0.1, warmup 4000", 0.5, "defaults", lambda s: loss_inputs(s), seed=715,
         about="LabelSmoothingLoss(vocab_size, pad_id) smooths by 0.1; noam_schedule(step, 512) warms up for 4000 "
               "steps", rtol=1e-6, atol=1e-9, hint_if_raises=LOSS_HINT),
    ready_made_case(READY_MADE, 0.5, about="no F.cross_entropy(label_smoothing=...) nor PyTorch's Transformer "
                                           "(read from the source, not run)"),
]

# ---------------------------------------------------------------- known mistakes and their messages
MISTAKES = {
    "targets_not_shifted": "The decoder reads the target itself, not the target shifted right: position t then sees "
                           "the very token it must predict, and the model learns to copy its input (a tiny training "
                           "loss, nonsense when it generates). The input is BOS followed by tgt[:, :-1]: "
                           "torch.cat([a column of bos_id, tgt[:, :-1]], dim=1), padded where tgt is padded.",
    "smoothing_on_padding": "The smoothed target gives probability to the padding token: padding is never a right "
                            "answer, so its column must get 0. Spread eps over the other V - 1 tokens, "
                            "eps / (V - 1) each (the label included), and set q[..., pad_id] = 0.",
    "padding_counted": "The loss is averaged over every position, padding included, so it shrinks as the padding "
                       "grows: sum the per-token losses of the real labels and divide by their number, "
                       "(target != pad_id).sum(), clamped to at least 1.",
    "schedule_zero_at_start": "The schedule is 0 (or undefined) at step 0, so the first update does nothing (or "
                              "crashes on 0 ** -0.5): the harness counts steps from 0, and the formula needs n >= 1 (the "
                              "paper does not say how it counts); put step + 1 in place of n in d_model^-0.5 * "
                              "min(n^-0.5, n * warmup^-1.5).",
    "schedule_without_scale": "The schedule leaves out the factor d_model^-0.5, so its peak is warmup^-0.5 instead of "
                              "(d_model * warmup)^-0.5 (22.6 times too large at d_model 512): multiply by "
                              "d_model ** -0.5.",
    "kl_instead_of_cross_entropy": "The loss is the KL divergence KL(q || p) = sum q (log q - log p), not the "
                                   "cross-entropy -sum q log p: the two differ by the entropy of q (the same "
                                   "gradients, another value). Return -(q * log_softmax(logits)).sum(-1), averaged "
                                   "over the real labels.",
    "smoothing_over_v_minus_2": "The smoothed target puts 1 - eps on the label and eps / (V - 2) on every other token but "
                                "padding (The Annotated Transformer's count): here eps is spread uniformly over the "
                                "V - 1 tokens other than padding (the label among them, and BOS too, though it is "
                                "never a label), so the label gets "
                                "1 - eps + eps / (V - 1) and each other token but padding eps / (V - 1).",
    "schedule_step_clamped": "The schedule takes max(step, 1) as the formula's n: steps 0 and 1 get the same "
                             "rate and every later step is read one step early. The harness counts from 0 and the "
                             "formula needs n >= 1, so harness step k is n = k + 1, at every step.",
    "decode_stops_at_first_eos": "Decoding stops as soon as one sequence (the first) produces EOS: the others are "
                                 "cut short. Keep a flag per sequence and stop when every sequence has its EOS, or at "
                                 "max_len.",
    "decode_ignores_eos": "Decoding goes on after EOS: a sequence is finished at its first EOS; after it, append "
                          "pad_id, and stop the loop once every sequence has its EOS (or at max_len).",
}

# Two loss mistakes at once (a mistake is matched one at a time): each pair has a message of its own, naming both.
_PAIRS = {"kl_and_smoothing_on_padding": ("kl_instead_of_cross_entropy", "smoothing_on_padding"),
          "kl_and_padding_counted": ("kl_instead_of_cross_entropy", "padding_counted"),
          "kl_and_smoothing_over_v_minus_2": ("kl_instead_of_cross_entropy", "smoothing_over_v_minus_2"),
          "smoothing_on_padding_and_padding_counted": ("smoothing_on_padding", "padding_counted"),
          "smoothing_over_v_minus_2_and_padding_counted": ("smoothing_over_v_minus_2", "padding_counted")}
MISTAKES.update({pair: f"Two mistakes at once. First: {MISTAKES[one]} Second: {MISTAKES[two]}"
                 for pair, (one, two) in _PAIRS.items()})

# A known mistake that crashes instead of returning wrong values: the paper's formula with step 0 divides by 0.
RAISES = {"schedule_zero_at_start": r"ZeroDivisionError: 0\.0 cannot be raised to a negative power"}
