"""Known-wrong variants of chapter 07, keyed like MISTAKES in tests/specs/ch07.py.

Each is the reference with one mistake planted: a target fed to the decoder unshifted, smoothing mass on
the padding column or spread over V - 2 tokens, a loss averaged over padding too or a KL divergence, a
schedule that is 0 at step 0, counts max(step, 1) or lacks the d_model^-0.5 factor, and greedy decoding that
runs past EOS; then the pairs of loss mistakes (PAIRS), two planted at once. The variants call the reference's
masks.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from course_ref import seq2seq as ref
from course_ref.masks import padding_mask, target_mask


def not_shifted(tgt: Tensor, bos_id: int, pad_id: int) -> Tensor:
    return tgt.clone()  # the decoder reads the labels themselves


def on_padding(self: ref.LabelSmoothingLoss, target: Tensor, dtype: torch.dtype) -> Tensor:
    """eps spread evenly over all V columns, padding included (what F.cross_entropy(label_smoothing=) does)."""
    q = torch.full((*target.shape, self.vocab_size), self.smoothing / self.vocab_size, dtype=dtype)  # (..., V)
    q.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(q[..., :1], 1.0 - self.smoothing))
    return q.masked_fill((target == self.pad_id).unsqueeze(-1), 0.0)  # (..., V)


def over_v_minus_2(self: ref.LabelSmoothingLoss, target: Tensor, dtype: torch.dtype) -> Tensor:
    """The Annotated Transformer's q: 1 - eps on the label, eps / (V - 2) on each token but the label and padding."""
    q = torch.full((*target.shape, self.vocab_size), self.smoothing / (self.vocab_size - 2), dtype=dtype)  # (..., V)
    q.scatter_(-1, target.unsqueeze(-1), 1.0 - self.smoothing)
    q[..., self.pad_id] = 0.0
    return q.masked_fill((target == self.pad_id).unsqueeze(-1), 0.0)  # (..., V)


def loss_class(distribution: Callable | None = None, kl: bool = False, over_all: bool = False) -> type:
    """A LabelSmoothingLoss with a wrong target distribution (``distribution``), KL(q || p) = sum q (log q - log p)
    in place of the cross-entropy (``kl``, The Annotated Transformer's KLDivLoss), and/or the per-token losses
    averaged over every position, padded ones included (``over_all``); a pair of mistakes planted at once."""
    class WrongLoss(ref.LabelSmoothingLoss):
        def target_distribution(self, target: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
            if distribution is None:
                return super().target_distribution(target, dtype)
            return distribution(self, target, dtype)

        def forward(self, logits: Tensor, target: Tensor) -> Tensor:
            log_p = logits.log_softmax(dim=-1)                                   # (batch, seq, V)
            q = self.target_distribution(target, log_p.dtype)                    # (batch, seq, V)
            per_token = -(q * log_p).sum(-1)                                     # (batch, seq)
            if kl:
                per_token = per_token + torch.xlogy(q, q).sum(-1)
            if over_all:
                return per_token.mean()
            return per_token.sum() / (target != self.pad_id).sum().clamp(min=1)
    return WrongLoss


def schedule_from_zero(step: int, d_model: int, warmup: int = 4000) -> float:
    """The paper's formula with the harness's step 0 as the paper's step: 0 at the first update."""
    return d_model ** -0.5 * min(step ** -0.5 if step else math.inf, step * warmup ** -1.5)


def schedule_step_clamped(step: int, d_model: int, warmup: int = 4000) -> float:
    """The paper's formula with max(step, 1) for its step number: right at step 0, one step behind after it."""
    n = max(step, 1)
    return d_model ** -0.5 * min(n ** -0.5, n * warmup ** -1.5)


def schedule_without_scale(step: int, d_model: int, warmup: int = 4000) -> float:
    n = step + 1
    return min(n ** -0.5, n * warmup ** -1.5)


def decode_until(stop: Callable[[Tensor, int], bool]) -> Callable:
    """A greedy_decode that never pads after EOS and stops when ``stop(ys, eos_id)`` (or at max_len)."""
    @torch.no_grad()
    def greedy_decode(model, src: Tensor, max_len: int, bos_id: int, eos_id: int, pad_id: int) -> Tensor:
        src_mask = padding_mask(src, pad_id)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            hidden = model.decode(ys, memory, src_mask, target_mask(ys, pad_id))
            ys = torch.cat([ys, model.generator(hidden[:, -1]).argmax(dim=-1)[:, None]], dim=1)
            if stop(ys, eos_id):
                break
        return ys[:, 1:]
    return greedy_decode


decode_past_eos = decode_until(lambda ys, eos: False)  # always max_len tokens, EOS treated like any other
decode_until_first_eos = decode_until(lambda ys, eos: int(ys[0, -1]) == eos)  # the first sequence stops all


VARIANTS: dict[str, dict[str, Callable]] = {
    "targets_not_shifted": {"seq2seq.shift_right": not_shifted},
    "smoothing_on_padding": {"seq2seq.LabelSmoothingLoss": loss_class(on_padding)},
    "padding_counted": {"seq2seq.LabelSmoothingLoss": loss_class(over_all=True)},
    "smoothing_over_v_minus_2": {"seq2seq.LabelSmoothingLoss": loss_class(over_v_minus_2)},
    "schedule_step_clamped": {"seq2seq.noam_schedule": schedule_step_clamped},
    "schedule_zero_at_start": {"seq2seq.noam_schedule": schedule_from_zero},
    "schedule_without_scale": {"seq2seq.noam_schedule": schedule_without_scale},
    "decode_ignores_eos": {"seq2seq.greedy_decode": decode_past_eos},
    "kl_instead_of_cross_entropy": {"seq2seq.LabelSmoothingLoss": loss_class(kl=True)},
    "decode_stops_at_first_eos": {"seq2seq.greedy_decode": decode_until_first_eos},
}

# Two loss mistakes at once (a mistake is matched one at a time, so a pair is a variant of its own): each pair
# named here gives outputs that differ from both of its single mistakes on some public case.
PAIRS: dict[str, tuple[str, str, dict[str, object]]] = {
    "kl_and_smoothing_on_padding": ("kl_instead_of_cross_entropy", "smoothing_on_padding",
                                    {"distribution": on_padding, "kl": True}),
    "kl_and_padding_counted": ("kl_instead_of_cross_entropy", "padding_counted", {"kl": True, "over_all": True}),
    "kl_and_smoothing_over_v_minus_2": ("kl_instead_of_cross_entropy", "smoothing_over_v_minus_2",
                                        {"distribution": over_v_minus_2, "kl": True}),
    "smoothing_on_padding_and_padding_counted": ("smoothing_on_padding", "padding_counted",
                                                 {"distribution": on_padding, "over_all": True}),
    "smoothing_over_v_minus_2_and_padding_counted": ("smoothing_over_v_minus_2", "padding_counted",
                                                     {"distribution": over_v_minus_2, "over_all": True}),
}
VARIANTS.update({name: {"seq2seq.LabelSmoothingLoss": loss_class(**parts)} for name, (_, _, parts) in PAIRS.items()})
